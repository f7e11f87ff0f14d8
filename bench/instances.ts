/**
 * Turns through a balancer to 1 and 2 instances: tool-less one-block turns (the scripted engine) at N
 * concurrent streams through nginx to `agent-api serve --demo` instances on one PostgreSQL cluster, and the
 * same through nginx to one instance on SQLite, each configuration started afresh in the same run. For each:
 * turns per second, time to first SSE event (p50/p99), CPU time per turn of the servers, of PostgreSQL (the
 * postmaster and all its backends, /proc) and of nginx, and on PostgreSQL the statements the database ran
 * per turn (pg_stat_statements: each one a round trip from the server, BEGIN and COMMIT included).
 *
 * Every process (load generator, nginx, the instances, PostgreSQL) shares this machine's cores, so the
 * ratio 2 instances : 1 is bounded by them, not by the design.
 *
 * With the server's session delay (2 s) a stream's next turn comes before its session is recorded, so each
 * turn starts a session; `--session-delay-ms 0` records it as the stream ends, so each turn also resumes
 * and appends to its conversation's session (the statements of a conversation's later turns).
 *
 * Run: npm run bench:instances [-- --seconds 10 --warm-seconds 3 --streams 64 --instances 1,2 --no-sqlite --statements 12
 *      --session-delay-ms N]
 */
import { randomBytes } from "node:crypto";
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { Agent, request } from "undici";
import { DEMO_ADMIN_KEY } from "../reference-server/demo/workspace.ts";
import {
  cpuSeconds,
  type Deployment,
  startDeployment,
  takeStatementCounts,
  treeCpuSeconds,
} from "./deployment.ts";
import { percentile } from "./stats.ts";

const AGENT = "demo-agent";
const PROMPT = "Say hello to the benchmark in one short sentence.";

/** One turn; time to first event = the first complete SSE frame. Throws on anything but a whole stream. */
async function oneTurn(dispatcher: Agent, url: string, conversationId: string): Promise<number> {
  const started = performance.now();
  const response = await request(`${url}/api/agents/${AGENT}/v1/messages`, {
    method: "POST",
    dispatcher,
    headers: { "x-api-key": DEMO_ADMIN_KEY, "content-type": "application/json" },
    body: JSON.stringify({
      messages: [{ role: "user", content: PROMPT }],
      metadata: { conversation_id: conversationId },
    }),
  });
  if (response.statusCode !== 200)
    throw new Error(`HTTP ${response.statusCode}: ${(await response.body.text()).slice(0, 200)}`);
  let ttfe = -1;
  let text = "";
  for await (const chunk of response.body) {
    text += (chunk as Buffer).toString("utf8");
    if (ttfe < 0 && text.includes("\n\n")) ttfe = performance.now() - started;
  }
  if (!text.includes("event: message_stop")) throw new Error(`incomplete stream: ${text.slice(-200)}`);
  return ttfe;
}

interface Run {
  label: string;
  instances: number;
  turns: number;
  errors: number;
  firstError?: string;
  turnsPerSecond: number;
  p50: number;
  p99: number;
  /** CPU ms per turn. */
  servers: number;
  postgres: number;
  nginx: number;
  client: number;
  statementsPerTurn?: number;
  topStatements?: Array<{ query: string; perTurn: number }>;
}

