/**
 * Repository-backed working directories. The git directory lives under `repos/`, apart from the
 * working tree the sandbox sees, and every git command names both explicitly: a tool can write
 * anything into the working tree (even a `.git`), but never the config or hooks that the server's
 * own git runs with.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { UPLOADS_DIR } from "./attachments.ts";
import { runCollected } from "./spawner.ts";
import { sumFind } from "./tree-ops.ts";

export const AGENT_AUTHOR_NAME = "Agent";
export const AGENT_AUTHOR_EMAIL = "agent@agent-api.local";

export interface RepoPaths {
  gitDir: string;
  workTree: string;
}

export class GitError extends Error {
  readonly exitCode: number | null;
  constructor(message: string, exitCode: number | null) {
    super(message);
    this.name = "GitError";
    this.exitCode = exitCode;
  }
}

/** Git with no user/system config, no hooks, no prompts, and the fixed agent identity. */
function gitEnvironment(): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: "/nonexistent",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    // Submodule transports count as "not from the user": file:// and ext:: from a .gitmodules are refused.
    GIT_ALLOW_PROTOCOL: "https:http:ssh:git:file",
    GIT_AUTHOR_NAME: AGENT_AUTHOR_NAME,
    GIT_AUTHOR_EMAIL: AGENT_AUTHOR_EMAIL,
    GIT_COMMITTER_NAME: AGENT_AUTHOR_NAME,
    GIT_COMMITTER_EMAIL: AGENT_AUTHOR_EMAIL,
    LANG: "C",
  };
}

/** Git directories whose last fast-forward failed (retried on the next turn). */
const mergePending = new Set<string>();

/**
 * A closed configuration for every git the server runs (outside the sandbox, as the server's user). A turn
 * can write anything into the work tree, nested repositories with their own config included; none of it may
 * make the server's git run a command. Command-line `-c` wins over every config file and is passed on to any
 * git process git itself starts (GIT_CONFIG_PARAMETERS), so a nested repository's settings never apply.
 */
const SAFE_CONFIG = [
  "core.hooksPath=/dev/null",
  "commit.gpgSign=false",
  "core.fsmonitor=false",
  // Never enter a nested repository (a gitlink): that is where its own uploadpack, fsmonitor... would run.
  "submodule.recurse=false",
  "fetch.recurseSubmodules=false",
  "push.recurseSubmodules=no",
  "diff.ignoreSubmodules=all",
  "status.submoduleSummary=false",
  // Transports that run commands or reach local paths are refused unless the server named them itself.
  "protocol.ext.allow=never",
  "protocol.file.allow=user",
  "core.sshCommand=ssh",
  "credential.helper=",
  "core.askPass=",
  "core.pager=cat",
  "core.attributesFile=/dev/null",
  "diff.external=",
  "gc.auto=0",
  "maintenance.auto=false",
].flatMap((setting) => ["-c", setting]);

/** A nested repository in the work tree of a read-write turn: its changes are not committed. */
export class NestedRepositoryError extends Error {
  constructor(paths: string[]) {
    super(
      `not committed: ${paths.join(", ")} ${paths.length === 1 ? "is a nested git repository" : "are nested git repositories"} ` +
        "(a directory with its own .git). The server never commits or follows nested repositories; remove " +
        "their .git directories to commit their files as plain content.",
    );
    this.name = "NestedRepositoryError";
  }
}

/** The work tree's files add up to more than the disk quota: sparse files, which git would hash and push whole. */
export class OversizedWorkTreeError extends Error {
  constructor(bytes: number, limit: number) {
    super(
      `not committed: the working tree's files add up to ${bytes} bytes (apparent size, holes of sparse files ` +
        `included), more than the disk quota of ${limit}. Git would read, store and push every byte; remove ` +
        "or shrink files to commit.",
    );
    this.name = "OversizedWorkTreeError";
  }
}

/**
 * The longest any one git command of the server may run (a clone of a large repository included). Past it
 * the command is killed: a work tree a turn made must not hold the conversation, or a core, for ever.
 */
const GIT_TIMEOUT_MS = 10 * 60_000;

export async function git(args: string[], cwd: string, repo?: RepoPaths): Promise<string> {
  const location = repo ? [`--git-dir=${repo.gitDir}`, `--work-tree=${repo.workTree}`] : [];
  const result = await runCollected({
    file: "git",
    args: [...SAFE_CONFIG, ...location, ...args],
    cwd,
    env: gitEnvironment(),
    maxBuffer: 64 * 1024 * 1024,
    timeoutMs: GIT_TIMEOUT_MS,
    // Hashing what a turn wrote is the server's work on the turn's behalf: other turns come first.
    nice: 10,
  });
  if (result.code === 0 && result.error === undefined && !result.overflowed)
    return result.stdout.toString("utf8");
  const why = result.timedOut
    ? `timed out after ${GIT_TIMEOUT_MS / 1000} s`
    : result.overflowed
      ? "its output passed 64 MiB"
      : result.stderr.toString("utf8").trim() ||
        result.error ||
        `exit ${result.code ?? result.signal ?? "unknown"}`;
  throw new GitError(`git ${args[0]} failed: ${why}`, result.code);
}

