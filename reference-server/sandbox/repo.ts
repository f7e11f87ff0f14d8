/**
 * Repository-backed working directories. The git directory lives under `repos/`, apart from the
 * working tree the sandbox sees, and every git command names both explicitly: a tool can write
 * anything into the working tree (even a `.git`), but never the config or hooks that the server's
 * own git runs with.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { UPLOADS_DIR } from "./attachments.ts";
import { checkoutSize } from "./checkout-size.ts";
import { GitError, git, type RepoPaths } from "./git-command.ts";
import { scanWorkTree, type WorkTreeScan } from "./work-tree-scan.ts";

export { AGENT_AUTHOR_EMAIL, AGENT_AUTHOR_NAME, type RepoPaths } from "./git-command.ts";

/** Git directories whose last fast-forward failed (retried on the next turn). */
const mergePending = new Set<string>();

/**
 * The server refused to commit or push a writable turn's changes, or to check out a tree: the turn ends with
 * the reason (the service's stream `error` event), and nothing reached the remote.
 */
export class RepoRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * A nested repository in the work tree of a read-write turn: its changes are not committed. (The walk before
 * staging refuses any nested `.git` first; this is the check of what was staged, kept behind it.)
 */
export class NestedRepositoryError extends RepoRefusedError {
  constructor(paths: string[]) {
    super(
      `not committed: ${paths.join(", ")} ${paths.length === 1 ? "is a nested git repository" : "are nested git repositories"} ` +
        "(a directory with its own .git). The server never commits or follows nested repositories; remove " +
        "their .git directories to commit their files as plain content.",
    );
  }
}

/**
 * A `.git` entry (directory, `gitdir:` file or symlink) in a sub-folder of the work tree, or a tree the walk
 * could not see whole: the server's git would open the repository it names, wherever that is on the host.
 */
export class WorkTreeGitEntryError extends RepoRefusedError {
  constructor(action: string, scan: WorkTreeScan) {
    super(
      scan.incomplete !== undefined
        ? `${action}: the working tree could not be checked for nested .git entries (${scan.incomplete}); ` +
            "the server runs no git on a tree it has not checked. Remove files or folders to continue."
        : `${action}: ${scan.nestedGitEntries.join(", ")} ${scan.nestedGitEntries.length === 1 ? "is a .git entry" : "are .git entries"} ` +
            "in a sub-folder of the working tree. The server's git never runs on a tree that holds one (it would " +
            "open the repository it names); remove it to continue.",
    );
  }
}

/** The work tree's files add up to more than the disk quota: sparse files, which git would hash and push whole. */
export class OversizedWorkTreeError extends RepoRefusedError {
  constructor(bytes: number, limit: number) {
    super(
      `not committed: the working tree's files add up to ${bytes} bytes (apparent size, holes of sparse files ` +
        `included), more than the disk quota of ${limit}. Git would read, store and push every byte; remove ` +
        "or shrink files to commit.",
    );
  }
}

/**
 * The tree a push would put on the branch (the turn's commit, after a rebase onto what others pushed) checks
 * out larger than the disk quota: every later clone would write it.
 */
export class OversizedCheckoutError extends RepoRefusedError {
  constructor(action: string, what: string, advice: string) {
    super(`${action}: a checkout of the branch would write ${what}. ${advice}`);
  }
}

/** The disk quota of a work tree: bytes of disk, and files and directories. */
export interface CheckoutQuota {
  bytes: number;
  files: number;
}

/** The walk every server git on the work tree waits for; throws when the tree holds a nested `.git`. */
async function refuseNestedGitEntries(repo: RepoPaths, action: string): Promise<WorkTreeScan> {
  const scan = await scanWorkTree(repo.workTree);
  if (scan.nestedGitEntries.length > 0 || scan.incomplete !== undefined)
    throw new WorkTreeGitEntryError(action, scan);
  return scan;
}

