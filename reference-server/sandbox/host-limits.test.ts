/**
 * Attacks on the host's resources by a turn (the other half of hostile.test.ts, apart so the two run side by
 * side): secrets, process, memory, CPU and disk limits, the kernel calls that get around them, what costs the
 * host without filling blocks, trees nested past PATH_MAX and invisible characters in attachment names.
 * Real bubblewrap and real processes. Skipped, with the reason, where bubblewrap does not work.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdir, readdir, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SANDBOX_ENV } from "../../scripts/sandbox-probe.ts";
import { base64 } from "../test/sandbox-server.ts";
import { resolveExecutable } from "./isolation.ts";
import { launchSpec } from "./launcher.ts";
import { DEFAULT_SANDBOX_LIMITS } from "./limits.ts";
import { runProcess } from "./process-runner.ts";
import { refusedCallNumbers } from "./seccomp.ts";
import { cgroupsUnavailable, copyOwner, storageAgent, TestBed, turnRequest } from "./testing.ts";

/** Memory and CPU limits need a writable cgroup hierarchy (and a root server to place commands in it). */
const cgroupsHere = await cgroupsUnavailable();
// Where bubblewrap does not work, these tests skip with every other sandbox test, said once by the reporter.
if (!process.env[SANDBOX_ENV] && cgroupsHere !== null)
  console.warn(`memory and CPU limit tests skipped: ${cgroupsHere}`);

const bed = new TestBed();
/** A directory on the host's disk (the test run's own temporary directory may be a tmpfs). */
const DISK_TMP = "/var/tmp";
afterEach(() => bed.cleanup());
const sandboxManager = (overrides: Parameters<TestBed["isolatedManager"]>[0] = {}) =>
  bed.isolatedManager(overrides);

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
      wallClock: null,
      parentDeathSignal: false,
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
    /** CPU seconds four 1 s burners used (the children line of `times`) under a CPU limit of `cpus`. */
    async function burnerSeconds(cpus: number): Promise<number> {
      const manager = await sandboxManager({ limits: { cpus } });
      const turn = await manager.acquire(turnRequest(`cpu-${cpus}`, storageAgent()));
      const burn = await turn.tools.run("run_command", {
        command: "for i in 1 2 3 4; do timeout 1 sh -c 'while :; do :; done' & done; wait; times",
      });
      await turn.finish();
      const [, children] = burn.content.trim().split("\n");
      return children
        .split(/\s+/)
        .map((field) => /^(\d+)m([\d.]+)s$/.exec(field))
        .reduce((sum, match) => sum + (match ? Number(match[1]) * 60 + Number(match[2]) : 0), 0);
    }
    // Four burners for 1 s of wall time under a tenth of a CPU may use 0.1 s of CPU (bound at 3x for the
    // scheduler's period); unbounded they use every core the machine has (2 s here when the machine is
    // quiet). A loaded machine only lowers the figure, so the bound holds under load; a baseline run beside
    // it did not (at load 20 the unbounded burners got as little CPU as the limited ones).
    const limited = await burnerSeconds(0.1);
    expect(limited).toBeGreaterThan(0);
    expect(limited).toBeLessThan(0.3);
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
    // On the disk, not the test run's tmpfs (scripts/test-tmpdir.ts): there bash creates the 20,000 files
    // within one 250 ms poll of the quota, the inexactness the sandbox README states. A data directory on a disk
    // is what this test is about; see reference-server/sandbox/README.md for the exact bound that is missing.
    const manager = await bed.isolatedManager({ limits: { files: 500 } }, DISK_TMP);
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

  it("a command that removes files while over the file quota is let finish: it is the way back under it", async () => {
    const manager = await bed.isolatedManager({ limits: { files: 50 } }, DISK_TMP);
    const turn = await manager.acquire(turnRequest("cleanup", storageAgent()));
    await turn.tools.run("run_command", { command: "for i in $(seq 1 200); do : > f$i; done" });
    const before = Number(execFileSync("sh", ["-c", `ls -f ${turn.workdir} | wc -l`], { encoding: "utf8" }));
    expect(before).toBeGreaterThan(50);
    // Slowly (over several of the 250 ms polls), while the directory is still over the quota.
    const cleanup = await turn.tools.run("run_command", {
      command: 'for f in f*; do rm -f "$f"; sleep 0.01; done; echo cleaned',
    });
    expect(cleanup).toMatchObject({ isError: false, content: expect.stringContaining("cleaned") });
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
    // 2.5 MiB: two 1 MiB files fit and a third does not, whatever the file system adds for directories.
    const manager = await sandboxManager({ limits: { diskBytes: 2.5 * 1024 * 1024 } });
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
    await manager.fork(copyOwner("deep"), copyOwner("deep-child"));
    await manager.remove(copyOwner("deep"));
    await manager.remove(copyOwner("deep-child"));
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