/**
 * Apparent bytes of the work tree's regular files (nested `.git` directories aside): what `git add` may read.
 * Blocks on disk are bounded by the quota; apparent size is not (sparse files). `.uploads/` counts too: a
 * `.gitignore` of the turn can make git read it before it is unstaged. A tree too large to walk in a minute
 * counts as too large.
 */
async function workTreeApparentBytes(workTree: string): Promise<number> {
  const walk = await sumFind(
    [workTree, "-xdev", "-name", ".git", "-prune", "-o", "-type", "f", "-printf", "%s\\n"],
    60_000,
  );
  return walk === null ? Number.POSITIVE_INFINITY : walk.sum;
}

/** Refuses to stage a work tree whose files add up to more than `limitBytes` (see OversizedWorkTreeError). */
async function refuseOversizedWorkTree(repo: RepoPaths, limitBytes: number): Promise<void> {
  const bytes = await workTreeApparentBytes(repo.workTree);
  if (bytes > limitBytes) throw new OversizedWorkTreeError(bytes, limitBytes);
}

async function gitSucceeds(args: string[], repo: RepoPaths): Promise<boolean> {
  try {
    await git(args, repo.workTree, repo);
    return true;
  } catch (error) {
    if (error instanceof GitError && error.exitCode === 1) return false;
    throw error;
  }
}

/** The remote's default branch, from `git ls-remote --symref origin HEAD`; null for an empty remote. */
export async function remoteDefaultBranch(repo: RepoPaths): Promise<string | null> {
  const out = await git(["ls-remote", "--symref", "origin", "HEAD"], repo.workTree, repo);
  const match = /^ref: refs\/heads\/(\S+)\s+HEAD$/m.exec(out);
  return match ? match[1] : null;
}

/**
 * A fresh clone of `url` whose git directory is `repo.gitDir`, checked out into `repo.workTree`
 * (which may already hold the conversation's untracked files).
 */
