/**
 * No command outlives the server that started it, or its own time limit: `agent-api serve` runs a command
 * that sleeps and then writes a file, and the server is killed (SIGKILL: no clean-up of its own runs) or
 * frozen (SIGSTOP: as an event loop held by one request). The file must never appear and, a few seconds
 * after the sleep would have ended, no process of the command may be left: neither a process of its sandbox
 * user nor any process whose command line holds the command. A frozen server's command filling the disk
 * with many files, each within what is left, is stopped near the quota all the same.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rmdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  PHRASES,
  removeDir,
  type ServeCommand,
  sendTurn,
  sleep,
  startServeCommand,
} from "../test/sandbox-server.ts";

const BIN = fileURLToPath(new URL("../../bin/agent-api", import.meta.url));

interface Survivor {
  pid: number;
  uid: number;
  state: string;
  cmdline: string;
}

/**
 * Live processes (zombies are dead: they only wait for a parent to reap them) that belong to the command: of
 * its sandbox user, or with `token` on their command line (the launcher, bubblewrap and what runs as root).
 * A server that is not root runs commands as its own user, which is also this test's: then only the token.
 */
function survivors(sandboxUid: number, token: string): Survivor[] {
  const found: Survivor[] = [];
  const byUser = sandboxUid !== process.getuid?.();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, "utf8");
      const state = /^State:\s+(\S)/m.exec(status)?.[1] ?? "?";
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
      if (state === "Z" || state === "X") continue;
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ");
      if ((byUser && uid === sandboxUid) || cmdline.includes(token))
        found.push({ pid: Number(entry), uid, state, cmdline });
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}

async function until(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await sleep(50);
  }
  return condition();
}

/**
 * cgroup v1 groups of the server's own, below the test's: a server starting elsewhere meanwhile (another test,
 * another run on this machine) empties the groups of dead servers it finds beside its own, which would kill
 * a command the dead server left and hide that it outlived the server. On v2 that sweep does not reach them.
 */
async function privateGroups(tag: string): Promise<{ procsFiles: string[]; remove(): Promise<void> }> {
  const dirs: string[] = [];
  const own = readFileSync("/proc/self/cgroup", "utf8");
  for (const controller of ["pids", "memory", "cpu"]) {
    const groupPath = new RegExp(`^\\d+:(?:[^:]*,)?${controller}(?:,[^:]*)?:(.*)$`, "m").exec(own)?.[1];
    const base = `/sys/fs/cgroup/${controller}${groupPath ?? "/"}`;
    if (groupPath === undefined || !existsSync(join(base, "cgroup.procs"))) continue;
    const dir = join(base, tag);
    await mkdir(dir).catch(() => undefined);
    if (existsSync(join(dir, "cgroup.procs"))) dirs.push(dir);
  }
  /** Leaves first: a group with children cannot be removed. */
  const removeTree = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => []))
      if (entry.isDirectory()) await removeTree(join(dir, entry.name));
    for (let round = 0; round < 100; round++) {
      try {
        await rmdir(dir);
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EBUSY") return;
        await sleep(20);
      }
    }
  };
  return {
    procsFiles: dirs.map((dir) => join(dir, "cgroup.procs")),
    async remove() {
      for (const dir of dirs) await removeTree(dir);
    },
  };
}

const conversationDir = (dataDir: string, id: string) =>
  join(dataDir, "sandboxes", "conversations", createHash("sha256").update(id).digest("hex"));

interface Running {
  served: ServeCommand;
  dataDir: string;
  /** The conversation's working directory. */
  dir: string;
  /** The sandbox user's uid (the owner of what the command wrote). */
  uid: number;
  /** The turn, settling when its stream ends or is cut. */
  turn: Promise<Awaited<ReturnType<typeof sendTurn>> | Error>;
  /** When the command had started (its first file appeared). */
  startedAt: number;
  groups: Awaited<ReturnType<typeof privateGroups>>;
}

/**
 * Starts `agent-api serve` with `flags` and a turn running `echo > started; BODY; echo > marker`, and
 * resolves once the command has started.
 */
async function startCommand(flags: string[], body: string, token: string): Promise<Running> {
  const dataDir = await mkdtemp(join(tmpdir(), "agent-api-death-"));
  const groups = await privateGroups(`agent-api-death-test-${process.pid}-${token.replace(".", "-")}`);
  try {
    const quoted = (text: string) => `'${text.replaceAll("'", "'\\''")}'`;
    const served = await startServeCommand([
      "sh",
      "-c",
      `for f in ${groups.procsFiles.map(quoted).join(" ")}; do echo $$ > "$f"; done; exec "$0" "$@"`,
      BIN,
      "serve",
      "--port",
      "0",
      "--data",
      dataDir,
      "--log-level",
      "warn",
      ...flags,
    ]);
    const id = `outlive-${token}`;
    const dir = conversationDir(dataDir, id);
    const turn = sendTurn(
      served.url,
      "demo-agent",
      PHRASES.run(`echo up > started; ${body}; echo late > marker`),
      { stream_tool_calls: true, conversation_id: id },
    ).catch((error: Error) => error);
    // Generous: a loaded 2-core machine may take seconds to start the first sandbox.
    if (!(await until(() => existsSync(join(dir, "started")), 20_000)))
      throw new Error(`the command never started: ${served.stdout()}`);
    const uid = statSync(join(dir, "started")).uid;
    return { served, dataDir, dir, uid, turn, startedAt: Date.now(), groups };
  } catch (error) {
    await removeDir(dataDir);
    await groups.remove();
    throw error;
  }
}

