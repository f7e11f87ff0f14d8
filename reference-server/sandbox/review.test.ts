/**
 * Attacks found by the sandbox review (an attacker controlling one conversation's commands and tool inputs).
 * Real bubblewrap, real git, real processes. Each test fails on the code as it was reviewed.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { OPEN_FILES, openFilesPerProcess } from "./launcher.ts";
import { DEFAULT_SANDBOX_LIMITS } from "./limits.ts";
import { conversationDirName } from "./safe-paths.ts";
import { hostGit, repoAgent, seededBareRepo, storageAgent, TestBed, turnRequest } from "./testing.ts";

const bed = new TestBed();
afterEach(() => bed.cleanup());

const MiB = 1024 * 1024;
const OUTPUT_CAP = 64 * 1024;

async function sandboxManager(overrides: Parameters<TestBed["manager"]>[1] = {}) {
  const root = await bed.dir("root");
  const manager = await bed.manager(root, {
    unsafeNoIsolation: false,
    toolTimeoutMs: 60_000,
    toolOutputCapBytes: OUTPUT_CAP,
    ...overrides,
  });
  return { root, manager };
}

/** Entries (files and directories) below dir, counted by find. */
function entriesBelow(dir: string): number {
  return Number(execFileSync("sh", ["-c", `find "$1" -mindepth 1 | wc -l`, "sh", dir], { encoding: "utf8" }));
}

/** Blocks allocated below dir, in bytes. */
function bytesBelow(dir: string): number {
  return Number(execFileSync("du", ["-sk", dir], { encoding: "utf8" }).split("\t")[0]) * 1024;
}

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
      command: `for i in $(seq 20); do perl -e 'while (open(my $f, "<", "/dev/null")) { push @a, $f } sleep 6' & done; wait`,
    });
    let peak = 0;
    const started = Date.now();
    while (Date.now() - started < 5_000) {
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
    const flood = await turn.tools.run("run_command", { command: "timeout 5 cat /dev/zero; true" });
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

describe("sandbox review: the server's git stores what a turn wrote outside the disk quota", {
  tags: ["sandbox"],
}, () => {
  const git = hostGit;
  const seededRepo = () => seededBareRepo(bed, "site", "# site\n");

  it("a .gitignore pushed by one conversation makes another user's writable turn push that user's attachments to the shared repository", async () => {
    const bare = await seededRepo();
    const agent = repoAgent(bare, "site");
    const { manager } = await sandboxManager();
    const attacker = await manager.acquire(turnRequest("attacker", agent, { readOnly: false }));
    await attacker.tools.run("run_command", { command: "printf '!/.uploads/\\n' > .gitignore" });
    expect((await attacker.finish()).pushedCommit).toMatch(/^[0-9a-f]{40}$/);
    // Another member's conversation on the same agent: a private attachment and an ordinary edit.
    const secret = {
      name: "payroll.csv",
      mediaType: "text/csv",
      dataBase64: Buffer.from("alice,1\n").toString("base64"),
    };
    const victim = await manager.acquire(
      turnRequest("victim", agent, { readOnly: false, attachments: [secret] }),
    );
    await victim.tools.run("run_command", { command: "echo edit >> README.md" });
    expect((await victim.finish()).pushedCommit).toMatch(/^[0-9a-f]{40}$/);
    expect(git(bare, "ls-tree", "-r", "--name-only", "main")).not.toContain(".uploads/payroll.csv");
  });

  it("a .gitattributes working-tree-encoding makes the server's git convert what a turn wrote in memory (134 MB took 6.9 GB and 4 min as root, outside the cgroups)", async () => {
    const bare = await seededRepo();
    const agent = repoAgent(bare, "site");
    const { manager } = await sandboxManager();
    const turn = await manager.acquire(turnRequest("wte", agent, { readOnly: false }));
    // A small UTF-16LE file: if the attribute applies, git re-encodes it to UTF-8 when staging; the same code
    // path buffers and converts a large file whole, with ~50 times its size in memory.
    const made = await turn.tools.run("run_command", {
      command:
        "printf 'f.txt working-tree-encoding=UTF-16LE\\n' > .gitattributes && printf 'h\\000i\\000' > f.txt && od -An -c f.txt",
    });
    expect(made.isError).toBe(false);
    await turn.finish();
    // Committed as the turn wrote it: the server's git applied no working-tree encoding.
    const blob = execFileSync("git", ["cat-file", "blob", "main:f.txt"], { cwd: bare });
    expect([...blob]).toEqual([...Buffer.from("h\0i\0", "latin1")]);
  });

  it("sparse files under .uploads/, re-included by a .gitignore, are hashed, committed and pushed past the apparent-size check", async () => {
    const bare = await seededRepo();
    const agent = repoAgent(bare, "site");
    const { manager } = await sandboxManager({ limits: { diskBytes: 50 * MiB } });

    const turn = await manager.acquire(turnRequest("uploads-sparse", agent, { readOnly: false }));
    // The size check skips .uploads/ because info/exclude ignores it; a .gitignore outranks info/exclude.
    const made = await turn.tools.run("run_command", {
      command:
        "printf '!/.uploads/\\n' > .gitignore && mkdir -p .uploads && for i in 1 2 3 4 5; do truncate -s 30M .uploads/f$i; done && du -sk . | cut -f1",
    });
    expect(Number(made.content.trim())).toBeLessThan(1024);
    await turn.finish().catch(() => undefined);
    // 150 MiB of zeros (any size: the files are sparse) staged and pushed by the server's git as root.
    expect(git(bare, "ls-tree", "-r", "--name-only", "main")).not.toContain(".uploads/");
    // Refused as oversized, or committed without them: never staged, whatever the .gitignore says.
    expect(git(bare, "ls-tree", "-r", "--name-only", "main").trim().split("\n")).not.toContain(".uploads/f1");
  });

  it("refused commits leave every staged blob in repos/<id>.git: each writable turn adds a disk quota of objects, never pushed or collected", async () => {
    const bare = await seededRepo();
    const agent = repoAgent(bare, "site");
    const quota = 20 * MiB;
    const { root, manager } = await sandboxManager({ limits: { diskBytes: quota } });
    const before = git(bare, "rev-parse", "main").trim();
    for (let round = 0; round < 4; round++) {
      const turn = await manager.acquire(turnRequest("git-pile", agent, { readOnly: false }));
      // 15 MiB of fresh random data (within the quota) and a nested repository, so the commit is refused
      // after `git add --all` has already hashed and stored the data as loose objects.
      // (Removed first, in a command of its own: each command's largest file is what is left of the quota.)
      await turn.tools.run("run_command", { command: "rm -rf big sub" });
      const made = await turn.tools.run("run_command", {
        command:
          "head -c 15728640 /dev/urandom > big && git init -q sub && git -C sub -c user.name=x -c user.email=x@x commit -q --allow-empty -m x && echo ok",
      });
      expect(made).toMatchObject({ isError: false, content: "ok\n" });
      await expect(turn.finish()).rejects.toThrow(/nested git repository/);
    }
    expect(git(bare, "rev-parse", "main").trim()).toBe(before);
    const gitDir = path.join(root, "repos", `${conversationDirName("git-pile")}.git`);
    // 60 MiB of objects for a conversation whose quota is 20 MiB, and nothing ever removes them.
    expect(bytesBelow(gitDir)).toBeLessThanOrEqual(quota);
    // Four writable turns hashing 15 MiB each: 30 s was not enough in CI with three test files at once.
  }, 120_000);
});