export async function cloneInto(url: string, repo: RepoPaths, scratchRoot: string): Promise<void> {
  // git clone wants an empty target for its `.git` link file; the real tree is checked out afterwards.
  const scratch = await mkdtemp(path.join(scratchRoot, "clone-"));
  try {
    await git(
      [
        "clone",
        "--quiet",
        "--no-checkout",
        `--separate-git-dir=${repo.gitDir}`,
        "--",
        url,
        path.join(scratch, "t"),
      ],
      scratchRoot,
    );
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  await excludeUploads(repo);
  if (await gitSucceeds(["rev-parse", "--verify", "--quiet", "HEAD"], repo)) {
    await git(["reset", "--quiet", "--hard", "HEAD"], repo.workTree, repo);
  }
}

/**
 * The clone's own info files. `.uploads/` is excluded (attachments are never committed). info/attributes
 * outranks every `.gitattributes` of the work tree: `working-tree-encoding` is unset there, because re-encoding
 * makes git hold a file whole in memory many times over (the review measured 6.9 GB and 4 minutes for a
 * 134 MB file), as the server's user and outside every cgroup.
 */
export async function excludeUploads(repo: RepoPaths): Promise<void> {
  await mkdir(path.join(repo.gitDir, "info"), { recursive: true });
  await writeFile(path.join(repo.gitDir, "info", "exclude"), `/${UPLOADS_DIR}/\n`);
  await writeFile(path.join(repo.gitDir, "info", "attributes"), "* !working-tree-encoding\n");
}

/** A ref's commit read straight from the git directory (loose, then packed): no process needed. */
async function readRef(gitDir: string, ref: string): Promise<string | null> {
  try {
    return (await readFile(path.join(gitDir, ref), "utf8")).trim();
  } catch {
    const packed = await readFile(path.join(gitDir, "packed-refs"), "utf8").catch(() => "");
    const line = packed.split("\n").find((l) => l.endsWith(` ${ref}`));
    return line ? line.slice(0, line.indexOf(" ")) : null;
  }
}

/**
 * Fetches and fast-forwards to the remote branch when that is possible; local changes are kept.
 * A warm turn skips the merge when the fetch brought nothing new for the branch (it would be a no-op).
 */
export async function refresh(repo: RepoPaths, branch: string | null, alwaysMerge: boolean): Promise<void> {
  const tracking = branch === null ? null : `refs/remotes/origin/${branch}`;
  const before = tracking === null ? null : await readRef(repo.gitDir, tracking);
  await git(["fetch", "--quiet", "--prune", "--no-recurse-submodules", "origin"], repo.workTree, repo);
  if (branch === null || tracking === null) return;
  const after = await readRef(repo.gitDir, tracking);
  if (after === null || (after === before && !alwaysMerge && !mergePending.has(repo.gitDir))) return;
  // Fails when local work diverged or conflicts: the turn then works on what it has, and the next
  // turn tries again even if the fetch brings nothing new.
  try {
    await git(["merge", "--quiet", "--ff-only", `origin/${branch}`], repo.workTree, repo);
    mergePending.delete(repo.gitDir);
  } catch {
    mergePending.add(repo.gitDir);
  }
}

/**
 * `git add --all`, then `.uploads/` put back as HEAD has it: info/exclude alone is not enough, since a
 * `.gitignore` the turn writes outranks it (`!/.uploads/` would stage and push attachments). (An exclude
 * pathspec makes git add fail as soon as `.uploads/` is ignored, so the reset it is.)
 */
async function stageAll(repo: RepoPaths): Promise<void> {
  await git(["add", "--all"], repo.workTree, repo);
  await git(["reset", "--quiet", "--", UPLOADS_DIR], repo.workTree, repo);
}

/**
 * Stages the work tree as it is and names its tree: the baseline a writable turn's changes are measured
 * against (staging is harmless: only a writable turn ever commits, and `.uploads/` is excluded).
 */
export async function snapshotWorkTree(repo: RepoPaths, limitBytes: number): Promise<string | null> {
  // Too large to stage: the turn runs, and its commit is refused with the reason.
  if ((await workTreeApparentBytes(repo.workTree)) > limitBytes) return null;
  await stageAll(repo);
  return (await git(["write-tree"], repo.workTree, repo)).trim();
}

/**
 * Staged gitlinks (mode 160000) that HEAD does not have: a nested repository the turn made or moved. They are
 * unstaged and the commit refused, so the default branch never carries a link into a repository a turn
 * controls (a later fetch, here or in anyone's clone, could otherwise be steered into it).
 */
async function refuseNestedRepositories(repo: RepoPaths): Promise<void> {
  // The closed configuration hides gitlinks from diffs; here they are the point.
  const raw = await git(
    ["diff", "--cached", "--raw", "--no-renames", "--ignore-submodules=none", "-z"],
    repo.workTree,
    repo,
  );
  const fields = raw.split("\0");
  const nested: string[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const [, newMode] = fields[i].slice(1).split(" ");
    if (newMode === "160000") nested.push(fields[i + 1]);
  }
  if (nested.length === 0) return;
  await git(["reset", "--quiet"], repo.workTree, repo);
  throw new NestedRepositoryError(nested);
}

/** Pushes tried before a turn reports that the default branch kept moving. */
const PUSH_ATTEMPTS = 5;

/**
 * Stages everything (but `.uploads/`, excluded), commits as the agent and pushes to `branch`. Returns the new
 * commit, or null when the turn changed nothing. A push rejected because the remote moved (another
 * conversation pushed first, or holds the ref lock of a local repository) is retried after rebasing onto
 * it, a few times with a growing pause; a rebase that conflicts is abandoned and reported.
 */
export async function commitAndPush(
  repo: RepoPaths,
  branch: string,
  conversationId: string,
  limitBytes: number,
  baselineTree?: string | null,
): Promise<string | null> {
  await refuseOversizedWorkTree(repo, limitBytes);
  // Attachments are never staged, whatever a .gitignore says.
  await stageAll(repo);
  await refuseNestedRepositories(repo);
  if (await gitSucceeds(["diff", "--cached", "--quiet"], repo)) return null;
  // A turn that changed nothing pushes nothing, even when an earlier read-only turn left changes behind.
  if (
    baselineTree !== undefined &&
    baselineTree !== null &&
    (await git(["write-tree"], repo.workTree, repo)).trim() === baselineTree
  )
    return null;
  const message = `agent turn on conversation ${conversationId.replace(/[\r\n]+/g, " ").slice(0, 200)}`;
  await git(["commit", "--quiet", "--no-verify", "-m", message], repo.workTree, repo);
  for (let attempt = 1; ; attempt++) {
    try {
      await git(["push", "--quiet", "origin", `HEAD:refs/heads/${branch}`], repo.workTree, repo);
      break;
    } catch (error) {
      if (attempt >= PUSH_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, attempt * 50 + Math.random() * 50));
      await git(["fetch", "--quiet", "--no-recurse-submodules", "origin"], repo.workTree, repo);
      try {
        await git(["rebase", "--quiet", `origin/${branch}`], repo.workTree, repo);
      } catch (rebaseError) {
        await git(["rebase", "--abort"], repo.workTree, repo).catch(() => undefined);
        throw rebaseError;
      }
    }
  }
  return (await git(["rev-parse", "HEAD"], repo.workTree, repo)).trim();
}

/**
 * Unreachable loose objects are removed once they add up to more than `limitBytes`. Every `git add` stores what
 * it hashes, also when the commit is then refused (nested repository) or finds nothing new, and auto gc is off:
 * without this, each writable turn could leave a disk quota of objects in repos/, outside every quota.
 */
export async function pruneLooseObjects(repo: RepoPaths, limitBytes: number): Promise<void> {
  const counts = await git(["count-objects", "-v"], repo.workTree, repo);
  const looseKiB = Number(/^size: (\d+)$/m.exec(counts)?.[1] ?? 0);
  if (looseKiB * 1024 <= limitBytes) return;
  // Objects the index, a ref or a reflog still names are kept; only what nothing reaches goes.
  await git(["prune", "--expire=now"], repo.workTree, repo);
}
