/** Starts test/external/serve-child.ts and reports how it ended, so a fuzz run can count crashes. */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { SOURCE_CONDITION_FLAG } from "../../scripts/source-condition.ts";

export interface ChildServer {
  url: string;
  envVars: Record<string, string>;
  child: ChildProcess;
  /** Everything the server printed after READY (pino JSON lines at the chosen level, and stderr). */
  log(): string;
  /** Set once the process ended on its own or was stopped. */
  exit(): { code: number | null; signal: NodeJS.Signals | null } | undefined;
  close(): Promise<void>;
}

/** The server's error log lines (pino level ≥ 50), but for the documented 501 of `delivery: "async"`. */
export function errorLines(log: string): string[] {
  return log
    .split("\n")
    .filter((line) => /"level":(5|6)\d/.test(line) && !/"status":501/.test(line))
    .map((line) => (line.length > 2000 ? `${line.slice(0, 2000)}…` : line));
}

const script = fileURLToPath(new URL("./serve-child.ts", import.meta.url));

export function startChildServer(
  options: { logLevel?: string; sessionDelayMs?: number } = {},
): Promise<ChildServer> {
  const child = spawn(
    process.execPath,
    [SOURCE_CONDITION_FLAG, script, options.logLevel ?? "error", String(options.sessionDelayMs ?? 300)],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  let log = "";
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  child.once("exit", (code, signal) => {
    exited = { code, signal };
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    log += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const newline = out.indexOf("\n");
      if (newline < 0 || !out.startsWith("READY ")) return;
      child.stdout?.off("data", onData);
      const ready = JSON.parse(out.slice(6, newline)) as { url: string; envVars: Record<string, string> };
      log += out.slice(newline + 1);
      child.stdout?.on("data", (more: Buffer) => {
        // Bounded: a noisy server must not grow the test's memory without limit.
        if (log.length < 4_000_000) log += more.toString();
      });
      resolve({
        ...ready,
        child,
        log: () => log,
        exit: () => exited,
        close: () =>
          new Promise<void>((done) => {
            if (exited) return done();
            // The server ends running turns after its own 10 s grace period; past 30 s it is stuck: kill it
            // rather than time the test's clean-up out (the crash count is read before close).
            const stuck = setTimeout(() => child.kill("SIGKILL"), 30_000);
            child.once("exit", () => {
              clearTimeout(stuck);
              done();
            });
            child.kill("SIGTERM");
          }),
      });
    };
    child.stdout?.on("data", onData);
    child.once("error", reject);
    child.once("exit", (code) =>
      reject(new Error(`server exited (${code}) before listening:\n${out}${log}`)),
    );
  });
}