/** Kills what a failing run left behind (by pid, never by name), then the server and its data. */
async function cleanUp(running: Running | undefined, token: string): Promise<void> {
  if (!running) return;
  for (const { pid } of survivors(running.uid, token)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Gone meanwhile.
    }
  }
  try {
    process.kill(running.served.pid, "SIGCONT");
  } catch {
    // Not running.
  }
  await running.served.stop().catch(() => undefined);
  await removeDir(running.dataDir);
  await running.groups.remove();
}

describe.concurrent("no command outlives the server or its time limit", {
  tags: ["sandbox"],
  timeout: 90_000,
}, () => {
  it.for([
    { killed: "the server", group: false, token: `5.0${process.pid}1` },
    // Its spawner too, as a SIGKILL to its process group does: what the spawner would have done on the
    // server's death never runs, and the parent-death signals alone must end the command.
    { killed: "the server and its spawner", group: true, token: `5.0${process.pid}3` },
  ])("SIGKILL to $killed takes the running command with it, within seconds", async ({ group, token }) => {
    let running: Running | undefined;
    try {
      // The command's own limit (60 s) is far past its sleep: only the server's death can stop it.
      running = await startCommand(["--tool-timeout-seconds", "60"], `sleep ${token}`, token);
      const { served, dir, uid, startedAt } = running;
      // The scan sees the command while it runs: an empty scan later means it is gone, not that it looked wrong.
      expect(survivors(uid, token).length).toBeGreaterThan(0);
      // The server leads its process group (started detached); the spawner is in it, the launchers are not.
      process.kill(group ? -served.pid : served.pid, "SIGKILL");
      const gone = await until(() => survivors(uid, token).length === 0, 3_000);
      // Past the end of the sleep, with room for a slow write.
      await sleep(Math.max(0, startedAt + 5_000 + 3_000 - Date.now()));
      expect(existsSync(join(dir, "marker"))).toBe(false);
      expect(survivors(uid, token)).toEqual([]);
      expect(gone).toBe(true);
    } finally {
      await cleanUp(running, token);
    }
  });

  it("a frozen server's command is still killed at its time limit, inside the sandbox", async () => {
    const token = `6.0${process.pid}2`;
    let running: Running | undefined;
    try {
      running = await startCommand(["--tool-timeout-seconds", "2"], `sleep ${token}`, token);
      const { served, dir, uid, startedAt } = running;
      // Frozen: its timers cannot fire, its spawner and the command go on.
      process.kill(served.pid, "SIGSTOP");
      await sleep(Math.max(0, startedAt + 6_000 + 3_000 - Date.now()));
      expect(existsSync(join(dir, "marker"))).toBe(false);
      expect(survivors(uid, token)).toEqual([]);
      process.kill(served.pid, "SIGCONT");
      // Thawed, the server reports the call as timed out.
      const reply = await running.turn;
      if (reply instanceof Error) throw reply;
      const result = reply.blocks.find((b) => b.type === "tool_result");
      expect(result).toMatchObject({ is_error: true });
      expect(result && "content" in result ? result.content : "").toContain("timed out after 2000 ms");
    } finally {
      await cleanUp(running, token);
    }
  });

  it("a frozen server's command filling the disk is stopped near the quota, by its launcher", async () => {
    const MiB = 1024 * 1024;
    const token = `0.2${process.pid}4`;
    let running: Running | undefined;
    try {
      // 1 MiB files, five a second, each within what is left (RLIMIT_FSIZE does not stop them): 100 MiB
      // against a 16 MiB quota, which only a measurement of the whole directory catches.
      running = await startCommand(
        ["--tool-timeout-seconds", "60", "--sandbox-disk", "16M"],
        `for i in $(seq 1 100); do head -c 1M /dev/zero > f$i; sleep ${token}; done`,
        token,
      );
      const { served, dir, uid } = running;
      process.kill(served.pid, "SIGSTOP");
      // Until the command is gone: killed near the quota, or (without a check of its own) after all 100 files.
      await until(() => survivors(uid, token).length === 0, 45_000);
      const written = readdirSync(dir)
        .filter((name) => /^f\d+$/.test(name))
        .reduce((sum, name) => sum + statSync(join(dir, name)).size, 0);
      expect(existsSync(join(dir, "marker"))).toBe(false);
      expect(written).toBeLessThan(2 * 16 * MiB);
      expect(survivors(uid, token)).toEqual([]);
      process.kill(served.pid, "SIGCONT");
      const reply = await running.turn;
      if (reply instanceof Error) throw reply;
      const result = reply.blocks.find((b) => b.type === "tool_result");
      expect(result && "content" in result ? result.content : "").toContain(
        "[command killed: it filled the disk quota]",
      );
    } finally {
      await cleanUp(running, token);
    }
  });
});

describe("--tool-timeout-seconds", () => {
  it.for(["abc", "86401"])("refuses %s with a usage error, before starting", (value) => {
    const run = spawnSync(BIN, ["serve", "--tool-timeout-seconds", value, "--port", "0"], {
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain("--tool-timeout-seconds must be a number of seconds above 0");
  });
});
