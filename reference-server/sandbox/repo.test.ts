import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AGENT_AUTHOR_EMAIL, AGENT_AUTHOR_NAME } from "./repo.ts";
import { copyOwner, hostGit, repoAgent, seededBareRepo, TestBed, turnRequest } from "./testing.ts";
import type { SandboxAgent } from "./types.ts";

const bed = new TestBed();
afterEach(() => bed.cleanup());

const git = hostGit;

let bare: string;
let agent: SandboxAgent;

/** A bare repository with `main` as default branch and one seed commit (README.md). */
beforeEach(async () => {
  bare = await seededBareRepo(bed, "acme-site", "# Acme\n");
  agent = repoAgent(bare, "acme-site");
});

const log = () => git(bare, "log", "--format=%H %an <%ae> %cn <%ce> %s", "main").trim().split("\n");
const attachment = {
  name: "upload.txt",
  mediaType: "text/plain",
  dataBase64: Buffer.from("up").toString("base64"),
};

describe("repository-backed agents", () => {
  it("a work tree of sparse files past the disk quota is not staged, committed or pushed; the turn says why", async () => {
    const MiB = 1024 * 1024;
    const manager = await bed.manager(await bed.dir("root"), { limits: { diskBytes: 50 * MiB } });
    const before = log();
    const turn = await manager.acquire(turnRequest("sparse", agent, { readOnly: false }));
    // Five files of 30 MiB that take no blocks: git would hash, store and push 150 MiB of zeros.
    const sparse = await turn.tools.run("run_command", {
      command: "truncate -s 30M f1 f2 f3 f4 f5; du -sk . | cut -f1",
    });
    // The quota counts each file's size too (what a copy takes): the turn is told at once. On a loaded machine
    // the quota's poll (every 250 ms while a command runs) may see the files before `du` runs and kill the
    // command: then the files' blocks are read from the host instead.
    expect(sparse.content).toContain("disk quota exceeded");
    const killed = sparse.content.includes("[command killed: it filled the disk quota]");
    const blocksKiB = killed
      ? Number(execFileSync("du", ["-sk", turn.workdir], { encoding: "utf8" }).split("\t")[0])
      : Number(sparse.content.trim().split("\n")[0]);
    expect(blocksKiB).toBeLessThan(1024);
    await expect(turn.finish()).rejects.toThrow(
      /not committed: the working tree's files add up to \d+ bytes/,
    );
    expect(log()).toEqual(before);
    // Once the files are gone, the next writable turn commits what it made.
    const next = await manager.acquire(turnRequest("sparse", agent, { readOnly: false }));
    await next.tools.run("run_command", { command: "rm -f f1 f2 f3 f4 f5; echo small > small.txt" });
    const { pushedCommit } = await next.finish();
    expect(pushedCommit).toMatch(/^[0-9a-f]{40}$/);
    expect(git(bare, "show", "--stat", "--format=", "main").trim()).toMatch(/small\.txt/);
  });

  it("clone the repository; read_only turns never commit or push", async () => {
    const manager = await bed.manager(await bed.dir("root"));
    const before = log();
    const turn = await manager.acquire(
      turnRequest("ro", agent, { readOnly: true, attachments: [attachment] }),
    );
    expect(turn.cold).toBe(true);
    expect((await turn.tools.run("read_file", { path: "README.md" })).content).toBe("# Acme\n");
    await turn.tools.run("write_file", { path: "README.md", content: "changed" });
    await turn.tools.run("write_file", { path: "new.txt", content: "new" });
    expect(await turn.finish()).toEqual({ pushedCommit: null, publishedOutputs: [] });
    expect(log()).toEqual(before);
    // The turn's files stay for the next turn of the conversation.
    const next = await manager.acquire(turnRequest("ro", agent));
    expect(next.cold).toBe(false);
    expect((await next.tools.run("read_file", { path: "new.txt" })).content).toBe("new");
  });

  it("with read_only false commit all changes as the agent and push to the default branch", async () => {
    const manager = await bed.manager(await bed.dir("root"));
    const turn = await manager.acquire(
      turnRequest("rw", agent, { readOnly: false, attachments: [attachment] }),
    );
    expect(turn.attachments).toEqual([".uploads/upload.txt"]);
    await turn.tools.run("write_file", { path: "README.md", content: "# Acme, edited\n" });
    await turn.tools.run("write_file", { path: "docs/new.md", content: "new page" });
    const report = await turn.finish();
    expect(report.pushedCommit).toMatch(/^[0-9a-f]{40}$/);

    const [head, seed] = log();
    expect(head).toBe(
      `${report.pushedCommit} ${AGENT_AUTHOR_NAME} <${AGENT_AUTHOR_EMAIL}> ${AGENT_AUTHOR_NAME} <${AGENT_AUTHOR_EMAIL}> agent turn on conversation rw`,
    );
    expect(seed).toMatch(/Human <human@example.com> .* seed$/);
    expect(git(bare, "ls-tree", "-r", "--name-only", "main").trim().split("\n")).toEqual([
      "README.md",
      "docs/new.md",
    ]);
    expect(git(bare, "branch", "--format=%(refname:short)").trim()).toBe("main");
    expect(git(bare, "show", "main:README.md")).toBe("# Acme, edited\n");

    // A turn that changes nothing pushes nothing.
    const idle = await manager.acquire(turnRequest("rw", agent, { readOnly: false }));
    expect(await idle.finish()).toEqual({ pushedCommit: null, publishedOutputs: [] });
    expect(log()).toHaveLength(2);
  });

  it("fetch what others pushed, also after reclaim, and survive a restart", async () => {
    const root = await bed.dir("root");
    const manager = await bed.manager(root);
    const first = await manager.acquire(turnRequest("sync", agent, { readOnly: false }));
    await first.tools.run("write_file", { path: "scratch.txt", content: "turn 1" });
    await first.finish();

    const other = path.join(await bed.dir("other"), "clone");
    git(path.dirname(other), "clone", "--quiet", bare, other);
    await writeFile(path.join(other, "theirs.txt"), "pushed by someone else");
    git(other, "add", "theirs.txt");
    git(other, "commit", "--quiet", "-m", "theirs");
    git(other, "push", "--quiet", "origin", "HEAD:main");

    const warm = await manager.acquire(turnRequest("sync", agent, { readOnly: true }));
    expect(warm.cold).toBe(false);
    expect((await warm.tools.run("read_file", { path: "theirs.txt" })).content).toBe(
      "pushed by someone else",
    );
    await warm.finish();
    await manager.close();

    const reclaiming = await bed.manager(root, { idleMs: 10 });
    await (await reclaiming.acquire(turnRequest("sync", agent))).finish();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const cold = await reclaiming.acquire(turnRequest("sync", agent, { readOnly: true }));
    expect(cold.cold).toBe(true);
    expect((await cold.tools.run("read_file", { path: "scratch.txt" })).content).toBe("turn 1");
    await reclaiming.close();

    const restarted = await bed.manager(root);
    const resumed = await restarted.acquire(turnRequest("sync", agent, { readOnly: false }));
    expect(resumed.cold).toBe(true);
    await resumed.tools.run("write_file", { path: "after-restart.txt", content: "ok" });
    const { pushedCommit } = await resumed.finish();
    expect(log()[0]).toMatch(new RegExp(`^${pushedCommit} Agent`));
    expect(git(bare, "show", "main:theirs.txt")).toBe("pushed by someone else");
  });

  it("keep the git directory out of the tools' reach", async () => {
    const manager = await bed.manager(await bed.dir("root"));
    const marker = path.join(await bed.dir("marker"), "pwned");
    const turn = await manager.acquire(turnRequest("hooks", agent, { readOnly: false }));
    // A planted .git in the working tree is neither used by the server's git nor committed.
    await turn.tools.run("write_file", {
      path: ".git/hooks/pre-commit",
      content: `#!/bin/sh\ntouch ${marker}\n`,
    });
    await turn.tools.run("write_file", {
      path: ".git/config",
      content: `[core]\n\tfsmonitor = touch ${marker}\n`,
    });
    await turn.tools.run("write_file", { path: "real.txt", content: "real change" });
    const { pushedCommit } = await turn.finish();
    expect(pushedCommit).not.toBeNull();
    expect(existsSync(marker)).toBe(false);
    expect(git(bare, "ls-tree", "-r", "--name-only", "main").trim().split("\n")).toEqual([
      "README.md",
      "real.txt",
    ]);
    expect(await readFile(path.join(turn.workdir, ".git", "config"), "utf8")).toContain("fsmonitor");
  });

  it("a branch that would check out past the disk quota is neither merged into a work tree nor cloned", async () => {
    const MiB = 1024 * 1024;
    const manager = await bed.manager(await bed.dir("root"), { limits: { diskBytes: 2 * MiB } });
    const first = await manager.acquire(turnRequest("big-merge", agent));
    await first.finish();
    // Someone outside the server pushes 3 MiB (the server's own pushes are measured before they leave).
    const other = path.join(await bed.dir("other"), "clone");
    git(path.dirname(other), "clone", "--quiet", bare, other);
    await writeFile(path.join(other, "huge.bin"), Buffer.alloc(3 * MiB, 1));
    git(other, "add", "huge.bin");
    git(other, "commit", "--quiet", "-m", "huge");
    git(other, "push", "--quiet", "origin", "HEAD:main");
    // The warm conversation fetches it but does not check it out; its turn runs on what it has.
    const warm = await manager.acquire(turnRequest("big-merge", agent));
    expect(existsSync(path.join(warm.workdir, "huge.bin"))).toBe(false);
    expect((await warm.tools.run("read_file", { path: "README.md" })).content).toBe("# Acme\n");
    await warm.finish();
    // A new conversation cannot start on it: the turn says why, and no half clone is left to commit from.
    for (let attempt = 0; attempt < 2; attempt++)
      await expect(manager.acquire(turnRequest("big-clone", agent, { readOnly: false }))).rejects.toThrow(
        /^not checked out: a checkout of the branch would write \d+ bytes of disk .* more than the disk quota of 2097152/,
      );
  });

  it("fork copies the clone; isolated turns get no clone", async () => {
    const manager = await bed.manager(await bed.dir("root"));
    const parent = await manager.acquire(turnRequest("p", agent));
    await parent.tools.run("write_file", { path: "wip.txt", content: "parent work" });
    await parent.finish();
    await manager.fork(copyOwner("p", agent), copyOwner("c", agent));
    const child = await manager.acquire(turnRequest("c", agent, { readOnly: false }));
    expect((await child.tools.run("read_file", { path: "wip.txt" })).content).toBe("parent work");
    // The child's own change makes the turn push, and "stage all" takes the inherited work along.
    await child.tools.run("write_file", { path: "child.txt", content: "child work" });
    const { pushedCommit } = await child.finish();
    expect(log()[0].startsWith(`${pushedCommit} `)).toBe(true);

    const isolated = await manager.acquire(turnRequest("p", agent, { isolated: true, readOnly: false }));
    expect((await isolated.tools.run("list_files", {})).content).toBe("(empty)");
    await isolated.tools.run("write_file", { path: "x.txt", content: "x" });
    expect(await isolated.finish()).toEqual({ pushedCommit: null, publishedOutputs: [] });
    expect(log()).toHaveLength(2);
  });
});
