/**
 * A PostgreSQL cluster of the test run's own: a temporary directory, a loopback port, trust authentication,
 * no fsync (a test cluster holds nothing to keep). Started once per run by Vitest's global set-up (the URL
 * reaches the test files as AGENT_API_TEST_POSTGRES_URL) and by the heavy scripts that need one; where
 * PostgreSQL is not installed, AGENT_API_TEST_POSTGRES_SKIP says why and the tests that need it skip.
 *
 * Debian installs the server programs in /usr/lib/postgresql/<version>/bin, off PATH
 * (apt-get install postgresql). initdb refuses to run as root, so as root the cluster runs as the
 * `postgres` user Debian's package creates.
 */
import { execFile } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";

const run = promisify(execFile);

export const POSTGRES_URL_ENV = "AGENT_API_TEST_POSTGRES_URL";
export const POSTGRES_SKIP_ENV = "AGENT_API_TEST_POSTGRES_SKIP";

/** The directory holding initdb and pg_ctl: AGENT_API_POSTGRES_BIN, else Debian's newest version. */
export function postgresBinDir(): string | undefined {
  const configured = process.env.AGENT_API_POSTGRES_BIN;
  if (configured) return existsSync(join(configured, "initdb")) ? configured : undefined;
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(root, versions[0], "bin") : undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface PostgresCluster {
  /** postgres://postgres@127.0.0.1:PORT/postgres */
  url: string;
  /** Creates an empty database on the cluster and returns its URL. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

export interface PostgresClusterOptions {
  /** More server settings, `name=value` each (the benchmarks load pg_stat_statements this way). */
  settings?: string[];
}

export async function startPostgresCluster(
  clusterOptions: PostgresClusterOptions = {},
): Promise<PostgresCluster> {
  const bin = postgresBinDir();
  if (!bin) throw new Error("PostgreSQL is not installed (no /usr/lib/postgresql/<version>/bin/initdb)");
  const dir = mkdtempSync(join(tmpdir(), "agent-api-postgres-"));
  const asRoot = userInfo().uid === 0;
  const owner = asRoot ? await run("id", ["-u", "postgres"]).then((r) => Number(r.stdout.trim())) : undefined;
  if (owner !== undefined) chownSync(dir, owner, owner);
  const as = (program: string, args: string[]) =>
    asRoot
      ? run("runuser", ["-u", "postgres", "--", join(bin, program), ...args])
      : run(join(bin, program), args);
  const data = join(dir, "data");
  try {
    await as("initdb", [
      "-D",
      data,
      "-A",
      "trust",
      "-U",
      "postgres",
      "-E",
      "UTF8",
      "--locale=C",
      "--no-sync",
    ]);
    const port = await freePort();
    const options = [
      `-p ${port}`,
      `-k ${dir}`,
      "-c listen_addresses=127.0.0.1",
      "-c fsync=off",
      "-c synchronous_commit=off",
      "-c full_page_writes=off",
      "-c max_connections=300",
      ...(clusterOptions.settings ?? []).map((setting) => `-c ${setting}`),
    ].join(" ");
    await as("pg_ctl", ["-D", data, "-o", options, "-l", join(dir, "log"), "-w", "start"]);
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    return {
      url,
      async createDatabase(name) {
        const admin = new pg.Client({ connectionString: url });
        await admin.connect();
        try {
          await admin.query(`CREATE DATABASE ${name}`);
        } finally {
          await admin.end();
        }
        return `postgres://postgres@127.0.0.1:${port}/${name}`;
      },
      async stop() {
        await as("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"]).catch(() => undefined);
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/** Vitest's global set-up: one cluster for the whole run, or the reason there is none. */
export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (process.env[POSTGRES_URL_ENV]) return undefined;
  if (!postgresBinDir()) {
    process.env[POSTGRES_SKIP_ENV] =
      "PostgreSQL is not installed here (apt-get install postgresql puts initdb in /usr/lib/postgresql/<version>/bin)";
    return undefined;
  }
  try {
    const cluster = await startPostgresCluster();
    process.env[POSTGRES_URL_ENV] = cluster.url;
    return async () => {
      delete process.env[POSTGRES_URL_ENV];
      await cluster.stop();
    };
  } catch (error) {
    process.env[POSTGRES_SKIP_ENV] = `a PostgreSQL cluster could not start: ${(error as Error).message}`;
    return undefined;
  }
}
