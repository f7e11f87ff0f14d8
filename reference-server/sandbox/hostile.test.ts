/**
 * A turn run by an attacker (an Operator key, or a prompt injection reaching a real model): each attack the
 * sandbox hardening closed, kept as a test. Real bubblewrap, real git, real processes; the end-to-end ones
 * over real HTTP against the reference server. Skipped, with the reason, where bubblewrap does not work.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { detectCgroups } from "./cgroups.ts";
import {
  ADMIN_KEY,
  bareGit,
  base64,
  onlyToolResult,
  phrase,
  removeDir,
  type SandboxServer,
  startSandboxServer,
  toolResults,
} from "./server-testing.ts";
import { bwrapWorksHere, storageAgent, TestBed, turnRequest } from "./testing.ts";

const hasBwrap = await bwrapWorksHere();
if (!hasBwrap)
  console.warn("hostile tests skipped: bubblewrap is not installed or cannot create namespaces here");
/** Memory and CPU limits need a writable cgroup hierarchy (and a root server to place commands in it). */
const cgroupsHere = await (async () => {
  if (process.getuid?.() !== 0) return "the tests do not run as root";
  const support = await detectCgroups();
  await support.close();
  return support.version === "none" ? support.reason : null;
})();
if (hasBwrap && cgroupsHere !== null) console.warn(`memory and CPU limit tests skipped: ${cgroupsHere}`);

const bed = new TestBed();
afterEach(() => bed.cleanup());

async function sandboxManager(overrides: Parameters<TestBed["manager"]>[1] = {}) {
  return bed.manager(await bed.dir("root"), {
    unsafeNoIsolation: false,
    toolTimeoutMs: 20_000,
    ...overrides,
  });
}

describe.skipIf(!hasBwrap)("the server's own git never runs what a turn wrote", () => {
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
      phrase.run(
        `git init -q sub && cd sub && git -c user.name=x -c user.email=x@x commit -q --allow-empty -m x && git config remote.origin.url /nonexistent && git config remote.origin.uploadpack 'touch ${marker}; false' && git rev-parse HEAD`,
      ),
      { conversation_id: id, read_only: false },
    );
    const nestedCommit = toolResults(plant)[0].content.trim();
    expect(nestedCommit).toMatch(/^[0-9a-f]{40}$/);
    // Not committed as a gitlink: the turn says why, and nothing reached the default branch.
    expect(plant.error).toContain("sub is a nested git repository");
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
    await s.turn("acme-widgets", phrase.run("ls sub"), { conversation_id: id });
    await s.turn("acme-widgets", phrase.write("x.txt", "x"), { conversation_id: id, read_only: false });
    expect(existsSync(marker)).toBe(false);
  });
});

