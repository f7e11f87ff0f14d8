/** For the heavy PostgreSQL scripts: `agent-api serve` and `agent-api check` as child processes. */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { SOURCE_CONDITION_FLAG } from "../../scripts/source-condition.ts";

export const root = fileURLToPath(new URL("../..", import.meta.url));
const cli = join(root, "conformance/cli/agent-api.ts");

export interface ServeProcess {
  child: ChildProcess;
  output(): string;
}

/** Starts `agent-api serve ARGS` (which must include --write-env-file) and resolves once it listens. */
export function serve(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<ServeProcess> {
  const child = spawn(process.execPath, [SOURCE_CONDITION_FLAG, cli, "serve", ...args], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start in 60 s:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      // Bounded: a noisy server must not grow this process without limit.
      if (output.length < 1_000_000) output += chunk.toString();
      if (/Wrote the conformance variables/.test(output)) {
        clearTimeout(timer);
        resolve({ child, output: () => output });
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code}) before listening:\n${output}`));
    });
  });
}

/**
 * The error catalogue's code an instance logged for a conversation's newest failed turn (its turn line's
 * `code`; the instance must log at warn or below), waiting up to 5 s for the line to arrive.
 */
export async function loggedTurnFailure(
  instance: ServeProcess,
  conversationId: string,
): Promise<string | undefined> {
  const find = () => {
    let code: string | undefined;
    for (const line of instance.output().split("\n")) {
      if (!line.startsWith("{")) continue;
      try {
        const entry = JSON.parse(line) as { conversation?: unknown; code?: unknown };
        if (entry.conversation === conversationId && typeof entry.code === "string") code = entry.code;
      } catch {
        // A line cut by the output bound, or not the log's.
      }
    }
    return code;
  };
  const deadline = Date.now() + 5_000;
  while (find() === undefined && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 50));
  return find();
}

/** SIGTERM, then SIGKILL after 30 s. */
export function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const killer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.once("exit", () => {
      clearTimeout(killer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

export function parseEnvFile(file: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const match = /^([A-Z0-9_]+)=(.*)$/.exec(line);
    if (match) vars[match[1]] = match[2];
  }
  return vars;
}

/** Runs `agent-api check ARGS` with `vars` (and no AGENT_API_* of ours); resolves with its exit code. */
export function check(vars: Record<string, string>, args: string[]): Promise<number> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("AGENT_API_")));
  const child = spawn(process.execPath, [SOURCE_CONDITION_FLAG, cli, "check", "--no-color", ...args], {
    cwd: root,
    // A fixed sample of the explorer: the same sequences on every run, never a fresh flake.
    env: { ...base, AGENT_API_EXPLORE: "15", AGENT_API_SEED: "29", ...vars },
    stdio: "inherit",
  });
  return new Promise((resolve) => child.once("exit", (code) => resolve(code ?? 1)));
}
