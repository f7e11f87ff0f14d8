/**
 * A repo agent's turn run by an attacker, against what the server's own git does with its work tree: git
 * steered to a host repository by a `.git` planted in a sub-folder, and the disk quota passed by what the
 * server pushes and checks out (a rebase onto another writer's push, checkout conversions). Over real HTTP
 * against the reference server, with real git and real host repositories.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bareGit,
  onlyToolResult,
  PHRASES,
  removeDir,
  type SandboxServer,
  startSandboxServer,
  toolResults,
} from "../test/sandbox-server.ts";

const MiB = 1024 * 1024;
const hostGit = (cwd: string, ...args: string[]) =>
  execFileSync("git", args, {
    cwd,
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" },
    encoding: "utf8",
  });

/** Bytes a plain `git clone` of `bare`'s default branch writes (its files, .git aside): what any clone costs. */
async function clonedBytes(bare: string): Promise<number> {
  const scratch = await mkdtemp(path.join(tmpdir(), "clone-size-"));
  try {
    hostGit(scratch, "clone", "-q", bare, "t");
    const sizes = execFileSync(
      "find",
      ["t", "-path", "t/.git", "-prune", "-o", "-type", "f", "-printf", "%s\\n"],
      {
        cwd: scratch,
        encoding: "utf8",
      },
    );
    return sizes
      .split("\n")
      .filter(Boolean)
      .reduce((sum, line) => sum + Number(line), 0);
  } finally {
    await removeDir(scratch);
  }
}

/** The sum of the regular files' sizes in a conversation's work tree (`.uploads/` aside), read by a tool. */
const WORK_TREE_BYTES =
  "find . -path ./.uploads -prune -o -type f -printf '%s\\n' | awk '{s+=$1} END {print s+0}'";

describe("nothing in a work tree steers the server's git", { tags: ["sandbox"] }, () => {
  let s: SandboxServer;
  let hostDir: string;
  const feeders: ChildProcess[] = [];
  beforeAll(async () => {
    s = await startSandboxServer({ unsafeNoIsolation: false });
    hostDir = await mkdtemp(path.join(tmpdir(), "host-repos-"));
  });
  afterAll(async () => {
    for (const feeder of feeders) if (feeder.pid !== undefined) process.kill(-feeder.pid, "SIGKILL");
    await s.close();
    await removeDir(s.dataDir);
    await removeDir(hostDir);
  });

  /**
   * A bare repository elsewhere on the host (as another conversation's clone would be) whose `HEAD` and branch
   * ref are FIFOs, each fed by a loop: every open of one for reading (git checking that the path is a repository,
   * git resolving its ref) lets the loop touch `opened`. Access times are not reliable (noatime); this is.
   */
  function trappedRepository(name: string): { repo: string; opened: string } {
    const repo = path.join(hostDir, `${name}.git`);
    const opened = path.join(hostDir, `${name}.opened`);
    hostGit(hostDir, "init", "-q", "--bare", repo);
    const fifos = [
      [path.join(repo, "HEAD"), "ref: refs/heads/main"],
      [path.join(repo, "refs", "heads", "main"), "0123456789abcdef0123456789abcdef01234567"],
    ];
    for (const [fifo, content] of fifos) {
      execFileSync("rm", ["-f", fifo]);
      execFileSync("mkfifo", [fifo]);
      const feeder = spawn(
        "sh",
        [
          "-c",
          'while :; do exec 3>"$1"; touch "$3"; echo "$2" >&3; exec 3>&-; done',
          "sh",
          fifo,
          content,
          opened,
        ],
        { detached: true, stdio: "ignore" },
      );
      feeders.push(feeder);
    }
    return { repo, opened };
  }

  const plants = {
    file: (repo: string) => `mkdir -p sub && printf 'gitdir: ${repo}\\n' > sub/.git`,
    symlink: (repo: string) => `mkdir -p sub && ln -s ${repo} sub/.git`,
    // A repository whose common directory (objects, refs) is the host's: git reads its refs there.
    directory: (repo: string) =>
      `mkdir -p sub/.git/refs sub/.git/objects && echo 'ref: refs/heads/main' > sub/.git/HEAD && echo ${repo} > sub/.git/commondir`,
  };

  it.each(Object.keys(plants) as Array<keyof typeof plants>)(
    "a .git %s in a sub-folder naming a host repository: the writable turn ends with an error and git never opened it",
    async (kind) => {
      const { repo, opened } = trappedRepository(`host-${kind}`);
      const before = bareGit(s.bareRepo, "rev-parse", "refs/heads/main").trim();
      const plant = await s.turn(
        "acme-widgets",
        PHRASES.run(`${plants[kind](repo)} && echo planted > sub/file.txt`),
        {
          conversation_id: `steer-${kind}`,
          read_only: false,
        },
      );
      expect(toolResults(plant)[0]).toMatchObject({ is_error: false });
      // The proof: nothing opened the host repository's HEAD or ref (the old code's git add did, as root).
      expect(existsSync(opened)).toBe(false);
      expect(plant.eventNames.at(-1)).toBe("error");
      expect(plant.error).toContain(`not committed: sub/.git (${kind}) is a .git entry in a sub-folder`);
      expect(bareGit(s.bareRepo, "rev-parse", "refs/heads/main").trim()).toBe(before);
      // The next writable turn (its baseline stages the tree as it starts) neither: and once the entry is gone,
      // the turn's files are committed.
      const again = await s.turn("acme-widgets", PHRASES.run("true"), {
        conversation_id: `steer-${kind}`,
        read_only: false,
      });
      expect(again.error).toContain("is a .git entry");
      expect(existsSync(opened)).toBe(false);
      const removed = await s.turn("acme-widgets", PHRASES.run("rm -rf sub/.git"), {
        conversation_id: `steer-${kind}`,
        read_only: false,
      });
      expect(removed.error).toBeUndefined();
      expect(bareGit(s.bareRepo, "show", "refs/heads/main:sub/file.txt")).toBe("planted\n");
      expect(existsSync(opened)).toBe(false);
    },
  );

  it("the work tree's own top-level .git is never read (every git of the server names its git directory)", async () => {
    const { repo, opened } = trappedRepository("host-top");
    const reply = await s.turn(
      "acme-widgets",
      PHRASES.run(`printf 'gitdir: ${repo}\\n' > .git && echo top > top.txt`),
      { conversation_id: "steer-top", read_only: false },
    );
    expect(reply.error).toBeUndefined();
    expect(bareGit(s.bareRepo, "show", "refs/heads/main:top.txt")).toBe("top\n");
    expect(existsSync(opened)).toBe(false);
  });
});

