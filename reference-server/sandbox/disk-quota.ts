/**
 * The disk quota of one working directory: bytes and files. Usage is measured by `find` (for each entry the
 * larger of its blocks allocated and its size; entries; links not followed; one file system), after every
 * command and every 250 ms while one runs (and each second by the command's launcher itself, which holds
 * while the server cannot: see launcher.ts). A command may grow one file by at most what is left
 * (RLIMIT_FSIZE, set by the launcher); once usage is past the limit, no file may grow at all (RLIMIT_FSIZE 0)
 * until the turn removes files, and every tool call says so.
 */
import { sumFind } from "./tree-ops.ts";

export interface DiskQuota {
  readonly limitBytes: number;
  readonly limitFiles: number;
  /** Bytes and entries the directory holds, measuring it if not yet known. */
  usage(): Promise<Usage>;
  /** Bytes the directory may still grow by (0 when full), measuring it if not yet known. */
  remaining(): Promise<number>;
  /** Measures again after something wrote; returns a message for the model when the quota is exceeded. */
  remeasure(): Promise<string | null>;
  /**
   * While a command runs: joins a measurement in progress instead of starting another; a message only when the
   * directory is over the quota and grew since the last measurement.
   */
  poll(): Promise<string | null>;
  /** Accounts for bytes the server itself is about to write; false when they do not fit. */
  fits(bytes: number): Promise<boolean>;
  /** The server changed the directory itself (emptied outputs/, restored files, checked out): measure anew. */
  forget(): void;
}

/** A measurement that runs longer than this (a tree of millions of entries) counts as over the quota. */
const MEASURE_TIMEOUT_MS = 20_000;

export interface Usage {
  bytes: number;
  files: number;
}

/**
 * Bytes and entries below dir, in one process: `find -xdev -printf '%b %s\n'` prints each entry's 512-byte
 * blocks and its size (one spawn instead of two du runs: spawning is most of a small directory's cost), and
 * each counts the larger: a sparse file counts what it takes once copied (a restore on another instance, an
 * archive), not the few blocks it holds here. Links are not followed and the walk stays on dir's file system;
 * a walk that times out counts as Infinity.
 */
async function measureTree(dir: string): Promise<Usage> {
  const walk = await sumFind([dir, "-xdev", "-printf", "%b %s\\n"], MEASURE_TIMEOUT_MS, entryBytes);
  if (walk === null) return { bytes: Number.POSITIVE_INFINITY, files: Number.POSITIVE_INFINITY };
  return { bytes: walk.sum, files: walk.lines };
}

/** One `%b %s` line: the larger of the blocks allocated and the size. */
function entryBytes(line: string): number {
  const space = line.indexOf(" ");
  const blocks = (Number(line.slice(0, space)) || 0) * 512;
  const size = Number(line.slice(space + 1)) || 0;
  return Math.max(blocks, size);
}

export function exceededMessage(usedBytes: number, limitBytes: number): string {
  return `[disk quota exceeded: the working directory holds ${usedBytes} bytes, the limit is ${limitBytes}; remove files to write again]`;
}

function filesMessage(files: number, limit: number): string {
  return `[file quota exceeded: the working directory holds ${files} files and directories, the limit is ${limit}; remove some to write again]`;
}

export function createDiskQuota(
  dir: string,
  limitBytes: number,
  limitFiles = Number.POSITIVE_INFINITY,
): DiskQuota {
  let used: number | undefined;
  let files = 0;
  // One du at a time: on a huge tree a measurement outlasts the poll interval, and callers share it.
  let inFlight: Promise<number> | undefined;
  const measure = () => {
    inFlight ??= measureTree(dir).then((usage) => {
      used = usage.bytes;
      files = usage.files;
      inFlight = undefined;
      return usage.bytes;
    });
    return inFlight;
  };
  const verdict = (now: number): string | null =>
    now > limitBytes
      ? exceededMessage(now, limitBytes)
      : files > limitFiles
        ? filesMessage(files, limitFiles)
        : null;
  return {
    limitBytes,
    limitFiles,
    async usage() {
      const bytes = used ?? (await measure());
      return { bytes, files };
    },
    async remaining() {
      const now = used ?? (await measure());
      // Past the file quota nothing may grow either: the command starts with RLIMIT_FSIZE 0.
      return files > limitFiles ? 0 : Math.max(0, limitBytes - now);
    },
    async remeasure() {
      // A measurement started before the write ended may have missed it: wait for it, then measure anew.
      if (inFlight) await inFlight;
      return verdict(await measure());
    },
    async poll() {
      // Only a command that is filling the directory is stopped: one that removes files while the directory is
      // over the quota (the way back under it) must be let finish.
      const before = { bytes: used, files };
      const now = await measure();
      const grew = before.bytes === undefined || now > before.bytes || files > before.files;
      return grew ? verdict(now) : null;
    },
    async fits(bytes) {
      const now = used ?? (await measure());
      if (now + bytes > limitBytes || files > limitFiles) return false;
      used = now + bytes;
      return true;
    },
    forget() {
      used = undefined;
    },
  };
}