/** Refuses a tree (commit, branch) whose checkout would not fit in the quota. */
async function refuseOversizedCheckout(
  repo: RepoPaths,
  treeish: string,
  quota: CheckoutQuota,
  action: string,
): Promise<void> {
  const size = await checkoutSize(repo.gitDir, treeish, quota.bytes);
  const advice =
    action === "not pushed"
      ? "Remove or shrink files to push."
      : "The repository is larger than the disk quota of a conversation.";
  const bytes = Math.max(size.bytes, size.diskBytes);
  if (bytes > quota.bytes)
    throw new OversizedCheckoutError(
      action,
      `${bytes} bytes of disk (line-ending and ident conversions of .gitattributes included), more than the disk quota of ${quota.bytes}`,
      advice,
    );
  if (size.entries > quota.files)
    throw new OversizedCheckoutError(
      action,
      `${size.entries} files and directories, more than the file quota of ${quota.files}`,
      advice,
    );
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
export async function cloneInto(
  url: string,
  repo: RepoPaths,
  scratchRoot: string,
  quota: CheckoutQuota,
): Promise<void> {
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
    try {
      // The work tree may hold files of an earlier clone: the checkout is the server's git reading it.
      await refuseNestedGitEntries(repo, "not checked out");
      await refuseOversizedCheckout(repo, "HEAD", quota, "not checked out");
    } catch (error) {
      // A clone never checked out must not look like one: its empty index would commit every file's removal.
      await rm(repo.gitDir, { recursive: true, force: true });
      throw error;
    }
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

/** The commit HEAD names, through its branch; null when it names none yet. */
async function headCommit(gitDir: string): Promise<string | null> {
  const head = (await readFile(path.join(gitDir, "HEAD"), "utf8").catch(() => "")).trim();
  return head.startsWith("ref: ") ? readRef(gitDir, head.slice(5)) : head || null;
}

/**
 * Fetches and fast-forwards to the remote branch when that is possible; local changes are kept.
 * A warm turn skips the merge when the fetch brought nothing new for the branch (it would be a no-op).
 * The merge is also skipped (and tried again next turn) while the work tree holds a nested `.git` the merge's
 * git would open, or while the branch would check out larger than the disk quota.
 */
export async function refresh(
  repo: RepoPaths,
  branch: string | null,
  alwaysMerge: boolean,
  quota: CheckoutQuota,
): Promise<void> {
  const tracking = branch === null ? null : `refs/remotes/origin/${branch}`;
  const before = tracking === null ? null : await readRef(repo.gitDir, tracking);
  await git(["fetch", "--quiet", "--prune", "--no-recurse-submodules", "origin"], repo.workTree, repo);
  if (branch === null || tracking === null) return;
  const after = await readRef(repo.gitDir, tracking);
  if (after === null || (after === before && !alwaysMerge && !mergePending.has(repo.gitDir))) return;
  // Already there (a cold turn of a clone that is up to date): no merge, so no walk of the work tree either.
  if (after === (await headCommit(repo.gitDir))) {
    mergePending.delete(repo.gitDir);
    return;
  }
  // Fails when local work diverged or conflicts: the turn then works on what it has, and the next
  // turn tries again even if the fetch brings nothing new.
  try {
    await refuseNestedGitEntries(repo, "not merged");
    await refuseOversizedCheckout(repo, `origin/${branch}`, quota, "not merged");
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
  // Too large to stage, or holding a nested .git: the turn runs, and its commit is refused with the reason.
  const scan = await scanWorkTree(repo.workTree);
  if (scan.nestedGitEntries.length > 0 || scan.apparentBytes > limitBytes) return null;
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
  quota: CheckoutQuota,
  baselineTree?: string | null,
): Promise<string | null> {
  const scan = await refuseNestedGitEntries(repo, "not committed");
  // Blocks on disk are bounded by the quota; apparent size is not (sparse files). `.uploads/` counts too: a
  // `.gitignore` of the turn can make git read it before it is unstaged.
  if (scan.apparentBytes > quota.bytes) throw new OversizedWorkTreeError(scan.apparentBytes, quota.bytes);
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
    // What the branch will hold, as a clone checks it out (after a rebase: others' files too).
    await refuseOversizedCheckout(repo, "HEAD", quota, "not pushed");
    try {
      await git(["push", "--quiet", "origin", `HEAD:refs/heads/${branch}`], repo.workTree, repo);
      break;
    } catch (error) {
      if (attempt >= PUSH_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, attempt * 50 + Math.random() * 50));
      await git(["fetch", "--quiet", "--no-recurse-submodules", "origin"], repo.workTree, repo);
      // The rebase would check out what others pushed into this work tree: measured first, in the object
      // database only (a merge that conflicts is left to the rebase, which then fails and says so).
      const merged = await git(
        ["merge-tree", "--write-tree", `origin/${branch}`, "HEAD"],
        repo.workTree,
        repo,
      )
        .then((out) => out.split("\n")[0].trim())
        .catch(() => null);
      if (merged) await refuseOversizedCheckout(repo, merged, quota, "not pushed");
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
