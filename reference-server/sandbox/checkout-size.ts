/**
 * Bytes a checkout of a commit writes: what the disk quota must hold for a tree the server pushes (a later
 * clone checks it out) or checks out itself. A blob's size is not always its file's: a `.gitattributes` of
 * the tree can ask for conversions on checkout (`eol=crlf` doubles a file of newlines, `ident` makes `$Id$`
 * 47 bytes). Such trees are measured converted, by git itself (`cat-file --filters`) with the tree's own
 * attributes, as a fresh clone would apply them. Filter drivers are never run: the closed configuration
 * defines none (git-command.ts). `working-tree-encoding` is unset by the clone's info/attributes.
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import path from "node:path";
import { GIT_TIMEOUT_MS, GitError, git, gitEnvironment, SAFE_CONFIG } from "./git-command.ts";
import { spawnProcess } from "./spawner.ts";

/** ls-tree modes of files a checkout writes: regular, executable, symlink (gitlinks make an empty folder). */
const REGULAR = new Set(["100644", "100755"]);
const SYMLINK = "120000";

/** What a checkout of a tree writes, in the disk quota's terms. */
export interface CheckoutSize {
  /** Apparent bytes of its files and links, after conversions. */
  bytes: number;
  /**
   * Bytes of disk it takes on a file system of 4 KiB blocks (ext4, tmpfs), as the quota measures a work tree:
   * each file rounded up to a block, a block per directory. A conversion's growth is added unrounded.
   */
  diskBytes: number;
  /** Files, links and directories (the file quota counts each). */
  entries: number;
}

const BLOCK = 4096;
const YIELD_EVERY = 10_000;
const roundUp = (bytes: number) => Math.ceil(bytes / BLOCK) * BLOCK;

/**
 * What a checkout of `treeish` (in the repository at `gitDir`) writes. A tree whose blobs alone take more than
 * `limitBytes` is not measured further (it is over the limit whatever its attributes say).
 */
export async function checkoutSize(
  gitDir: string,
  treeish: string,
  limitBytes: number,
): Promise<CheckoutSize> {
  const listing = await git(
    [`--git-dir=${gitDir}`, "ls-tree", "-r", "-l", "-z", "--full-tree", treeish],
    gitDir,
  );
  let blobBytes = 0;
  let regularBytes = 0;
  let diskBytes = 0;
  let files = 0;
  let hasAttributes = false;
  const directories = new Set<string>();
  // `<oid> <path>` of each regular file, NUL-terminated: cat-file's input.
  const regular: string[] = [];
  const lines = listing.split("\0");
  for (let index = 0; index < lines.length; index++) {
    // A tree of 100,000 files is ~60 ms of parsing on a loaded core: other requests get the loop in between.
    if (index > 0 && index % YIELD_EVERY === 0) await new Promise((resolve) => setImmediate(resolve));
    const entry = lines[index];
    const tab = entry.indexOf("\t");
    if (tab < 0) continue;
    const [mode, , oid, size] = entry.slice(0, tab).split(/ +/);
    const file = entry.slice(tab + 1);
    // A gitlink is checked out as an empty directory.
    files++;
    for (let slash = file.lastIndexOf("/"); slash > 0; slash = file.lastIndexOf("/", slash - 1))
      directories.add(file.slice(0, slash));
    if (!REGULAR.has(mode) && mode !== SYMLINK) continue;
    const bytes = Number(size) || 0;
    blobBytes += bytes;
    // A short symlink lives in its inode; a long one takes a block.
    diskBytes += REGULAR.has(mode) || bytes > 60 ? roundUp(bytes) : 0;
    if (!REGULAR.has(mode)) continue;
    regularBytes += bytes;
    regular.push(`${oid} ${file}\0`);
    if (file === ".gitattributes" || file.endsWith("/.gitattributes")) hasAttributes = true;
  }
  diskBytes += directories.size * BLOCK;
  const entries = files + directories.size;
  // No attributes in the tree, no conversion on checkout (the closed configuration sets no core.autocrlf/eol).
  if (!hasAttributes || diskBytes > limitBytes) return { bytes: blobBytes, diskBytes, entries };
  const growth = (await convertedBytes(gitDir, treeish, regular)) - regularBytes;
  return { bytes: blobBytes + growth, diskBytes: diskBytes + Math.max(0, growth), entries };
}

/**
 * The regular files' bytes after checkout conversion. Attributes are the tree's own: its `.gitattributes` files
 * alone are checked out into an empty scratch work tree (through a scratch index), where cat-file reads them
 * (it reads attributes from a work tree only). The contents go from git to `wc -c` through a pipe, never
 * through the server.
 */
async function convertedBytes(gitDir: string, treeish: string, regular: string[]): Promise<number> {
  const scratch = await mkdtemp(path.join(gitDir, "checkout-size-"));
  try {
    const workTree = path.join(scratch, "work-tree");
    await mkdir(workTree);
    const location = [`--git-dir=${gitDir}`, `--work-tree=${workTree}`];
    const env = { GIT_INDEX_FILE: path.join(scratch, "index") };
    await git([...location, "read-tree", treeish], scratch, undefined, env);
    const attributeFiles = regular
      .map((line) => line.slice(line.indexOf(" ") + 1))
      .filter((entry) => entry === ".gitattributes\0" || entry.endsWith("/.gitattributes\0"));
    await gitFed(
      [...location, "checkout-index", "--force", "-z", "--stdin"],
      scratch,
      env,
      Buffer.from(attributeFiles.join("")),
      false,
    );
    // An empty format: each object is printed as "\n", its converted content, "\n". Run from the work tree:
    // from anywhere else, cat-file finds no attributes at all.
    const printed = await gitFed(
      [...location, "cat-file", "-z", "--batch=", "--filters"],
      workTree,
      env,
      Buffer.from(regular.join("")),
      true,
    );
    return Number(printed.trim()) - 2 * regular.length;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * Git with `input` on its stdin; with `count`, its output goes to `wc -c` and the byte count is returned (the
 * output itself never reaches the server). Its own process group, killed whole at the time limit.
 */
function gitFed(
  args: string[],
  cwd: string,
  env: Record<string, string>,
  input: Buffer,
  count: boolean,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawnProcess({
      file: "/bin/bash",
      args: [
        "-c",
        count ? 'set -o pipefail; git "$@" <&3 | wc -c' : 'git "$@" <&3 >/dev/null',
        "bash",
        ...SAFE_CONFIG,
        ...args,
      ],
      cwd,
      env: { ...gitEnvironment(), ...env },
      stdout: true,
      stderr: true,
      pipes: [input],
      detached: true,
      nice: 10,
    });
    let out = "";
    let err = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL", true);
    }, GIT_TIMEOUT_MS);
    child.on("stdout", (chunk: Buffer) => {
      out = (out + chunk.toString("latin1")).slice(-64);
    });
    child.on("stderr", (chunk: Buffer) => {
      err = (err + chunk.toString("utf8")).slice(-2048);
    });
    child.on("error", (error: Error) => {
      err ||= error.message;
    });
    child.on("close", (code: number | null) => {
      clearTimeout(timer);
      if (code === 0 && (!count || (Number.isSafeInteger(Number(out.trim())) && out.trim() !== "")))
        resolve(out);
      else
        reject(
          new GitError(
            `git ${args[2]} failed: ${timedOut ? `timed out after ${GIT_TIMEOUT_MS / 1000} s` : err.trim() || `exit ${code}`}`,
            code,
          ),
        );
    });
  });
}