async function measure(
  deployment: Deployment,
  label: string,
  streams: number,
  seconds: number,
  warmSeconds: number,
  topCount: number,
): Promise<Run> {
  const dispatcher = new Agent({ connections: streams, keepAliveTimeout: 30_000 });
  const runId = randomBytes(4).toString("hex");
  const conversations = Array.from({ length: streams }, (_, i) => `bench-${runId}-${i}`);
  const samples: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  const loop = async (id: string, until: number, record: boolean) => {
    while (performance.now() < until) {
      try {
        const ttfe = await oneTurn(dispatcher, deployment.url, id);
        if (record) samples.push(ttfe);
      } catch (error) {
        errors++;
        firstError ??= (error as Error).message;
      }
    }
  };
  try {
    // Warm-up (not measured): every stream opens its conversation; each instance's JIT and pools settle (a
    // 1 s warm-up left two instances measured while still compiling: 0.6× one instance in 5 s, 1.05× in 15 s).
    const warmUntil = performance.now() + warmSeconds * 1000;
    await Promise.all(conversations.map((id) => loop(id, warmUntil, false)));
    errors = 0;
    if (deployment.database) await takeStatementCounts(deployment.database);
    const cpu = () => ({
      servers: deployment.serverPids.reduce((sum, pid) => sum + cpuSeconds(pid), 0),
      postgres: deployment.postmasterPid ? treeCpuSeconds(deployment.postmasterPid) : 0,
      nginx: treeCpuSeconds(deployment.nginxPid),
    });
    const before = cpu();
    const clientBefore = process.cpuUsage();
    const started = performance.now();
    const until = started + seconds * 1000;
    await Promise.all(conversations.map((id) => loop(id, until, true)));
    const elapsed = (performance.now() - started) / 1000;
    const after = cpu();
    const client = process.cpuUsage(clientBefore);
    const turns = samples.length;
    const perTurn = (s: number) => (s * 1000) / turns;
    let statementsPerTurn: number | undefined;
    let topStatements: Run["topStatements"];
    if (deployment.database) {
      const counts = (await takeStatementCounts(deployment.database)).filter(
        (row) => !row.query.includes("pg_stat_statements"),
      );
      statementsPerTurn = counts.reduce((sum, row) => sum + row.calls, 0) / turns;
      topStatements = counts
        .slice(0, topCount)
        .map((row) => ({ query: row.query.replace(/\s+/g, " ").slice(0, 110), perTurn: row.calls / turns }));
    }
    return {
      label,
      instances: deployment.serverPids.length,
      turns,
      errors,
      firstError,
      turnsPerSecond: turns / elapsed,
      p50: percentile(samples, 50),
      p99: percentile(samples, 99),
      servers: perTurn(after.servers - before.servers),
      postgres: perTurn(after.postgres - before.postgres),
      nginx: perTurn(after.nginx - before.nginx),
      client: (client.user + client.system) / 1000 / turns,
      statementsPerTurn,
      topStatements,
    };
  } finally {
    await dispatcher.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: "string", default: "10" },
      "warm-seconds": { type: "string", default: "3" },
      streams: { type: "string", default: "64" },
      instances: { type: "string", default: "1,2" },
      "no-sqlite": { type: "boolean", default: false },
      statements: { type: "string", default: "12" },
      "session-delay-ms": { type: "string" },
    },
  });
  const seconds = Number(values.seconds);
  const streams = Number(values.streams);
  const topCount = Number(values.statements);
  const configurations: Array<{ engine: "sqlite" | "postgres"; instances: number }> = [
    ...(values["no-sqlite"] ? [] : [{ engine: "sqlite" as const, instances: 1 }]),
    ...String(values.instances)
      .split(",")
      .map((n) => ({ engine: "postgres" as const, instances: Number(n) })),
  ];
  process.stderr.write(
    `bench:instances: ${streams} streams, ${seconds} s per configuration after ${values["warm-seconds"]} s of warm-up, through nginx; load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")} on ${availableParallelism()} cores\n`,
  );
  const runs: Run[] = [];
  for (const { engine, instances } of configurations) {
    const deployment = await startDeployment({
      engine,
      instances,
      nginxConnections: Math.max(1024, streams * 4),
      serveArgs:
        values["session-delay-ms"] === undefined ? [] : ["--session-delay-ms", values["session-delay-ms"]],
    });
    try {
      runs.push(
        await measure(deployment, engine, streams, seconds, Number(values["warm-seconds"]), topCount),
      );
      process.stderr.write(`  measured ${engine} × ${instances}\n`);
    } finally {
      await deployment.stop();
    }
  }
  const n = (value: number | undefined, digits = 2) => (value === undefined ? "-" : value.toFixed(digits));
  console.log(
    "\n| store | instances | turns/s | TTFE p50 ms | TTFE p99 ms | CPU ms/turn: servers | PostgreSQL | nginx | load generator | statements/turn | errors |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|---|---|");
  for (const run of runs)
    console.log(
      `| ${run.label} | ${run.instances} | ${n(run.turnsPerSecond, 0)} | ${n(run.p50)} | ${n(run.p99)} | ${n(run.servers)} | ${run.label === "postgres" ? n(run.postgres) : "-"} | ${n(run.nginx)} | ${n(run.client)} | ${n(run.statementsPerTurn, 1)} | ${run.errors}${run.firstError ? ` (${run.firstError})` : ""} |`,
    );
  const pg = runs.filter((run) => run.label === "postgres");
  const one = pg.find((run) => run.instances === 1);
  for (const other of pg.filter((run) => run.instances > 1 && one))
    console.log(
      `\n${other.instances} instances : 1 on PostgreSQL: ${(other.turnsPerSecond / (one as Run).turnsPerSecond).toFixed(2)}× the turns/s, p99 TTFE ${(other.p99 / (one as Run).p99).toFixed(2)}× (every process shares ${availableParallelism()} cores: the machine bounds this ratio)`,
    );
  // What the cores could carry if this bench had them alone: every process's CPU per turn is on them.
  for (const run of runs) {
    const total = run.servers + (run.label === "postgres" ? run.postgres : 0) + run.nginx + run.client;
    console.log(
      `${run.label} × ${run.instances}: ${n(total)} ms of CPU per turn in all (servers, database, nginx, load generator): at most ${Math.round((availableParallelism() * 1000) / total)} turns/s on ${availableParallelism()} idle cores`,
    );
  }
  const sqlite = runs.find((run) => run.label === "sqlite");
  if (sqlite && one)
    console.log(
      `CPU per turn, 1 instance: PostgreSQL ${n(one.servers + one.postgres)} ms (server ${n(one.servers)} + database ${n(one.postgres)}) against SQLite ${n(sqlite.servers)} ms (in the server): ${((one.servers + one.postgres) / sqlite.servers).toFixed(2)}×`,
    );
  for (const run of pg.slice(0, 1))
    if (run.topStatements) {
      console.log(`\nstatements per turn on PostgreSQL (${run.instances} instance, pg_stat_statements):`);
      for (const row of run.topStatements)
        console.log(`  ${row.perTurn.toFixed(2).padStart(6)}  ${row.query}`);
    }
  console.log(
    `load average after the run: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
}

await main();
