/**
 * What a directory holds, for syncing it with the file store: every entry's kind, mode, size, change stamp
 * and link target, from one GNU find walk (lstat only: no link is followed; one file system; relative to
 * open directories, so no PATH_MAX limit; in a process of its own, niced). The walk is bounded in depth,
 * entries and time; a directory it cannot see whole is reported as such, never half-listed.
 */
import { spawnProcess } from "./spawner.ts";

export interface ListedEntry {
  path: string;
  kind: "file" | "dir" | "link" | "other";
  mode: number;
  size: number;
  /** size, ctime and inode: a file whose stamp is unchanged was not written since (a tool cannot set ctime back). */
  stamp: string;
  target: string | null;
}

export interface TreeListing {
  entries: ListedEntry[];
  /** Names that are not UTF-8: the file store cannot name them, so they stay local. */
  skippedNames: number;
  /** Sum of the regular files' sizes (holes of sparse files included). */
  fileBytes: number;
}

export interface ListingLimits {
  /** Deeper than this is refused (the server's race-free path walk stops at 256 components). */
  depth: number;
  entries: number;
  timeoutMs: number;
}

export class UnlistableTreeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnlistableTreeError";
  }
}

const KINDS: Record<string, ListedEntry["kind"]> = { f: "file", d: "dir", l: "link" };

/**
 * Lists `dir` (missing: empty). Throws UnlistableTreeError when the walk passes a bound. Records are two
 * NUL-terminated fields: `<depth> <type> <mode> <size> <ctime> <inode> <path>` and the link target.
 */
export function listTree(dir: string, limits: ListingLimits): Promise<TreeListing> {
  const args = [
    dir,
    "-mindepth",
    "1",
    "-maxdepth",
    String(limits.depth + 1),
    "-xdev",
    "-printf",
    "%d %y %m %s %C@ %i %P\\0%l\\0",
  ];
  return new Promise((resolve, reject) => {
    const child = spawnProcess({
      file: "find",
      args,
      env: { LANG: "C" },
      stdout: true,
      stderr: true,
      nice: 10,
    });
    const listing: TreeListing = { entries: [], skippedNames: 0, fileBytes: 0 };
    let failure: string | undefined;
    let rest = Buffer.alloc(0);
    let header: Buffer | null = null;
    let stderr = "";
    const stop = (why: string) => {
      failure ??= why;
      child.kill("SIGKILL");
    };
    const timer = setTimeout(
      () => stop(`the walk took longer than ${limits.timeoutMs / 1000} s`),
      limits.timeoutMs,
    );
    const take = (head: Buffer, target: Buffer) => {
      const fields = head.subarray(0, 200).toString("latin1").split(" ", 6);
      const prefix = fields.join(" ").length + 1;
      const [depth, type, mode, size, ctime, inode] = fields;
      if (Number(depth) > limits.depth) return stop(`it is nested deeper than ${limits.depth} directories`);
      if (listing.entries.length >= limits.entries)
        return stop(`it holds more than ${limits.entries} entries`);
      const rawPath = head.subarray(prefix);
      const path = rawPath.toString("utf8");
      if (!Buffer.from(path, "utf8").equals(rawPath)) {
        listing.skippedNames++;
        return;
      }
      const kind = KINDS[type] ?? "other";
      const bytes = kind === "file" ? Number(size) : 0;
      listing.fileBytes += bytes;
      listing.entries.push({
        path,
        kind,
        mode: Number.parseInt(mode, 8) & 0o777,
        size: bytes,
        stamp: `${size}:${ctime}:${inode}`,
        target: kind === "link" ? target.toString("utf8") : null,
      });
    };
    child.on("stdout", (bytes: Buffer) => {
      let buffer = rest.length > 0 ? Buffer.concat([rest, bytes]) : bytes;
      for (;;) {
        const end = buffer.indexOf(0);
        if (end < 0) break;
        const field = buffer.subarray(0, end);
        buffer = buffer.subarray(end + 1);
        if (header === null) header = field;
        else {
          take(header, field);
          header = null;
        }
        if (failure !== undefined) return;
      }
      rest = Buffer.from(buffer);
    });
    child.on("stderr", (bytes: Buffer) => {
      stderr = (stderr + bytes.toString("utf8")).slice(-2048);
    });
    child.on("error", (error: Error) => {
      failure ??= `the walk failed: ${error.message}`;
    });
    child.on("close", (code: number | null) => {
      clearTimeout(timer);
      if (failure === undefined && code !== 0 && !/No such file or directory/.test(stderr))
        failure = `the walk failed: ${stderr.trim() || `exit ${code}`}`;
      if (failure !== undefined)
        reject(new UnlistableTreeError(`the directory cannot be listed whole: ${failure}`));
      else resolve(listing);
    });
  });
}
