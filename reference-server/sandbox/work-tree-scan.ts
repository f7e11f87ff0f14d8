/**
 * The walk that runs before the server's git reads a repo agent's work tree. Git, looking for untracked files,
 * takes a sub-folder holding a `.git` (a directory, a `gitdir: <path>` file or a symlink) for a repository
 * and opens what it names: as the server's user, at any host path. So the server runs no git on a work tree
 * with a `.git` entry in any sub-folder (the work tree's own top-level `.git` is never read: every git of the
 * server names its git directory). The same walk adds up the files' apparent size, which git would read whole.
 *
 * GNU find does the walk: it never follows a symlink (`-P`, lstat only), stays on the work tree's file system,
 * walks relative to open directories (no PATH_MAX limit, no recursion in the server) and runs in a process of
 * its own, so the event loop only reads its short records. The walk is bounded: in depth (`-maxdepth`), in
 * entries and in time; a walk that could not see everything counts as unsafe and too large.
 */
import { spawnProcess } from "./spawner.ts";

export interface WorkTreeScan {
  /** Apparent bytes of the regular files (holes of sparse files included), the top-level `.git` aside. */
  apparentBytes: number;
  /** `.git` entries in sub-folders, as `path (kind)`: at most MAX_REPORTED of them. */
  nestedGitEntries: string[];
  /** Why the walk could not see the whole tree; set, the tree counts as unsafe and too large. */
  incomplete?: string;
}

/** Deeper than this, nothing is looked at: a tree that goes deeper is refused (git stops at PATH_MAX). */
export const MAX_SCAN_DEPTH = 512;
/** Entries walked at most (ten times the default file quota). */
export const MAX_SCAN_ENTRIES = 1_000_000;
const SCAN_TIMEOUT_MS = 60_000;
const MAX_REPORTED = 10;

const KIND: Record<string, string> = { d: "directory", f: "file", l: "symlink" };

/**
 * Walks `workTree` without following a link. Records, NUL-separated: `g<depth> <type> <path>` for a `.git`
 * entry (not descended into), `f<size>` for a regular file, `d<depth>` for a directory, `o` for anything else.
 */
export function scanWorkTree(
  workTree: string,
  limits = { depth: MAX_SCAN_DEPTH, entries: MAX_SCAN_ENTRIES, timeoutMs: SCAN_TIMEOUT_MS },
): Promise<WorkTreeScan> {
  const args = [
    workTree,
    "-mindepth",
    "1",
    "-maxdepth",
    String(limits.depth),
    "-xdev",
    "(",
    "-name",
    ".git",
    "-printf",
    "g%d %y %P\\0",
    "-prune",
    ")",
    "-o",
    "(",
    "-type",
    "f",
    "-printf",
    "f%s\\0",
    ")",
    "-o",
    "(",
    "-type",
    "d",
    "-printf",
    "d%d\\0",
    ")",
    "-o",
    "-printf",
    "o\\0",
  ];
  return new Promise((resolve) => {
    // Niced: a courtesy to other turns, not a requirement.
    const child = spawnProcess({
      file: "find",
      args,
      env: { LANG: "C" },
      stdout: true,
      stderr: true,
      nice: 10,
    });
    const scan: WorkTreeScan = { apparentBytes: 0, nestedGitEntries: [] };
    let entries = 0;
    let rest = "";
    let stderr = "";
    const stop = (why: string) => {
      scan.incomplete ??= why;
      child.kill("SIGKILL");
    };
    const timer = setTimeout(
      () => stop(`the walk took longer than ${limits.timeoutMs / 1000} s`),
      limits.timeoutMs,
    );
    const take = (record: string) => {
      entries++;
      const tag = record[0];
      if (tag === "f") scan.apparentBytes += Number(record.slice(1)) || 0;
      else if (tag === "d" && Number(record.slice(1)) >= limits.depth)
        stop(`it is nested deeper than ${limits.depth} directories`);
      else if (tag === "g") {
        const space = record.indexOf(" ");
        const depth = Number(record.slice(1, space));
        if (depth < 2) return;
        const type = record[space + 1];
        // Paths are bytes: read as latin1 (one char per byte), shown as UTF-8.
        const rel = Buffer.from(record.slice(space + 3), "latin1").toString("utf8");
        if (scan.nestedGitEntries.length < MAX_REPORTED)
          scan.nestedGitEntries.push(`${rel} (${KIND[type] ?? "special file"})`);
      }
    };
    child.on("stdout", (bytes: Buffer) => {
      const parts = (rest + bytes.toString("latin1")).split("\0");
      rest = parts.pop() ?? "";
      for (const record of parts) take(record);
      if (entries > limits.entries) stop(`it holds more than ${limits.entries} entries`);
    });
    child.on("stderr", (bytes: Buffer) => {
      stderr = (stderr + bytes.toString("utf8")).slice(-2048);
    });
    child.on("error", (error: Error) => {
      scan.incomplete ??= `the walk failed: ${error.message}`;
    });
    child.on("close", (code: number | null) => {
      clearTimeout(timer);
      // An unreadable directory is one git would not read either, but neither can the walk vouch for it.
      if (code !== 0) scan.incomplete ??= `the walk failed: ${stderr.trim() || `exit ${code}`}`;
      if (scan.incomplete !== undefined) scan.apparentBytes = Number.POSITIVE_INFINITY;
      resolve(scan);
    });
  });
}
