/**
 * The disk quota of one working directory. Usage is measured by `du` (blocks actually allocated, links not
 * followed, one file system) while no process of the turn runs. A command may grow one file by at most
 * what is left (RLIMIT_FSIZE, set by the launcher); once usage is past the limit, no file may grow at all
 * (RLIMIT_FSIZE 0) until the turn removes files, and every tool call says so.
 */
import { execFile } from "node:child_process";

export interface DiskQuota {
  readonly limitBytes: number;
  /** Bytes the directory may still grow by (0 when full), measuring it if not yet known. */
  remaining(): Promise<number>;
  /** Measures again after something wrote; returns a message for the model when the quota is exceeded. */
  remeasure(): Promise<string | null>;
  /** While a command runs: joins a measurement in progress instead of starting another. */
  poll(): Promise<string | null>;
  /** Accounts for bytes the server itself is about to write; false when they do not fit. */
  fits(bytes: number): Promise<boolean>;
}

/** `du -s -x -B1 dir` as bytes; a directory du cannot read fully still yields what it counted. */
function du(dir: string): Promise<number> {
  return new Promise((resolve) => {
    execFile("du", ["-s", "-x", "-B1", "--", dir], { env: { LANG: "C" } }, (_error, stdout) => {
      const bytes = Number.parseInt(String(stdout).split("\t")[0] ?? "", 10);
      resolve(Number.isFinite(bytes) ? bytes : 0);
    });
  });
}

export function exceededMessage(usedBytes: number, limitBytes: number): string {
  return `[disk quota exceeded: the working directory holds ${usedBytes} bytes, the limit is ${limitBytes}; remove files to write again]`;
}

export function createDiskQuota(dir: string, limitBytes: number): DiskQuota {
  let used: number | undefined;
  // One du at a time: on a huge tree a measurement outlasts the poll interval, and callers share it.
  let inFlight: Promise<number> | undefined;
  const measure = () => {
    inFlight ??= du(dir).then((bytes) => {
      used = bytes;
      inFlight = undefined;
      return bytes;
    });
    return inFlight;
  };
  return {
    limitBytes,
    async remaining() {
      const now = used ?? (await measure());
      return Math.max(0, limitBytes - now);
    },
    async remeasure() {
      // A measurement started before the write ended may have missed it: wait for it, then measure anew.
      if (inFlight) await inFlight;
      const now = await measure();
      return now > limitBytes ? exceededMessage(now, limitBytes) : null;
    },
    async poll() {
      const now = await measure();
      return now > limitBytes ? exceededMessage(now, limitBytes) : null;
    },
    async fits(bytes) {
      const now = used ?? (await measure());
      if (now + bytes > limitBytes) return false;
      used = now + bytes;
      return true;
    },
  };
}
