/**
 * Attacks found by the sandbox review on the server's own git (the other half of review.test.ts, apart so the
 * two run side by side): what a turn wrote, read and stored by root's git outside the disk quota.
 * Real bubblewrap, real git, real processes. Each test fails on the code as it was reviewed.
 */
import { execFileSync } from "node:child_process";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { conversationDirName } from "./safe-paths.ts";
import { bytesBelow, hostGit, repoAgent, seededBareRepo, TestBed, turnRequest } from "./testing.ts";

const bed = new TestBed();
afterEach(() => bed.cleanup());

const MiB = 1024 * 1024;
const OUTPUT_CAP = 64 * 1024;

/** Real isolation, the output cap above, and a minute per command (some of these fill a lot). */
const sandboxManager = (overrides: Parameters<TestBed["isolated"]>[0] = {}) =>
  bed.isolated({ toolTimeoutMs: 60_000, toolOutputCapBytes: OUTPUT_CAP, ...overrides });

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
    expect(Number(made.content.trim().split("\n")[0])).toBeLessThan(1024);
    await turn.finish().catch(() => undefined);
    // 150 MiB of zeros (any size: the files are sparse) staged and pushed by the server's git as root.
    expect(git(bare, "ls-tree", "-r", "--name-only", "main")).not.toContain(".uploads/");
    // Refused as oversized, or committed without them: never staged, whatever the .gitignore says.
    expect(git(bare, "ls-tree", "-r", "--name-only", "main").trim().split("\n")).not.toContain(".uploads/f1");
  });

  it("staged blobs never committed pile up in repos/<id>.git: each writable turn adds a disk quota of objects, never pushed or collected", async () => {
    const bare = await seededRepo();
    const agent = repoAgent(bare, "site");
    const quota = 8 * MiB;
    const { root, manager } = await sandboxManager({ limits: { diskBytes: quota } });
    const before = git(bare, "rev-parse", "main").trim();
    for (let round = 0; round < 2; round++) {
      // 6 MiB of fresh random data (within the quota), left by a read-only turn...
      const reader = await manager.acquire(turnRequest("git-pile", agent, { readOnly: true }));
      const made = await reader.tools.run("run_command", {
        command: "rm -f big && head -c 6291456 /dev/urandom > big && echo ok",
      });
      expect(made).toMatchObject({ isError: false, content: "ok\n" });
      await reader.finish();
      // ...is hashed and stored as loose objects when a writable turn starts (its baseline), then removed by
      // that turn: nothing is committed, and nothing reaches the stored blobs any more.
      const writer = await manager.acquire(turnRequest("git-pile", agent, { readOnly: false }));
      await writer.tools.run("run_command", { command: "rm big" });
      expect(await writer.finish()).toEqual({ pushedCommit: null, publishedOutputs: [] });
    }
    expect(git(bare, "rev-parse", "main").trim()).toBe(before);
    const gitDir = path.join(root, "repos", `${conversationDirName("git-pile")}.git`);
    // 12 MiB of objects for a conversation whose quota is 8 MiB, and nothing ever removes them.
    expect(bytesBelow(gitDir)).toBeLessThanOrEqual(quota);
    // Writable turns hashing megabytes: 30 s was not enough in CI with three test files at once.
  }, 120_000);
});
