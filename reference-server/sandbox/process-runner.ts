/**
 * Runs one child process with a wall-clock limit, a cap on its combined output and an abort signal. On
 * time-out or abort the whole process group is killed (the child leads its own group), and `reap` (the
 * command's cgroup, when there is one) empties everything else it started: the returned promise settles
 * only once nothing of the command is left, so nothing it started outlives it.
 */
import { spawnProcess } from "./spawner.ts";

export interface ProcessSpec {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  outputCapBytes: number;
  /**
   * Written to the child's fds 3, 4, ... and closed: bubblewrap's `--args` (the sandbox's environment) and
   * its `--seccomp` filter.
   */
  pipes?: Buffer[];
  /** Ends the command early: killed like a time-out, reported as `aborted`. */
  signal?: AbortSignal;
  /** Kills whatever of the command escaped its process group; awaited before the result is returned. */
  reap?: () => Promise<void>;
  /**
   * The launcher's drain (launcher.ts `outputCapBytes`) already cut the output: stdout is the output, and
   * stderr ends with the number of bytes the drain dropped (anything before it is the launcher's own errors).
   */
  drained?: boolean;
}

export interface ProcessResult {
  /** stdout and stderr interleaved in arrival order, cut at the cap. */
  output: string;
  /** Bytes produced beyond the cap (0 when nothing was cut). */
  droppedBytes: number;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  aborted: boolean;
  /** Set when the process could not be started at all. */
  spawnError?: string;
}

export function runProcess(spec: ProcessSpec): Promise<ProcessResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    let droppedBytes = 0;
    let timedOut = false;
    let aborted = false;
    const child = spawnProcess({
      file: spec.file,
      args: spec.args,
      cwd: spec.cwd,
      env: spec.env,
      stdout: true,
      stderr: true,
      pipes: spec.pipes,
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
    child.on("stdout", collect);
    // The drain's report is one short line; the launcher's own errors before it are bounded too.
    let report = "";
    if (spec.drained)
      child.on("stderr", (chunk: Buffer) => {
        report = (report + chunk.toString("utf8")).slice(-4096);
      });
    else child.on("stderr", collect);
    const killGroup = () => {
      if (!child.closed) child.kill("SIGKILL", true);
      else if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
      void spec.reap?.();
    }, spec.timeoutMs);
    const onAbort = () => {
      aborted = true;
      killGroup();
      void spec.reap?.();
    };
    if (spec.signal?.aborted) onAbort();
    else spec.signal?.addEventListener("abort", onAbort, { once: true });
    let spawnError: string | undefined;
    child.on("error", (error: Error) => {
      spawnError = error.message;
    });
    child.on("close", async (exitCode: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      spec.signal?.removeEventListener("abort", onAbort);
      // A background process may still hold the group, or have left it: it must not outlive the call.
      killGroup();
      await spec.reap?.().catch(() => undefined);
      if (spec.drained) {
        const lines = report.trimEnd().split("\n");
        const count = /^\s*(\d+)\s*$/.exec(lines.at(-1) ?? "");
        if (count) {
          droppedBytes += Number(count[1]);
          lines.pop();
        }
        const errors = lines.join("\n").trim();
        if (errors !== "") collect(Buffer.from(`${errors}\n`));
      }
      resolve({
        output: Buffer.concat(chunks).toString("utf8"),
        droppedBytes,
        exitCode,
        signal,
        timedOut,
        aborted,
        ...(spawnError === undefined ? {} : { spawnError }),
      });
    });
  });
}
