/**
 * `npm run test:postgres`: the whole conformance suite against `agent-api serve --demo --store postgres://…`,
 * as an operator would run it. A PostgreSQL cluster of its own (scripts/postgres-cluster.ts), the server and
 * `agent-api check` as child processes; exits 1 when a check fails or the run could not be made.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { startPostgresCluster } from "../../scripts/postgres-cluster.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));
const cli = join(root, "cli/agent-api.ts");

/** Starts `agent-api serve` and resolves once it listens. */
function serve(args: string[]): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, [cli, "serve", ...args], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start in 60 s:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
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

function stop(child: ChildProcess): Promise<void> {
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

function parseEnvFile(file: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const match = /^([A-Z0-9_]+)=(.*)$/.exec(line);
    if (match) vars[match[1]] = match[2];
  }
  return vars;
}

async function main(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "agent-api-on-postgres-"));
  // The sandbox users pass through it on their way to their working directories under the data directory.
  chmodSync(dir, 0o711);
  const cluster = await startPostgresCluster();
  let server: ChildProcess | undefined;
  try {
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query("CREATE DATABASE agent_api");
    await admin.end();
    const store = cluster.url.replace(/\/postgres$/, "/agent_api");
    const envFile = join(dir, "conformance.env");
    const started = await serve([
      "--demo",
      "--store",
      store,
      "--port",
      "0",
      "--data",
      join(dir, "data"),
      "--write-env-file",
      envFile,
      "--log-level",
      "warn",
    ]);
    server = started.child;
    process.stdout.write(started.output());
    if (!/Store: PostgreSQL/.test(started.output()))
      throw new Error("the server did not report the PostgreSQL store");
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("AGENT_API_")));
    const report = join(dir, "report.json");
    const check = spawn(process.execPath, [cli, "check", "--no-color", "--json", report], {
      cwd: root,
      env: { ...base, ...parseEnvFile(envFile) },
      stdio: "inherit",
    });
    const code = await new Promise<number>((resolve) => check.once("exit", (c) => resolve(c ?? 1)));
    const summary = JSON.parse(readFileSync(report, "utf8")) as { summary?: unknown };
    process.stdout.write(`conformance against PostgreSQL: exit ${code}\n`);
    if (summary.summary) process.stdout.write(`${JSON.stringify(summary.summary)}\n`);
    return code;
  } finally {
    if (server) await stop(server);
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`test:postgres: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(2);
  },
);
