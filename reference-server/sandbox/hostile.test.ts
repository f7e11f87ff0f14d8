/**
 * A turn run by an attacker (an Operator key, or a prompt injection reaching a real model): each attack the
 * sandbox hardening closed, kept as a test. Real bubblewrap, real git, real processes; the end-to-end ones
 * over real HTTP against the reference server. Skipped, with the reason, where bubblewrap does not work.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  ADMIN_KEY,
  bareGit,
  base64,
  onlyToolResult,
  PHRASES,
  removeDir,
  type SandboxServer,
  startSandboxServer,
  toolResults,
} from "../test/sandbox-server.ts";
import { storageAgent, TestBed, turnRequest } from "./testing.ts";

const bed = new TestBed();
afterEach(() => bed.cleanup());
const sandboxManager = (overrides: Parameters<TestBed["isolatedManager"]>[0] = {}) =>
  bed.isolatedManager(overrides);

describe("the server's own git never runs what a turn wrote", { tags: ["sandbox"] }, () => {
  let s: SandboxServer;
  let markerDir: string;
  beforeAll(async () => {
    s = await startSandboxServer({ unsafeNoIsolation: false });
    markerDir = await mkdtemp(path.join(tmpdir(), "hostile-marker-"));
  });
  afterAll(async () => {
    await s.close();
    await removeDir(s.dataDir);
    await removeDir(markerDir);
  });

  it("a nested repository with an uploadpack command is refused at commit, and a moved gitlink is never fetched into", async () => {
    const marker = path.join(markerDir, "ran-on-host");
    const id = "gitlink-chain";
    const before = bareGit(s.bareRepo, "rev-parse", "refs/heads/main").trim();
    // The attacker's nested repository, its config pointing the server's git at a command.
    const plant = await s.turn(
      "acme-widgets",
      PHRASES.run(
        `git init -q sub && cd sub && git -c user.name=x -c user.email=x@x commit -q --allow-empty -m x && git config remote.origin.url /nonexistent && git config remote.origin.uploadpack 'touch ${marker}; false' && git rev-parse HEAD`,
      ),
      { conversation_id: id, read_only: false },
    );
    const nestedCommit = toolResults(plant)[0].content.trim();
    expect(nestedCommit).toMatch(/^[0-9a-f]{40}$/);
    // Not committed as a gitlink: the turn says why, and nothing reached the default branch.
    expect(plant.error).toContain("sub/.git (directory) is a .git entry in a sub-folder");
    expect(bareGit(s.bareRepo, "rev-parse", "refs/heads/main").trim()).toBe(before);

    // Someone else's push moves a gitlink at the same path (the second half of the reported chain).
    const scratch = await mkdtemp(path.join(tmpdir(), "hostile-clone-"));
    try {
      const git = (...args: string[]) =>
        execFileSync("git", args, {
          cwd: scratch,
          env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" },
          encoding: "utf8",
        });
      git("clone", "-q", s.bareRepo, ".");
      await writeFile(path.join(scratch, ".gitmodules"), '[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n');
      git("add", ".gitmodules");
      git("update-index", "--add", "--cacheinfo", `160000,${nestedCommit},sub`);
      git("-c", "user.name=y", "-c", "user.email=y@y", "commit", "-q", "-m", "gitlink");
      git("push", "-q", "origin", "HEAD:refs/heads/main");
    } finally {
      await removeDir(scratch);
    }
    // The next turns fetch and merge. The closed configuration forbids recursing into `sub`; note that this
    // machine's git (2.39) did not recurse here even without it, so this half guards, it does not prove.
    await s.turn("acme-widgets", PHRASES.run("ls sub"), { conversation_id: id });
    await s.turn("acme-widgets", PHRASES.write("x.txt", "x"), { conversation_id: id, read_only: false });
    expect(existsSync(marker)).toBe(false);
  });
});

describe("nothing of a turn outlives it", { tags: ["sandbox"] }, () => {
  let s: SandboxServer;
  beforeAll(async () => {
    s = await startSandboxServer({ unsafeNoIsolation: false });
  });
  afterAll(async () => {
    await s.close();
    await removeDir(s.dataDir);
  });

  it("a client disconnect kills the running command: six disconnected sleeps never run side by side", async () => {
    const id = "lock-bypass";
    await s.turn("demo-agent", PHRASES.run("echo ready"), { conversation_id: id });
    for (let i = 0; i < 6; i++)
      await disconnectedTurn(s.url, "demo-agent", id, `sleep ${SLEEP_20}; echo late-${i} > late-${i}.txt`);
    const started = performance.now();
    const next = await s.turn("demo-agent", PHRASES.run("ls"), { conversation_id: id });
    // The lock was not held for 6 x 20 s: each disconnect ended its command.
    expect(performance.now() - started).toBeLessThan(15_000);
    expect(onlyToolResult(next).content).not.toContain("late-");
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(sandboxedSleeps()).toEqual([]);
  });
});

describe("a shutdown", { tags: ["sandbox"] }, () => {
  it("ends a turn whose command would run on past its grace period, with an error event", async () => {
    const s = await startSandboxServer({ unsafeNoIsolation: false, shutdownGraceMs: 500 });
    try {
      const reply = fetch(`${s.url}/api/agents/demo-agent/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": ADMIN_KEY, "content-type": "application/json" },
        body: JSON.stringify({
          messages: [{ role: "user", content: PHRASES.run(`sleep ${SLEEP_60}`) }],
          metadata: { conversation_id: "shutdown-grace", stream_tool_calls: true },
        }),
      }).then((response) => response.text());
      const deadline = performance.now() + 15_000;
      while (sandboxedSleeps(SLEEP_60).length === 0 && performance.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      await s.close();
      const body = await reply;
      expect(body).toContain("event: error");
      expect(await s.turnFailure("shutdown-grace")).toBe("AGENT_API_SERVER_STOPPING");
      expect(sandboxedSleeps(SLEEP_60)).toEqual([]);
    } finally {
      await s.close();
      await removeDir(s.dataDir);
    }
  });
});

describe("a turn cut short", { tags: ["sandbox"] }, () => {
  it("pushes nothing of its own, even with read_only false; its files stay for the next turn", async () => {
    const s = await startSandboxServer({ unsafeNoIsolation: false });
    try {
      const id = "cut-short-push";
      const before = bareGit(s.bareRepo, "rev-parse", "refs/heads/main").trim();
      await disconnectedTurn(s.url, "acme-widgets", id, `echo half > half-done.txt; sleep ${SLEEP_20}`, {
        read_only: false,
      });
      const next = await s.turn("acme-widgets", PHRASES.run("cat half-done.txt"), { conversation_id: id });
      expect(onlyToolResult(next).content).toBe("half\n");
      expect(bareGit(s.bareRepo, "rev-parse", "refs/heads/main").trim()).toBe(before);
    } finally {
      await s.close();
      await removeDir(s.dataDir);
    }
  });
});

/** Starts a turn running `command` (which must run `sleep ${SLEEP_20}`) and disconnects once that sleep runs. */
async function disconnectedTurn(
  url: string,
  agent: string,
  id: string,
  command: string,
  metadata: Record<string, unknown> = {},
): Promise<void> {
  const controller = new AbortController();
  const earlier = new Set(sandboxedSleeps());
  const response = await fetch(`${url}/api/agents/${agent}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": ADMIN_KEY, "content-type": "application/json" },
    body: JSON.stringify({
      messages: [{ role: "user", content: PHRASES.run(command) }],
      metadata: { conversation_id: id, stream_tool_calls: true, ...metadata },
    }),
    signal: controller.signal,
  });
  const reader = response.body?.getReader();
  // The tool_use block arrives before its command runs; a moment later the command is running.
  let seen = "";
  while (reader && !seen.includes("tool_use")) {
    const { value, done } = await reader.read();
    if (done) break;
    seen += Buffer.from(value).toString();
  }
  // Everything before the sleep has run once the command's own sleep exists (a loaded machine may take
  // seconds to start a sandbox: a fixed pause would race it).
  const deadline = performance.now() + 15_000;
  while (!sandboxedSleeps().some((pid) => !earlier.has(pid)) && performance.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 50));
  controller.abort();
}

/**
 * Durations no other process on the host sleeps for (another session may run these very tests): 20 and 60
 * seconds, and a fraction of this process's own.
 */
const SLEEP_20 = `20.${process.pid}`;
const SLEEP_60 = `60.${process.pid}`;

/** `sleep N` processes anywhere on the host (a disconnected turn's command, had it survived). */
function sandboxedSleeps(seconds = SLEEP_20): number[] {
  const found: number[] = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (cmdline === `sleep\u0000${seconds}\u0000`) found.push(Number(pid));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

describe("the server's file work cannot be redirected by a link swapped under it", {
  tags: ["sandbox"],
}, () => {
  let swapper: ChildProcess | undefined;
  /**
   * Kills the swapping loop with the mv or ln it is running (its own process group) and waits for it: a
   * child left running a moment after its shell died refilled the directory the clean-up was removing.
   */
  async function stopSwapper(): Promise<void> {
    const running = swapper;
    swapper = undefined;
    if (!running?.pid || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    process.kill(-running.pid, "SIGKILL");
    await exited;
  }
  afterEach(stopSwapper);

  it("read_file and write_file never follow a directory swapped for a link to the host mid-operation", async () => {
    const manager = await sandboxManager();
    const turn = await manager.acquire(turnRequest("race", storageAgent()));
    const host = await bed.dir("host-secret");
    await writeFile(path.join(host, "secret.txt"), "HOST SECRET");
    await mkdir(path.join(turn.workdir, "d"));
    await writeFile(path.join(turn.workdir, "d", "secret.txt"), "own file");
    // A process swapping d between a real directory and a link to the host, as fast as it can (the attack:
    // a command left running by a turn; here a host process, so the swap really runs alongside the tools).
    swapper = spawn("/bin/sh", ["-c", `while :; do mv d d.real; ln -s ${host} d; rm d; mv d.real d; done`], {
      cwd: turn.workdir,
      stdio: "ignore",
      detached: true,
    });
    const seen = new Set<string>();
    for (let i = 0; i < 300; i++) {
      const read = await turn.tools.run("read_file", { path: "d/secret.txt" });
      seen.add(read.isError ? "error" : read.content);
      await turn.tools.run("write_file", { path: "d/planted.txt", content: "from the turn" });
    }
    await stopSwapper();
    expect(seen.has("HOST SECRET")).toBe(false);
    // Every read saw its own file or failed (the link swapped in): nothing else.
    expect([...seen].filter((v) => v !== "own file" && v !== "error")).toEqual([]);
    expect(await readdir(host)).toEqual(["secret.txt"]);
    await turn.finish();
  });

  it("attachments are written beneath the opened .uploads, never through a link planted there", async () => {
    const manager = await sandboxManager();
    const first = await manager.acquire(turnRequest("att", storageAgent()));
    const host = await bed.dir("host-target");
    await first.tools.run("run_command", { command: `ln -s ${host} .uploads` });
    await first.finish();
    const second = await manager.acquire(
      turnRequest("att", storageAgent(), {
        attachments: [{ name: "a.txt", mediaType: "text/plain", dataBase64: base64("x") }],
      }),
    );
    expect(second.attachments).toEqual([".uploads/a.txt"]);
    expect(await readdir(host)).toEqual([]);
    await second.finish();
  });
});