describe("the disk quota holds for what the server's git pushes and checks out", () => {
  const quota = 3 * MiB;
  const started: SandboxServer[] = [];
  async function server(): Promise<SandboxServer> {
    const s = await startSandboxServer({ sandboxLimits: { diskBytes: quota } });
    started.push(s);
    return s;
  }
  afterAll(async () => {
    for (const s of started) {
      await s.close().catch(() => undefined);
      await removeDir(s.dataDir);
    }
  });

  it("two writers each just under the quota at once: the second push, rebased onto the first, is refused; the next clone fits", async () => {
    const s = await server();
    const writers = ["quota-writer-a", "quota-writer-b"];
    // Both clones exist before either writes: the second push meets the first and is rebased onto it.
    for (const id of writers)
      onlyToolResult(await s.turn("acme-widgets", PHRASES.run("true"), { conversation_id: id }));
    const replies = await Promise.all(
      writers.map((id) =>
        s.turn(
          "acme-widgets",
          PHRASES.run(`head -c 2500000 /dev/urandom > ${id}.bin && sleep 3 && echo written`),
          {
            conversation_id: id,
            read_only: false,
          },
        ),
      ),
    );
    for (const reply of replies) expect(toolResults(reply)[0]).toMatchObject({ is_error: false });
    const refused = replies.filter((reply) => reply.error !== undefined);
    expect(refused).toHaveLength(1);
    expect(refused[0].error).toMatch(/^not pushed: a checkout of the branch would write \d+ bytes/);
    expect(await clonedBytes(s.bareRepo)).toBeLessThanOrEqual(quota);
    // Another member's read-only conversation starts with a clone the server writes: within the quota.
    const next = await s.turn("acme-widgets", PHRASES.run(WORK_TREE_BYTES), {
      conversation_id: "quota-reader",
    });
    expect(Number(onlyToolResult(next).content.trim())).toBeLessThanOrEqual(quota);
    // The refused writer's work tree was not given the other's file by a rebase.
    const loser = writers[replies.indexOf(refused[0])];
    const winner = writers.find((id) => id !== loser);
    const listing = await s.turn("acme-widgets", PHRASES.run("ls"), { conversation_id: loser });
    expect(onlyToolResult(listing).content).not.toContain(`${winner}.bin`);
  }, 60_000);

  it("a .gitattributes eol=crlf doubling a file of newlines on checkout: the push is refused, the next clone fits", async () => {
    const s = await server();
    const before = bareGit(s.bareRepo, "rev-parse", "refs/heads/main").trim();
    // 2,000,000 bytes as staged, 4,000,000 as every clone writes them.
    const reply = await s.turn(
      "acme-widgets",
      PHRASES.run(
        "printf '*.txt text eol=crlf\\n' > .gitattributes && head -c 2000000 /dev/zero | tr '\\000' '\\n' > lines.txt && echo ok",
      ),
      { conversation_id: "quota-crlf", read_only: false },
    );
    expect(toolResults(reply)[0]).toMatchObject({ is_error: false });
    expect(reply.error).toMatch(/^not pushed: a checkout of the branch would write 40\d{5} bytes/);
    expect(bareGit(s.bareRepo, "rev-parse", "refs/heads/main").trim()).toBe(before);
    expect(await clonedBytes(s.bareRepo)).toBeLessThanOrEqual(quota);
  }, 60_000);
});
