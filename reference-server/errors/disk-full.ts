/**
 * Whether a failure is the disk being full (or a file system quota reached): Node's ENOSPC/EDQUOT, SQLite's
 * SQLITE_FULL, or a child process's words for them (cp, git, tar write to stderr). Such a failure is the one
 * request's that met it, answered as AGENT_API_DISK_FULL, never a fault of the server's own.
 */
const DISK_FULL_WORDS =
  /No space left on device|Disk quota exceeded|database or disk is full|SQLITE_FULL|ENOSPC|EDQUOT/;

export function isDiskFull(error: unknown, depth = 0): boolean {
  if (error === null || error === undefined || depth > 4) return false;
  const { code, errcode, message, detail, cause } = error as {
    code?: unknown;
    errcode?: unknown;
    message?: unknown;
    detail?: unknown;
    cause?: unknown;
  };
  if (code === "ENOSPC" || code === "EDQUOT" || errcode === 13) return true;
  if (typeof message === "string" && DISK_FULL_WORDS.test(message)) return true;
  if (typeof detail === "string" && DISK_FULL_WORDS.test(detail)) return true;
  return isDiskFull(cause, depth + 1);
}
