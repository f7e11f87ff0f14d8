/**
 * Removing, copying and re-owning whole trees a turn shaped. GNU rm walks relative to open directories (fts), so a tree
 * nested thousands of levels deep (a path far past PATH_MAX) is removed, where Node's recursive rm fails with
 * ENAMETOOLONG; neither tool follows a symlink or leaves the tree's file system.
 */
import { lstat, rmdir, unlink } from "node:fs/promises";
import { spawnProcess } from "./spawner.ts";

interface RunResult {
  code: number | null;
  /** The last few KiB of stderr (a deep tree can make a tool print megabytes of errors). */
  stderrTail: string;
  /** Whether every error line was about a path too long to reach. */
  onlyTooLong: boolean;
}

function run(file: string, args: string[]): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawnProcess({ file, args, env: { LANG: "C" }, stderr: true });
    let tail = "";
    let partial = "";
    let onlyTooLong = true;
    // Whole lines are what is tested, so a character split across chunks does not matter.
    child.on("stderr", (bytes: Buffer) => {
      const chunk = bytes.toString("utf8");
      tail = (tail + chunk).slice(-4096);
      const lines = (partial + chunk).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) if (line !== "" && !line.endsWith("File name too long")) onlyTooLong = false;
    });
    child.on("error", (error: Error) => resolve({ code: -1, stderrTail: error.message, onlyTooLong: false }));
    child.on("close", (code: number | null) => {
      if (partial !== "" && !partial.endsWith("File name too long")) onlyTooLong = false;
      resolve({ code, stderrTail: tail.trim(), onlyTooLong });
    });
  });
}

/** `chown -R`: gives `dir` and everything below it to `user`, links themselves, never their targets. */
export async function chownTree(dir: string, user: { uid: number; gid: number }): Promise<void> {
  const result = await run("chown", ["-R", "-h", "-P", `${user.uid}:${user.gid}`, "--", dir]);
  if (result.code !== 0) throw new Error(`chown of a sandbox directory failed: ${result.stderrTail}`);
}

/**
 * `rm -rf`: gone however deep; a missing path is fine. A missing path, a lone file or an empty directory is
 * handled in-process: forking the server (page tables and all) costs milliseconds of kernel time, and most
 * conversations never ran a tool, so their directories do not exist.
 */
export async function removeTree(path: string): Promise<void> {
  const stat = await lstat(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return null;
    throw error;
  });
  if (stat === null) return;
  const removedInProcess = await (stat.isDirectory() ? rmdir(path) : unlink(path)).then(
    () => true,
    // Not empty (or anything else): the walk below decides, as it always did.
    () => false,
  );
  if (removedInProcess) return;
  const result = await run("rm", ["-rf", "--one-file-system", "--", path]);
  if (result.code !== 0) throw new Error(`rm failed: ${result.stderrTail}`);
}

/**
 * `cp -a` of `from` to the new path `to`: links copied as links, hard links kept as links and holes as holes
 * (a fork costs what the conversation really holds, not its apparent size); FIFOs and sockets are left out.
 * Whatever lies deeper than PATH_MAX cannot be copied by any path-based tool: it is left out of the copy
 * (only that: any other error fails the copy).
 */
export async function copyTree(from: string, to: string): Promise<void> {
  const copied = await run("cp", [
    "-a",
    "--sparse=always",
    "--one-file-system",
    "--no-target-directory",
    "--",
    from,
    to,
  ]);
  if (copied.code !== 0 && !copied.onlyTooLong) throw new Error(`cp failed: ${copied.stderrTail}`);
  const cleaned = await run("find", [to, "(", "-type", "p", "-o", "-type", "s", ")", "-delete"]);
  if (cleaned.code !== 0 && !cleaned.onlyTooLong) throw new Error(`find failed: ${cleaned.stderrTail}`);
}

/**
 * One `find` walk whose `-printf` prints a number per entry (blocks, sizes): how many lines it printed and
 * their sum. It runs at low priority (a courtesy to other turns); a walk past `timeoutMs` (a tree of
 * millions of entries) is killed and gives null.
 */
export function sumFind(
  args: string[],
  timeoutMs: number,
  lineValue: (line: string) => number = (line) => Number(line) || 0,
): Promise<{ lines: number; sum: number } | null> {
  return new Promise((resolve) => {
    // Niced: a courtesy to other turns, not a requirement.
    const child = spawnProcess({ file: "find", args, env: { LANG: "C" }, stdout: true, nice: 10 });
    let lines = 0;
    let sum = 0;
    let rest = "";
    child.on("stdout", (bytes: Buffer) => {
      const parts = (rest + bytes.toString("latin1")).split("\n");
      rest = parts.pop() ?? "";
      for (const line of parts) {
        lines++;
        sum += lineValue(line);
      }
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", () => {
      clearTimeout(timer);
      resolve(null);
    });
    child.on("close", (_code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      resolve(signal === "SIGKILL" ? null : { lines, sum });
    });
  });
}
