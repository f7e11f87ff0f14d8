/**
 * `npm run test:postgres`: the whole conformance suite against `agent-api serve --demo --store postgres://…`,
 * as an operator would run it. A PostgreSQL cluster of its own (scripts/postgres-cluster.ts), the server and
 * `agent-api check` as child processes; exits 1 when a check fails or the run could not be made.
 */
import type { ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startPostgresCluster } from "../../scripts/postgres-cluster.ts";
import { check, parseEnvFile, serve, stop } from "./processes.ts";

async function main(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "agent-api-on-postgres-"));
  // The sandbox users pass through it on their way to their working directories under the data directory.
  chmodSync(dir, 0o711);
  const cluster = await startPostgresCluster();
  let server: ChildProcess | undefined;
  try {
    const store = await cluster.createDatabase("agent_api");
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
    const report = join(dir, "report.json");
    const code = await check(parseEnvFile(envFile), ["--json", report]);
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
