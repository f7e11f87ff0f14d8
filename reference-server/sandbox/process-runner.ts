/**
 * Runs one child process with a wall-clock limit and a cap on its combined output. On time-out the
 * whole process group is killed (the child leads its own group), so nothing it started survives.
 */
import { spawn } from "node:child_process";

export interface ProcessSpec {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  outputCapBytes: number;
}

export interface ProcessResult {
  /** stdout and stderr interleaved in arrival order, cut at the cap. */
  output: string;
  /** Bytes produced beyond the cap (0 when nothing was cut). */
  droppedBytes: number;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  /** Set when the process could not be started at all. */
  spawnError?: string;
}

export function runProcess(spec: ProcessSpec): Promise<ProcessResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    let droppedBytes = 0;
    let timedOut = false;
    const child = spawn(spec.file, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const collect = (chunk: Buffer) => {
      const room = spec.outputCapBytes - kept;
      if (room >= chunk.length) {
        chunks.push(chunk);
        kept += chunk.length;
      } else {
        if (room > 0) chunks.push(chunk.subarray(0, room));
        kept += Math.max(room, 0);
        droppedBytes += chunk.length - Math.max(room, 0);
      }
    };
    child.stdout.on("data", collect);
    child.stderr.on("data", collect);
    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, spec.timeoutMs);
    let spawnError: string | undefined;
    child.on("error", (error) => {
      spawnError = error.message;
    });
    child.on("close", (exitCode, signal) => {
      clearTimeout(timer);
      // A background process may still hold the group; it must not outlive the tool call.
      killGroup();
      resolve({
        output: Buffer.concat(chunks).toString("utf8"),
        droppedBytes,
        exitCode,
        signal,
        timedOut,
        ...(spawnError === undefined ? {} : { spawnError }),
      });
    });
  });
}
