/**
 * For the several-instances benchmarks: a deployment on this machine, as an operator runs one. N
 * `agent-api serve --demo` processes (each its own --port and --data), on SQLite or on one PostgreSQL
 * cluster of the run's own (scripts/postgres-cluster.ts, with pg_stat_statements loaded so the bench can
 * count the statements a turn sends), behind a real nginx with the README's config (round robin, no
 * stickiness, unbuffered SSE; a listen backlog of 4,096 instead of nginx's 511, so a thousand connections
 * opened at once fit in its accept queue). Also the readings of /proc the benches report: CPU time and RSS of the
 * servers, of PostgreSQL's processes and of nginx.
 */
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePort, type Nginx, startNginx } from "../conformance/testing/nginx.ts";
import { type PostgresCluster, startPostgresCluster } from "../scripts/postgres-cluster.ts";
import { type ServeProcess, serve, stop } from "../test/postgres/processes.ts";

export interface DeploymentOptions {
  instances: number;
  engine: "sqlite" | "postgres";
  /** More `agent-api serve` arguments for every instance. */
  serveArgs?: string[];
  /** The instances' environment (e.g. ANTHROPIC_BASE_URL for `--engine anthropic`). */
  env?: NodeJS.ProcessEnv;
  /** nginx's worker_connections: each stream through it holds two connections. */
  nginxConnections?: number;
}

export interface Deployment {
  /** The balancer's address. */
  url: string;
  instances: ServeProcess[];
  /** Process ids of the servers. */
  serverPids: number[];
  /** PostgreSQL's postmaster (its backends are its children), or undefined on SQLite. */
  postmasterPid?: number;
  nginxPid: number;
  /** A client of the deployment's database (the bench's own connection), or undefined on SQLite. */
  database?: pg.Client;
  stop(): Promise<void>;
}

export async function startDeployment(options: DeploymentOptions): Promise<Deployment> {
  const dir = mkdtempSync(join(tmpdir(), "bench-deployment-"));
  // The sandbox users pass through it on their way to their working directories.
  chmodSync(dir, 0o711);
  let cluster: PostgresCluster | undefined;
  let database: pg.Client | undefined;
  let nginx: Nginx | undefined;
  const instances: ServeProcess[] = [];
  const stopAll = async () => {
    await nginx?.close();
    await Promise.all(instances.map((instance) => stop(instance.child)));
    await database?.end().catch(() => undefined);
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    let storeArgs: string[] = [];
    let postmasterPid: number | undefined;
    if (options.engine === "postgres") {
      cluster = await startPostgresCluster({ settings: ["shared_preload_libraries=pg_stat_statements"] });
      const url = await cluster.createDatabase("agent_api");
      const admin = new pg.Client({ connectionString: cluster.url });
      await admin.connect();
      const dataDirectory = (await admin.query<{ data_directory: string }>("SHOW data_directory")).rows[0]
        .data_directory;
      await admin.end();
      postmasterPid = Number(readFileSync(join(dataDirectory, "postmaster.pid"), "utf8").split("\n")[0]);
      database = new pg.Client({ connectionString: url });
      await database.connect();
      await database.query("CREATE EXTENSION pg_stat_statements");
      storeArgs = ["--store", url];
    }
    const ports = await Promise.all(Array.from({ length: options.instances }, () => freePort()));
    // Started at once, as a deployment starts: one migrates and seeds the demo, the others find it done.
    instances.push(
      ...(await Promise.all(
        ports.map((port, i) =>
          serve(
            [
              "--demo",
              ...storeArgs,
              "--port",
              String(port),
              "--data",
              join(dir, `instance-${i}`),
              "--write-env-file",
              join(dir, `instance-${i}.env`),
              "--log-level",
              "warn",
              ...(options.serveArgs ?? []),
            ],
            { ...process.env, ...options.env },
          ),
        ),
      )),
    );
    const balancerPort = await freePort();
    const nginxDir = join(dir, "nginx");
    nginx = await startNginx(
      nginxDir,
      balancerPort,
      `upstream agent_api { ${ports.map((port) => `server 127.0.0.1:${port};`).join(" ")} }
  server {
    listen 127.0.0.1:${balancerPort} backlog=4096;
    client_max_body_size 50m;
    location / {
      proxy_pass http://agent_api;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 600s;
    }
  }`,
      { workerConnections: options.nginxConnections ?? 1024 },
    );
    return {
      url: `http://127.0.0.1:${balancerPort}`,
      instances,
      serverPids: instances.map((instance) => instance.child.pid as number),
      postmasterPid,
      nginxPid: Number(readFileSync(join(nginxDir, "nginx.pid"), "utf8").trim()),
      database,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

const CLOCK_TICKS = 100;

interface ProcStat {
  ppid: number;
  /** utime + stime, seconds. */
  own: number;
  /** cutime + cstime: children that exited and were waited for, seconds. */
  children: number;
}

function procStat(pid: number): ProcStat | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // After the command name (which may hold spaces): state is field 3, ppid 4, utime 14 ... cstime 17.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return {
      ppid: Number(fields[1]),
      own: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS,
      children: (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS,
    };
  } catch {
    return undefined;
  }
}

/** CPU seconds a process has used so far (all its threads); NaN once it is gone. */
export function cpuSeconds(pid: number): number {
  return procStat(pid)?.own ?? Number.NaN;
}

/**
 * CPU seconds of a process and all its descendants so far: the live ones read one by one, the exited ones
 * through the root's cutime/cstime (PostgreSQL's postmaster waits for every backend; nginx's master for
 * its workers).
 */
export function treeCpuSeconds(root: number): number {
  const parents = new Map<number, ProcStat>();
  for (const name of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(name)) continue;
    const stat = procStat(Number(name));
    if (stat) parents.set(Number(name), stat);
  }
  const rootStat = parents.get(root);
  if (!rootStat) return Number.NaN;
  let total = rootStat.own + rootStat.children;
  const queue = [root];
  while (queue.length > 0) {
    const parent = queue.pop() as number;
    for (const [pid, stat] of parents)
      if (stat.ppid === parent) {
        total += stat.own;
        queue.push(pid);
      }
  }
  return total;
}

/** Resident set size in bytes (VmRSS), or NaN. */
export function rssBytes(pid: number): number {
  try {
    const match = /VmRSS:\s+([0-9]+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Number(match[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Statements the deployment's database has run (pg_stat_statements), and the counters reset. */
export async function takeStatementCounts(
  database: pg.Client,
): Promise<Array<{ query: string; calls: number }>> {
  const { rows } = await database.query<{ query: string; calls: string }>(
    `SELECT query, calls FROM pg_stat_statements
     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
     ORDER BY calls DESC`,
  );
  await database.query("SELECT pg_stat_statements_reset()");
  return rows.map((row) => ({ query: row.query, calls: Number(row.calls) }));
}
