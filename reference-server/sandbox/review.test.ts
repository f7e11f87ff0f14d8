import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { OPEN_FILES, openFilesPerProcess } from "./launcher.ts";
import { DEFAULT_SANDBOX_LIMITS } from "./limits.ts";
import { conversationDirName } from "./safe-paths.ts";
import { entriesBelow, storageAgent, TestBed, turnRequest } from "./testing.ts";

const bed = new TestBed();
afterEach(() => bed.cleanup());

const MiB = 1024 * 1024;
const OUTPUT_CAP = 64 * 1024;

/** Real isolation, the output cap above, and a minute per command (some of these fill a lot). */
const sandboxManager = (overrides: Parameters<TestBed["isolated"]>[0] = {}) =>
  bed.isolated({ toolTimeoutMs: 60_000, toolOutputCapBytes: OUTPUT_CAP, ...overrides });

describe("sandbox review", { tags: ["sandbox"] }, () => {
  it("list_files over a deep chain of long directory names returns far more than the output cap (server memory, event log, model input)", async () => {
    const { manager } = await sandboxManager();
    const turn = await manager.acquire(turnRequest("deep-list", storageAgent()));
    // 300 nested directories of 200-byte names: 300 entries (well within the 1000-entry limit), but entry k's
    // path is k*201 bytes long, so the listing is ~9 MB. 1000 levels make ~100 MB from one call.
    const made = await turn.tools.run("run_command", {
      command: `perl -e '$n = "a" x 200; for (1..300) { mkdir $n or die; chdir $n or die } print "done"'`,
    });
    expect(made.content).toBe("done");
    const listed = await turn.tools.run("list_files", {});
    expect(Buffer.byteLength(listed.content)).toBeLessThanOrEqual(OUTPUT_CAP + 200);
    await turn.finish();
  });

  it("open files are bounded only by pids × the server's RLIMIT_NOFILE: one command can fill the host's file table (fs.file-max)", async () => {
    const { manager } = await sandboxManager();
    const turn = await manager.acquire(turnRequest("fd-flood", storageAgent()));
    const fileNr = () => Number(readFileSync("/proc/sys/fs/file-nr", "utf8").split("\t")[0]);
    const before = fileNr();
    // 20 processes each opening as many files as its rlimit allows (the server's own: 20,000 here): with the
    // default 256 processes, a command holds pids × NOFILE struct files, past fs.file-max (2.4 M here),
    // and every unprivileged process of the host then gets ENFILE.
    const running = turn.tools.run("run_command", {
      command: `for i in $(seq 20); do perl -e 'while (open(my $f, "<", "/dev/null")) { push @a, $f } sleep 3' & done; wait`,
    });
    let peak = 0;
    const started = Date.now();
    // Opening 20,000 files takes a process milliseconds: the peak comes long before the sleeps end.
    while (Date.now() - started < 2_500) {
      peak = Math.max(peak, fileNr() - before);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await running;
    await turn.finish();
    // A few thousand open files per process is what tools need; 20 processes must not hold 400,000.
    expect(peak).toBeLessThan(20 * 4096);
  });

  it("all sandbox processes together (totalPids × RLIMIT_NOFILE) stay within half the host's file table", () => {
    const fileMax = Number(readFileSync("/proc/sys/fs/file-max", "utf8").trim());
    const perProcess = openFilesPerProcess(DEFAULT_SANDBOX_LIMITS.totalPids);
    expect(perProcess).toBeGreaterThanOrEqual(64);
    expect(perProcess).toBeLessThanOrEqual(OPEN_FILES);
    if (perProcess > 64)
      expect(perProcess * DEFAULT_SANDBOX_LIMITS.totalPids).toBeLessThanOrEqual(fileMax / 2);
  });

  it("one write_file with a path of 5,000 components holds a descriptor per component: the server runs out of file descriptors, and the directories bypass the file quota", async () => {
    const { manager } = await sandboxManager({ limits: { files: 1000 } });
    const turn = await manager.acquire(turnRequest("deep-write", storageAgent()));
    const openFds = () => readdirSync("/proc/self/fd").length;
    const before = openFds();
    let peak = 0;
    const watch = setInterval(() => {
      peak = Math.max(peak, openFds() - before);
    }, 20);
    const written = await turn.tools.run("write_file", { path: `${"a/".repeat(5_000)}f`, content: "x" });
    clearInterval(watch);
    await turn.finish();
    // Every directory on the way stays open until the call ends: thousands of the server's descriptors for one
    // call (past its RLIMIT_NOFILE every other request, SQLite included, fails with EMFILE), and as many
    // directories made by the server in one call, past a file quota of 1000.
    expect({ peak: peak < 1000, written: written.isError }).toEqual({ peak: true, written: true });
  });

  it("a directory whose name is not valid UTF-8 makes list_files fail for the whole working directory", async () => {
    const { manager } = await sandboxManager();
    const turn = await manager.acquire(turnRequest("bad-name", storageAgent()));
    await turn.tools.run("run_command", {
      command: "mkdir \"$(printf 'bad\\377')\" && echo x > visible.txt",
    });
    const listed = await turn.tools.run("list_files", {});
    await turn.finish();
    expect(listed).toMatchObject({ isError: false, content: expect.stringContaining("visible.txt") });
  });

  it("list_files of a directory with 999 subdirectories holds ~1000 of the server's descriptors at once", async () => {
    const { manager } = await sandboxManager();
    const turn = await manager.acquire(turnRequest("wide-list", storageAgent()));
    await turn.tools.run("run_command", { command: "mkdir $(seq -f d%g 999)" });
    const openFds = () => readdirSync("/proc/self/fd").length;
    const before = openFds();
    let peak = 0;
    const watch = setInterval(() => {
      peak = Math.max(peak, openFds() - before);
    }, 1);
    const listed = await turn.tools.run("list_files", {});
    clearInterval(watch);
    await turn.finish();
    expect(listed.isError).toBe(false);
    // Every subdirectory is opened when it is listed and held until its turn in the queue: a few dozen
    // conversations listing at once take the server past its RLIMIT_NOFILE (20,000 here).
    expect(peak).toBeLessThan(100);
  });

  it("output past the cap is drained inside the command's cgroup: a command writing as fast as it can does not cost the server's CPU", async () => {
    const { manager } = await sandboxManager();
    const turn = await manager.acquire(turnRequest("flood-out", storageAgent()));
    const cpuBefore = process.cpuUsage();
    const started = Date.now();
    const flood = await turn.tools.run("run_command", { command: "timeout 2 cat /dev/zero; true" });
    const wallMs = Date.now() - started;
    const cpu = process.cpuUsage(cpuBefore);
    expect(flood.content).toContain("[output truncated:");
    // The drain keeps the order of stdout and stderr, the exact count of what it dropped, and the exit code.
    const mixed = await turn.tools.run("run_command", {
      command: "echo a; echo b >&2; head -c 70000 /dev/zero | tr '\\0' x; echo; echo c >&2; exit 3",
    });
    expect(mixed.isError).toBe(true);
    expect(mixed.content.startsWith("a\nb\nxxx")).toBe(true);
    expect(mixed.content).toContain(`[output truncated: ${4 + 70001 + 2 - OUTPUT_CAP} more bytes not shown]`);
    expect(mixed.content).toContain("[exit code 3]");
    await turn.finish();
    // The server's share of the flood: it used to read and drop every byte after the first 64 KiB (0.29 of a
    // core). Now a drain in the command's cgroup does, and the command never sees its pipe closed.
    expect((cpu.user + cpu.system) / 1000 / wallMs).toBeLessThan(0.2);
  });

  it("published outputs pile up without bound in files and directories across turns (store inodes and directory blocks are outside every quota)", async () => {
    // A file quota of 500 entries per working directory; each turn stays within it.
    const { root, manager } = await sandboxManager({ limits: { files: 500, diskBytes: 20 * MiB } });
    const agent = storageAgent();
    for (let round = 0; round < 4; round++) {
      const turn = await manager.acquire(turnRequest("inode-pile", agent));
      // 200 empty files, each in a directory of its own: 0 bytes of apparent size, 400 new store entries.
      const made = await turn.tools.run("run_command", {
        command: `i=0; while [ $i -lt 200 ]; do mkdir -p outputs/r${round}d$i && : > outputs/r${round}d$i/f; i=$((i+1)); done`,
      });
      expect(made.isError).toBe(false);
      await turn.finish();
    }
    const store = path.join(
      root,
      "workspace-store",
      agent.workspaceId,
      agent.name,
      conversationDirName("inode-pile"),
    );
    // 1600 entries published by a conversation allowed 500: nothing bounds the store's entries.
    expect(entriesBelow(store)).toBeLessThanOrEqual(500);
    // Four turns of 200 directories each, published: slow on a loaded machine.
  }, 60_000);
});