describe.skipIf(!hasBwrap)("nothing of a turn outlives it", () => {
  let s: SandboxServer;
  beforeAll(async () => {
    s = await startSandboxServer({ unsafeNoIsolation: false });
  });
  afterAll(async () => {
    await s.close();
    await removeDir(s.dataDir);
  });

  /** Starts a turn running `command` and disconnects once its tool is running. */
  async function disconnectedTurn(id: string, command: string): Promise<void> {
    const controller = new AbortController();
    const response = await fetch(`${s.url}/api/agents/demo-agent/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": ADMIN_KEY, "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: phrase.run(command) }],
        metadata: { conversation_id: id, stream_tool_calls: true },
      }),
      signal: controller.signal,
    });
    const reader = response.body?.getReader();
    // The tool_use block arrives before its command runs.
    let seen = "";
    while (reader && !seen.includes("tool_use")) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += Buffer.from(value).toString();
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    controller.abort();
  }

  it("a client disconnect kills the running command: six disconnected sleeps never run side by side", async () => {
    const id = "lock-bypass";
    await s.turn("demo-agent", phrase.run("echo ready"), { conversation_id: id });
    for (let i = 0; i < 6; i++) await disconnectedTurn(id, `sleep 20; echo late-${i} > late-${i}.txt`);
    const started = performance.now();
    const next = await s.turn("demo-agent", phrase.run("ls"), { conversation_id: id });
    // The lock was not held for 6 x 20 s: each disconnect ended its command.
    expect(performance.now() - started).toBeLessThan(15_000);
    expect(onlyToolResult(next).content).not.toContain("late-");
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(sandboxedSleeps()).toEqual([]);
  });
});

/** `sleep 20` processes anywhere on the host (a disconnected turn's command, had it survived). */
function sandboxedSleeps(): number[] {
  const found: number[] = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (cmdline.startsWith("sleep\u000020\u0000")) found.push(Number(pid));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

describe.skipIf(!hasBwrap)("the server's file work cannot be redirected by a link swapped under it", () => {
  let swapper: ChildProcess | undefined;
  afterEach(() => {
    swapper?.kill("SIGKILL");
    swapper = undefined;
  });

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
    });
    const seen = new Set<string>();
    for (let i = 0; i < 300; i++) {
      const read = await turn.tools.run("read_file", { path: "d/secret.txt" });
      seen.add(read.isError ? "error" : read.content);
      await turn.tools.run("write_file", { path: "d/planted.txt", content: "from the turn" });
    }
    swapper.kill("SIGKILL");
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

describe.skipIf(!hasBwrap)("secrets and limits", () => {
  it("secrets never appear on any process's command line", async () => {
    const manager = await sandboxManager();
    const secret = `s3cr3t-${process.pid}-${Date.now()}`;
    const turn = await manager.acquire(
      turnRequest("secrets", storageAgent({ secrets: { API_TOKEN: secret } })),
    );
    const running = turn.tools.run("run_command", { command: 'sleep 1; echo "$API_TOKEN"' });
    await new Promise((resolve) => setTimeout(resolve, 400));
    const leaks: string[] = [];
    for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
      try {
        if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(secret)) leaks.push(pid);
      } catch {
        // Gone meanwhile.
      }
    }
    expect(leaks).toEqual([]);
    expect((await running).content.trim()).toBe(secret); // the command still gets it, from its environment
    await turn.finish();
  });

  it("a fork bomb stops at the process limit, is killed with the command, and the server goes on", async () => {
    const manager = await sandboxManager({ toolTimeoutMs: 3_000, limits: { pids: 64 } });
    const turn = await manager.acquire(turnRequest("bomb", storageAgent()));
    const bomb = await turn.tools.run("run_command", { command: "b() { b | b & }; b; sleep 10" });
    expect(bomb.isError).toBe(true);
    const after = await turn.tools.run("run_command", { command: "echo alive" });
    expect(after).toEqual({ content: "alive\n", isError: false });
    await turn.finish();
  });

  it.skipIf(cgroupsHere !== null)("memory past the limit kills the command, not the host", async () => {
    const manager = await sandboxManager({ limits: { memoryBytes: 64 * 1024 * 1024 } });
    const turn = await manager.acquire(turnRequest("memory", storageAgent()));
    // tail keeps a line it never finds the end of: it grows until something stops it.
    const eater = await turn.tools.run("run_command", { command: "tail /dev/zero" });
    expect(eater.isError).toBe(true);
    expect(eater.content).not.toContain("timed out");
    await turn.finish();
  });

  it.skipIf(cgroupsHere !== null)("CPU burners get the command's CPU share, not the host's", async () => {
    /** CPU seconds four 2 s burners used (the children line of `times`) under a CPU limit of `cpus`. */
    async function burnerSeconds(cpus: number): Promise<number> {
      const manager = await sandboxManager({ limits: { cpus } });
      const turn = await manager.acquire(turnRequest(`cpu-${cpus}`, storageAgent()));
      const burn = await turn.tools.run("run_command", {
        command: "for i in 1 2 3 4; do timeout 2 sh -c 'while :; do :; done' & done; wait; times",
      });
      await turn.finish();
      const [, children] = burn.content.trim().split("\n");
      return children
        .split(/\s+/)
        .map((field) => /^(\d+)m([\d.]+)s$/.exec(field))
        .reduce((sum, match) => sum + (match ? Number(match[1]) * 60 + Number(match[2]) : 0), 0);
    }
    // Against a baseline from the same run (more CPUs than the machine has), so a loaded machine moves both.
    const unbounded = await burnerSeconds(64);
    const limited = await burnerSeconds(0.1);
    expect(limited).toBeGreaterThan(0);
    expect(limited).toBeLessThan(unbounded / 2);
  });

  it("the disk quota stops a file at what is left, and /tmp and /dev/shm are sized", async () => {
    const MiB = 1024 * 1024;
    const manager = await sandboxManager({
      limits: { diskBytes: 20 * MiB, tmpBytes: 4 * MiB, shmBytes: 4 * MiB },
    });
    const turn = await manager.acquire(turnRequest("disk", storageAgent()));
    const big = await turn.tools.run("run_command", { command: "head -c 100M /dev/zero > big.bin" });
    expect(big.isError).toBe(true);
    expect((await stat(path.join(turn.workdir, "big.bin"))).size).toBeLessThanOrEqual(20 * MiB);
    // Full now: every further write fails and the model is told, until it removes files.
    const more = await turn.tools.run("run_command", { command: "head -c 15M /dev/zero > more.bin" });
    expect(more.isError).toBe(true);
    const tool = await turn.tools.run("write_file", { path: "w.txt", content: "x".repeat(2 * MiB) });
    expect(tool).toMatchObject({ isError: true, content: expect.stringContaining("disk quota exceeded") });
    await turn.tools.run("run_command", { command: "rm -f big.bin more.bin" });
    // Many files at once, each under what is left: the running command is measured and stopped.
    const many = await turn.tools.run("run_command", {
      command:
        "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do head -c 15M /dev/zero > m$i; sleep 0.2; done",
    });
    expect(many).toMatchObject({ isError: true, content: expect.stringContaining("filled the disk quota") });
    const left = await turn.tools.run("run_command", { command: "du -sm . | cut -f1" });
    expect(Number(left.content.split("\n")[0])).toBeLessThan(60);
    await turn.tools.run("run_command", { command: "rm -f m*" });
    expect((await turn.tools.run("run_command", { command: "echo ok > ok.txt" })).isError).toBe(false);
    for (const dir of ["/tmp", "/dev/shm"]) {
      const fill = await turn.tools.run("run_command", { command: `head -c 10M /dev/zero > ${dir}/f` });
      expect(fill).toMatchObject({ isError: true, content: expect.stringContaining("No space left") });
    }
    await turn.finish();
  });
});

describe("attachment names", () => {
  it("lose bidi controls and other invisible format characters", async () => {
    const manager = await bed.manager(await bed.dir("root"));
    const turn = await manager.acquire(
      turnRequest("bidi", storageAgent(), {
        attachments: [
          { name: "\u202Etxt.exe", mediaType: "text/plain", dataBase64: base64("a") },
          { name: "in\u200Bvoice\u2066.pdf", mediaType: "application/pdf", dataBase64: base64("b") },
        ],
      }),
    );
    expect(turn.attachments).toEqual([".uploads/txt.exe", ".uploads/invoice.pdf"]);
    await turn.finish();
    await rm(turn.workdir, { recursive: true, force: true });
  });
});
