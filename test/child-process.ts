/** Running a command to its end in a test: its exit status and both outputs, whatever the status. */
import { execFile } from "node:child_process";

export interface Ran {
  /** The exit status; null when a signal ended it (the time limit's, say). */
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `timeoutMs` kills a child that would never end (a wait loop, say): a bound far above its cost. */
export function runToEnd(
  file: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { cwd: options.cwd, env: options.env, timeout: options.timeoutMs ?? 0, maxBuffer: 64 << 20 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : null;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}
