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
import { SANDBOX_ENV } from "../../scripts/sandbox-probe.ts";
import { detectCgroups } from "./cgroups.ts";
import { resolveExecutable } from "./isolation.ts";
import { launchSpec } from "./launcher.ts";
import { DEFAULT_SANDBOX_LIMITS } from "./limits.ts";
import { runProcess } from "./process-runner.ts";
import { refusedCallNumbers } from "./seccomp.ts";
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
import { storageAgent, TestBed, turnRequest } from "./testing.ts";

/** Memory and CPU limits need a writable cgroup hierarchy (and a root server to place commands in it). */
const cgroupsHere = await (async () => {
  if (process.getuid?.() !== 0) return "the tests do not run as root";
  const support = await detectCgroups();
  await support.close();
  return support.version === "none" ? support.reason : null;
})();
// Where bubblewrap does not work, these tests skip with every other sandbox test, said once by the reporter.
if (!process.env[SANDBOX_ENV] && cgroupsHere !== null)
  console.warn(`memory and CPU limit tests skipped: ${cgroupsHere}`);

const bed = new TestBed();
afterEach(() => bed.cleanup());

async function sandboxManager(overrides: Parameters<TestBed["manager"]>[1] = {}) {
  return bed.manager(await bed.dir("root"), {
    unsafeNoIsolation: false,
    toolTimeoutMs: 20_000,
    ...overrides,
  });
}

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
    await s.turn("demo-agent", phrase.run("echo ready"), { conversation_id: id });
    for (let i = 0; i < 6; i++)
      await disconnectedTurn(s.url, "demo-agent", id, `sleep ${SLEEP_20}; echo late-${i} > late-${i}.txt`);
    const started = performance.now();
    const next = await s.turn("demo-agent", phrase.run("ls"), { conversation_id: id });
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
          messages: [{ role: "user", content: phrase.run(`sleep ${SLEEP_60}`) }],
          metadata: { conversation_id: "shutdown-grace", stream_tool_calls: true },
        }),
      }).then((response) => response.text());
      const deadline = performance.now() + 15_000;
      while (sandboxedSleeps(SLEEP_60).length === 0 && performance.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      await s.close();
      const body = await reply;
      expect(body).toContain("event: error");
      expect(body).toContain("The server is shutting down");
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
      const next = await s.turn("acme-widgets", phrase.run("cat half-done.txt"), { conversation_id: id });
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
      messages: [{ role: "user", content: phrase.run(command) }],
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

describe("secrets and limits", { tags: ["sandbox"] }, () => {
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

  it("a descriptor the server inherited (a root-only file) never reaches the sandbox", async () => {
    const dir = await bed.dir("fd");
    const secretFile = path.join(dir, "root-only");
    await writeFile(secretFile, "ROOT-ONLY-SECRET", { mode: 0o600 });
    const workdir = await bed.dir("fd-work");
    const spec = launchSpec({
      bwrapCommand: resolveExecutable("bwrap"),
      setprivCommand: null,
      workdir,
      command: "ls /proc/self/fd; cat <&100",
      env: { PATH: "/usr/bin:/bin" },
      user: null,
      limits: DEFAULT_SANDBOX_LIMITS,
      procsFiles: [],
      fileSizeBytes: DEFAULT_SANDBOX_LIMITS.diskBytes,
      memoryRlimit: false,
    });
    // The server's parent left fd 100 open on a root-only file, as `agent-api serve 100<file` would.
    const result = await runProcess({
      file: "/bin/bash",
      args: ["-c", 'exec 100<"$0"; exec "$@"', secretFile, spec.file, ...spec.args],
      pipes: spec.pipes,
      cwd: "/",
      env: {},
      timeoutMs: 10_000,
      outputCapBytes: 64 * 1024,
    });
    expect(result.output).not.toContain("ROOT-ONLY-SECRET");
    expect(result.output.split("\n")).not.toContain("100");
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
    /** CPU seconds two 1 s burners used (the children line of `times`) under a CPU limit of `cpus`. */
    async function burnerSeconds(cpus: number): Promise<number> {
      const manager = await sandboxManager({ limits: { cpus } });
      const turn = await manager.acquire(turnRequest(`cpu-${cpus}`, storageAgent()));
      const burn = await turn.tools.run("run_command", {
        command: "for i in 1 2; do timeout 1 sh -c 'while :; do :; done' & done; wait; times",
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

describe("the kernel calls that get around the limits are refused", { tags: ["sandbox"] }, () => {
  const numbers = refusedCallNumbers();
  /** errno of one raw system call made by perl inside the sandbox (perl is in every Debian base). */
  const errnoOf = (nr: number, ...args: number[]) =>
    `perl -e 'syscall(${[nr, ...args].join(", ")}); print $!+0, "\\n"'`;

  it("fallocate cannot reserve blocks past the quota (KEEP_SIZE skips RLIMIT_FSIZE); posix_fallocate still works", async () => {
    const MiB = 1024 * 1024;
    const manager = await sandboxManager({ limits: { diskBytes: 20 * MiB } });
    const turn = await manager.acquire(turnRequest("fallocate", storageAgent()));
    // One call would reserve 1 GiB of the host's disk while the file stays 0 bytes long.
    const reserve = await turn.tools.run("run_command", { command: "touch big && fallocate -n -l 1G big" });
    expect(reserve).toMatchObject({ isError: true, content: expect.stringContaining("unsupported") });
    const used = execFileSync("du", ["-sk", turn.workdir], { encoding: "utf8" });
    expect(Number(used.split("\t")[0])).toBeLessThan(20 * 1024);
    // glibc writes the blocks itself when fallocate is not supported: within the limits, programs still work.
    const posix = await turn.tools.run("run_command", {
      command:
        "python3 -c \"import os; fd = os.open('p', os.O_CREAT | os.O_WRONLY); os.posix_fallocate(fd, 0, 1048576); print(os.fstat(fd).st_size)\"",
    });
    expect(posix).toEqual({ content: "1048576\n", isError: false });
    await turn.finish();
  });

  it.skipIf(numbers === null)(
    "io_uring, the keyrings and nested user namespaces are not reachable",
    async () => {
      if (numbers === null) return;
      const manager = await sandboxManager();
      const turn = await manager.acquire(turnRequest("kernel-surface", storageAgent()));
      const ENOSYS = 38;
      for (const nr of [numbers.io_uring_setup, numbers.keyctl]) {
        const call = await turn.tools.run("run_command", { command: errnoOf(nr, 0, 0) });
        expect(call).toEqual({ content: `${ENOSYS}\n`, isError: false });
      }
      const nested = await turn.tools.run("run_command", { command: "unshare -U true && echo nested" });
      expect(nested.isError).toBe(true);
      expect(nested.content).not.toContain("nested\n");
      await turn.finish();
    },
  );
});

describe("what costs the host without filling blocks", { tags: ["sandbox"] }, () => {
  it("empty files count against a file quota: past it the command is stopped and nothing may grow", async () => {
    const manager = await sandboxManager({ limits: { files: 500 } });
    const turn = await manager.acquire(turnRequest("inodes", storageAgent()));
    const flood = await turn.tools.run("run_command", {
      command: "i=0; while [ $i -lt 20000 ]; do : > f$i; i=$((i + 1)); done",
    });
    expect(flood).toMatchObject({ isError: true, content: expect.stringContaining("file quota exceeded") });
    const count = Number(execFileSync("sh", ["-c", `ls -f ${turn.workdir} | wc -l`], { encoding: "utf8" }));
    expect(count).toBeLessThan(20_000);
    const grow = await turn.tools.run("run_command", { command: "echo more >> f1" });
    expect(grow.isError).toBe(true);
    await turn.tools.run("run_command", { command: "rm -f f*" });
    expect((await turn.tools.run("run_command", { command: "echo ok > ok.txt" })).isError).toBe(false);
    await turn.finish();
  });

  it("publishing outputs copies a hard-linked file once and at most the disk quota of apparent size", async () => {
    const MiB = 1024 * 1024;
    const manager = await sandboxManager({ limits: { diskBytes: 50 * MiB } });
    const turn = await manager.acquire(turnRequest("amplify", storageAgent()));
    await turn.tools.run("run_command", {
      command:
        "head -c 1048576 /dev/urandom > outputs/real; for i in 1 2 3 4 5; do ln outputs/real outputs/h$i; truncate -s 40M outputs/s$i; done",
    });
    const { publishedOutputs } = await turn.finish();
    // real (or one of its links) once, and sparse files only while their apparent sizes fit in 50 MiB.
    expect(publishedOutputs.filter((p) => p === "real" || p.startsWith("h"))).toHaveLength(1);
    expect(publishedOutputs.filter((p) => p.startsWith("s")).length).toBeLessThanOrEqual(1);
  });

  it("the published outputs of all turns together stay within the disk quota; a file published again replaces its copy", async () => {
    const MiB = 1024 * 1024;
    const manager = await sandboxManager({ limits: { diskBytes: 50 * MiB } });
    const agent = storageAgent();
    const publish = async (command: string) => {
      const turn = await manager.acquire(turnRequest("accumulate", agent));
      expect((await turn.tools.run("run_command", { command })).isError).toBe(false);
      return (await turn.finish()).publishedOutputs;
    };
    expect(await publish("head -c 30M /dev/zero > outputs/a")).toEqual(["a"]);
    // 30 MiB more would put 60 MiB in the store: not published, however many turns try.
    expect(await publish("head -c 30M /dev/zero > outputs/b")).toEqual([]);
    expect(await publish("head -c 10M /dev/zero > outputs/a; head -c 30M /dev/zero > outputs/c")).toEqual([
      "a",
      "c",
    ]);
    const stored = await manager.listWorkspaceOutputs(agent.workspaceId, agent.name, "accumulate");
    expect(stored.sort()).toEqual(["a", "c"]);
  });

  it("attachments past the disk quota are dropped silently", async () => {
    const manager = await sandboxManager({ limits: { diskBytes: 3 * 1024 * 1024 } });
    const oneMiB = base64(Buffer.alloc(1024 * 1024, 1));
    const attachments = [1, 2, 3, 4, 5].map((i) => ({
      name: `a${i}.bin`,
      mediaType: "application/octet-stream",
      dataBase64: oneMiB,
    }));
    const turn = await manager.acquire(turnRequest("att-quota", storageAgent(), { attachments }));
    expect(turn.attachments.length).toBeGreaterThan(0);
    expect(turn.attachments.length).toBeLessThan(3);
    await turn.finish();
  });
});

describe("a tree nested far past PATH_MAX", { tags: ["sandbox"] }, () => {
  // perl (Debian's essential perl-base): a shell's cd gives up once its path string passes PATH_MAX.
  const deep = `perl -e 'for (1..2100) { mkdir "aa" or die $!; chdir "aa" or die $! } print "done\\n"'`;

  it("is forked, deleted, and cleared from tmp/ at the next start, instead of failing the server", async () => {
    const root = await bed.dir("root");
    const manager = await sandboxManager({ toolTimeoutMs: 60_000 });
    const turn = await manager.acquire(turnRequest("deep", storageAgent()));
    expect((await turn.tools.run("run_command", { command: deep })).content).toBe("done\n");
    await turn.finish();
    await manager.fork("deep", "deep-child");
    await manager.remove("deep");
    await manager.remove("deep-child");
    expect(await readdir(path.join(turn.workdir, ".."))).toEqual([]);

    // An isolated turn's throwaway tree, and one left in tmp/ by a server that died.
    const other = await bed.manager(root, { unsafeNoIsolation: false, toolTimeoutMs: 60_000 });
    const isolated = await other.acquire(turnRequest("deep-iso", storageAgent(), { isolated: true }));
    expect((await isolated.tools.run("run_command", { command: deep })).content).toBe("done\n");
    await isolated.finish();
    await expect(stat(isolated.workdir)).rejects.toThrow();
    const stale = path.join(root, "tmp", "isolated-stale");
    await mkdir(stale);
    execFileSync("/bin/sh", ["-c", deep], { cwd: stale });
    expect(readdirSync(stale)).toEqual(["aa"]);
    const restarted = await bed.manager(root, { unsafeNoIsolation: false });
    expect(restarted.notices.filter((n) => n.includes("could not empty"))).toEqual([]);
    expect(await readdir(path.join(root, "tmp"))).toEqual([]);
    // Six walks of a 2,100-level tree: 30 s was not enough on a loaded 2-core machine.
  }, 120_000);
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
