/**
 * The store at scale: list (every filter kind), get, transcript and fork of a long conversation, and
 * delete, at N conversations against the same operations on a small baseline store built in the same run,
 * the two measured sample by sample in turn. Reported as p50/p99 per operation, the p50 ratio N / baseline,
 * and the database size (total, per 1k conversations, and per table/index).
 *
 * The stores are filled through the Store API (insertConversation, commitTurn, recordSession), not over
 * HTTP: the API creates only interactive conversations owned by the caller, while the list filters need
 * channel-owned, notebook and automation ones (and 100,000 turns over HTTP took 83 s in issue 14). The
 * operations are measured through the service layer (ConversationService, the code under the HTTP routes),
 * so they include visibility checks and the mapping to the API shape, but not HTTP. The sandbox is a
 * no-op: fork and delete also copy or remove a conversation's files, which `bench:sandbox` measures.
 *
 * The mix, all on one agent of one workspace (the worst case for a per-agent list), 8 members:
 *   70% INTERACTIVE owned by a member (10% of them shared), 10% NOTEBOOK (300 notebook paths),
 *   15% SLACK and 5% EMAIL owned by the channel (40 Slack channels, 200 mail addresses),
 *   8% started by one of 4 automations, 1% hidden test runs, 1-3 turns each (activity spread over a
 *   year, out of creation order), and a few long conversations of 300 turns (600 messages).
 *
 * On PostgreSQL (`--engine postgres`): each store is a database of a PostgreSQL cluster the bench starts
 * for itself (scripts/postgres-cluster.ts; or `--store postgres://…` names one whose user may create
 * databases), seeded through the same Store API with `--concurrency` conversations written at once (one at a
 * time, a round trip per statement, 100,000 took too long), then VACUUM ANALYZE, as autovacuum would have.
 *
 * Run: npm run bench:store [-- --n 100000 --baseline 1000 --samples 300 --long 10]
 *      npm run bench:store -- --engine postgres [--store postgres://… --concurrency 16]
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { parseArgs } from "node:util";
import pg from "pg";
import type { ServerConfig } from "../reference-server/config/types.ts";
import { SessionRecorder } from "../reference-server/coordination/session-recorder.ts";
import type { AgentEngine } from "../reference-server/engine/types.ts";
import type { SandboxManager } from "../reference-server/sandbox/types.ts";
import { ConversationService, type ListQuery } from "../reference-server/service/conversations.ts";
import type { Caller } from "../reference-server/service/types.ts";
import { openPostgresStore } from "../reference-server/store/postgres/index.ts";
import { openSqliteStore } from "../reference-server/store/sqlite/index.ts";
import type { Channel, ConversationRecord, Store } from "../reference-server/store/types.ts";
import { type PostgresCluster, startPostgresCluster } from "../scripts/postgres-cluster.ts";
import { percentile } from "./stats.ts";

const WORKSPACE = "bench";
const AGENT = "bench-agent";
const MEMBERS = Array.from({ length: 8 }, (_, i) => `member-${i}`);
const AUTOMATIONS = ["nightly-summary", "triage", "weekly-report", "standup"];
const SLACK_CHANNELS = Array.from({ length: 40 }, (_, i) => `C0SLACK${String(i).padStart(3, "0")}`);
const MAILBOXES = Array.from({ length: 200 }, (_, i) => `team-${i}@example.com`);
const NOTEBOOKS = Array.from({ length: 300 }, (_, i) => `notebooks/project-${i % 30}/analysis-${i}.ipynb`);
const LONG_TURNS = 300;
const LIST_P99_TARGET_MS = 5;
const DAY_MS = 86_400_000;
/** Fixed, so two runs build the same stores and measure the same queries. */
const NOW = Date.UTC(2026, 10, 23, 12);

/** Deterministic PRNG (mulberry32): the same mix on every run. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(items: readonly T[], rnd: () => number): T {
  return items[Math.floor(rnd() * items.length)];
}

function caller(memberId: string): Caller {
  return { workspaceId: WORKSPACE, memberId, memberName: memberId, role: "Operator" };
}

const PROMPT =
  "Summarise yesterday's failed deployments and suggest which one to look at first, with reasons.";
const ANSWER =
  "Three deployments failed yesterday. The payments rollout stopped at the migration step because a column " +
  "already existed; the search indexer timed out on its health check after the new shard count; the docs " +
  "site failed its link check. Look at payments first: it blocks the release train and the fix is a guarded " +
  "migration. The indexer needs a longer health-check window, and the docs links can wait for Monday. ";

/**
 * One conversation's turns through the store, with its session as the server keeps it: the first turn's
 * history recorded (one row per message), each later turn appending its two messages.
 */
async function writeTurns(
  store: Store,
  record: ConversationRecord,
  turns: number,
  lastAt: number,
): Promise<void> {
  const start = Date.parse(record.createdAt);
  const sessionId = `sess_${record.id}`;
  const history: unknown[] = [];
  let chars = 0;
  for (let turn = 0; turn < turns; turn++) {
    const at = new Date(turns === 1 ? lastAt : start + ((lastAt - start) * turn) / (turns - 1)).toISOString();
    const kept = history.length;
    const added = [
      { role: "user", content: [{ type: "text", text: `${PROMPT} (${turn})` }] },
      { role: "assistant", content: [{ type: "text", text: ANSWER }] },
    ];
    history.push(...added);
    // The upstream's measure of the history; the 4-characters rule stands in for it here.
    chars += JSON.stringify(added).length;
    const context = { messages: [...history], tokens: Math.ceil(chars / 4) };
    await store.commitTurn({
      conversationId: record.id,
      turnIndex: turn,
      messages: [
        {
          role: "user",
          text: `${PROMPT} (${turn})`,
          authorMemberId: record.ownerMemberId,
          authorName: record.ownerMemberId,
          isCompactSummary: false,
        },
        { role: "assistant", text: ANSWER, authorMemberId: null, authorName: null, isCompactSummary: false },
      ],
      events: [{ type: "text", text: ANSWER }],
      compaction: null,
      at,
      session: turn === 0 ? undefined : { append: { id: sessionId, history: context, kept } },
    });
    if (turn === 0)
      await store.recordSession({
        id: sessionId,
        conversationId: record.id,
        context,
        createdAt: at,
        updatedAt: at,
        turnIndex: 0,
      });
  }
}

interface Seeded {
  /** Conversations owned by a member (delete candidates), with their owner. */
  owned: Array<{ id: string; owner: string }>;
  long: Array<{ id: string; owner: string }>;
  seconds: number;
}

async function seed(store: Store, n: number, longCount: number, concurrency: number): Promise<Seeded> {
  const rnd = random(20261123);
  const owned: Seeded["owned"] = [];
  const long: Seeded["long"] = [];
  const started = performance.now();
  const longEvery = Math.max(1, Math.floor(n / longCount));
  // The records are drawn in order (the same stores on every run); their writes overlap up to `concurrency`.
  const inFlight = new Set<Promise<void>>();
  let failure: unknown;
  for (let i = 0; i < n; i++) {
    const roll = rnd();
    const channel: Channel =
      roll < 0.7 ? "INTERACTIVE" : roll < 0.8 ? "NOTEBOOK" : roll < 0.95 ? "SLACK" : "EMAIL";
    const channelOwned = channel === "SLACK" || channel === "EMAIL";
    const owner = channelOwned ? null : pick(MEMBERS, rnd);
    // Spread over the store's age; the first member-owned conversation past each mark becomes long.
    const isLong = owner !== null && long.length < longCount && i >= (long.length + 1) * longEvery - 1;
    const created = NOW - 365 * DAY_MS + Math.floor((i / n) * 365 * DAY_MS);
    // Activity continues for up to 30 days after creation, so list order differs from creation order.
    const lastAt = Math.min(NOW - 1000, created + Math.floor(rnd() * 30 * DAY_MS));
    const record: ConversationRecord = {
      generation: 0,
      id: `conv_${String(i).padStart(7, "0")}_${Math.floor(rnd() * 1e9).toString(36)}`,
      workspaceId: WORKSPACE,
      agent: AGENT,
      ownerMemberId: owner,
      channel,
      channelId:
        channel === "SLACK" ? pick(SLACK_CHANNELS, rnd) : channel === "EMAIL" ? pick(MAILBOXES, rnd) : null,
      notebookPath: channel === "NOTEBOOK" ? pick(NOTEBOOKS, rnd) : null,
      automation: rnd() < 0.08 ? pick(AUTOMATIONS, rnd) : null,
      title: PROMPT.slice(0, 60),
      shared: owner !== null && rnd() < (channel === "NOTEBOOK" ? 0.05 : 0.1),
      agentSessionId: null,
      parentConversationId: null,
      forkedAtTurnIndex: null,
      defaultModel: null,
      defaultAutomation: null,
      hidden: !isLong && rnd() < 0.01,
      createdAt: new Date(created).toISOString(),
      updatedAt: new Date(created).toISOString(),
      turnCount: 0,
      turnModel: null,
      turnAutomation: null,
    };
    const turns = isLong ? LONG_TURNS : 1 + Math.floor(rnd() * 3);
    const write: Promise<void> = (async () => {
      await store.insertConversation(record);
      await writeTurns(store, record, turns, lastAt);
    })()
      .catch((error: unknown) => {
        failure ??= error;
      })
      .finally(() => inFlight.delete(write));
    inFlight.add(write);
    if (inFlight.size >= concurrency) await Promise.race(inFlight);
    if (failure) throw failure;
    if (owner !== null && !record.hidden) (isLong ? long : owned).push({ id: record.id, owner });
  }
  await Promise.all(inFlight);
  if (failure) throw failure;
  return { owned, long, seconds: (performance.now() - started) / 1000 };
}

interface Figure {
  p50: number;
  p99: number;
  /**
   * p99 of the process's CPU time per call (all its threads, so a GC thread's work counts and this can
   * exceed the wall-clock p99). The machine is shared: a call descheduled for a time slice shows in the
   * wall-clock p99 but not here, which tells the store's cost apart from the neighbours' load.
   */
  cpuP99: number;
  samples: number;
}

/**
 * Times `work[k](i)` for i = 0..count-1 on each subject k, alternating subjects sample by sample so that a
 * change of machine load while an operation is measured hits the baseline and the large store alike.
 * A few unmeasured warm-up calls first (statement compilation, JIT).
 */
async function timeEach(
  count: number,
  work: Array<(i: number) => unknown>,
  warmUp: number,
): Promise<Figure[]> {
  for (const run of work) for (let i = 0; i < warmUp; i++) await run(count + i);
  const wall = work.map((): number[] => []);
  const cpu = work.map((): number[] => []);
  for (let i = 0; i < count; i++) {
    for (const [k, run] of work.entries()) {
      const cpuStarted = process.cpuUsage();
      const started = performance.now();
      await run(i);
      wall[k].push(performance.now() - started);
      const used = process.cpuUsage(cpuStarted);
      cpu[k].push((used.user + used.system) / 1000);
    }
  }
  return work.map((_, k) => ({
    p50: percentile(wall[k], 50),
    p99: percentile(wall[k], 99),
    cpuP99: percentile(cpu[k], 99),
    samples: count,
  }));
}

interface ListCase {
  label: string;
  /** A query per sample, so the values vary as a real mix of callers would. */
  query: (i: number) => ListQuery;
  /** Another viewer than the round-robin members (one who owns nothing). */
  viewer?: string;
}

const iso = (ms: number) => new Date(ms).toISOString();

const LIST_CASES: ListCase[] = [
  { label: "list (default limit 50)", query: () => ({}) },
  { label: "list limit=200", query: () => ({ limit: 200 }) },
  { label: "list since=<1 day ago>", query: () => ({ since: iso(NOW - DAY_MS) }) },
  { label: "list channel=SLACK", query: () => ({ channel: "SLACK" }) },
  { label: "list channel=EMAIL", query: () => ({ channel: "EMAIL" }) },
  { label: "list channel_id=<slack channel>", query: (i) => ({ channel_id: SLACK_CHANNELS[i % 40] }) },
  {
    label: "list channel=EMAIL&channel_id=<mailbox>",
    query: (i) => ({ channel: "EMAIL", channel_id: MAILBOXES[i % 200] }),
  },
  { label: "list notebook_path=<path>", query: (i) => ({ notebook_path: NOTEBOOKS[i % 300] }) },
  {
    label: "list channel=NOTEBOOK&notebook_path=<path>",
    query: (i) => ({ channel: "NOTEBOOK", notebook_path: NOTEBOOKS[(i * 7) % 300] }),
  },
  { label: "list automation=<name>", query: (i) => ({ automation: AUTOMATIONS[i % 4] }) },
  {
    label: "list automation&since=<30 days ago>",
    query: (i) => ({ automation: AUTOMATIONS[i % 4], since: iso(NOW - 30 * DAY_MS) }),
  },
  {
    label: "list channel=SLACK&automation&since, limit=200",
    query: (i) => ({
      channel: "SLACK",
      automation: AUTOMATIONS[i % 4],
      since: iso(NOW - 90 * DAY_MS),
      limit: 200,
    }),
  },
  { label: "list automation=<unknown> (no match)", query: () => ({ automation: "no-such-automation" }) },
  { label: "list as a member who owns nothing", query: () => ({}), viewer: "member-without-conversations" },
];

interface SizeRow {
  name: string;
  bytes: number;
}

/** One store under test with the service over it; the baseline and the large store are two of these. */
interface Subject {
  n: number;
  dir: string;
  store: Store;
  sessions: SessionRecorder;
  service: ConversationService;
  seeded: Seeded;
  bytes: number;
  parts: SizeRow[];
  forks: Array<{ id: string; owner: string }>;
  figures: Map<string, Figure>;
}

function databaseSize(file: string): { bytes: number; parts: SizeRow[] } {
  const db = new DatabaseSync(file);
  try {
    // Measured after a checkpoint, so the figure is the database an operator backs up, not the WAL.
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    const bytes = statSync(file).size;
    let parts: SizeRow[] = [];
    try {
      parts = db
        .prepare("SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC")
        .all() as unknown as SizeRow[];
    } catch {
      // dbstat is a compile-time option of SQLite; without it only the total is reported.
    }
    return { bytes, parts };
  } finally {
    db.close();
  }
}

/** The size of a PostgreSQL database, after VACUUM ANALYZE (the statistics its planner would have). */
async function postgresSize(url: string): Promise<{ bytes: number; parts: SizeRow[] }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query("VACUUM ANALYZE");
    const total = await client.query<{ bytes: string }>(
      "SELECT pg_database_size(current_database()) AS bytes",
    );
    // Tables with their TOAST, and indexes, each on its own row (the list indexes are conversations_list_*).
    const { rows } = await client.query<{ name: string; bytes: string }>(
      `SELECT relname AS name, CASE relkind WHEN 'r' THEN pg_table_size(oid) ELSE pg_relation_size(oid) END AS bytes
       FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'i') ORDER BY 2 DESC`,
    );
    return {
      bytes: Number(total.rows[0].bytes),
      parts: rows.map((row) => ({ name: row.name, bytes: Number(row.bytes) })),
    };
  } finally {
    await client.end();
  }
}

/** Where the stores live: SQLite files, or databases of one PostgreSQL server. */
interface StoreEngine {
  name: "sqlite" | "postgres";
  /** A server URL (its `postgres` database) on which the bench may create databases. */
  postgresUrl?: string;
  concurrency: number;
}

async function openSubject(n: number, longCount: number, where: StoreEngine): Promise<Subject> {
  const dir = mkdtempSync(path.join(tmpdir(), "bench-store-"));
  let store: Store;
  let size: () => Promise<{ bytes: number; parts: SizeRow[] }>;
  if (where.name === "postgres" && where.postgresUrl) {
    const database = `bench_store_${n}_${process.pid}`;
    const admin = new pg.Client({ connectionString: where.postgresUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${database}`);
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.end();
    const url = new URL(where.postgresUrl);
    url.pathname = `/${database}`;
    store = await openPostgresStore(url.href, { maxConnections: Math.max(4, where.concurrency) });
    size = () => postgresSize(url.href);
  } else {
    const file = path.join(dir, "agent-api.sqlite");
    store = openSqliteStore(file);
    size = async () => databaseSize(file);
  }
  process.stdout.write(`  seeding ${n.toLocaleString("en")} conversations through the Store API... `);
  const seeded = await seed(store, n, longCount, where.concurrency);
  process.stdout.write(`${seeded.seconds.toFixed(1)} s\n`);
  const { bytes, parts } = await size();
  const config: ServerConfig = {
    workspaces: [{ id: WORKSPACE, name: WORKSPACE, members: MEMBERS.map((id) => ({ id, name: id })) }],
    keys: [],
    agents: [
      {
        name: AGENT,
        workspaceId: WORKSPACE,
        kind: "storage",
        defaultModel: "demo-large",
        models: [],
        instructions: "",
        automations: [],
        secrets: {},
      },
    ],
    flows: [],
  };
  // The service's file side (sandbox) and turns (engine) are not what this bench measures.
  const sandbox = { fork: async () => undefined, remove: async () => undefined } as Pick<
    SandboxManager,
    "fork" | "remove"
  > as SandboxManager;
  const engine = { name: "none" } as AgentEngine;
  const options = {
    sessionDelayMs: 0,
    routingPrefix: "agent-api",
    compactionBudgetTokens: 6_000,
    turnTimeoutMs: 60_000,
  };
  const sessions = new SessionRecorder(store, 0);
  const service = new ConversationService({ config, store, sandbox, engine, options }, sessions);
  return { n, dir, store, sessions, service, seeded, bytes, parts, forks: [], figures: new Map() };
}

async function closeSubject(subject: Subject): Promise<void> {
  await subject.sessions.close();
  await subject.store.close();
  rmSync(subject.dir, { recursive: true, force: true });
}

interface Operation {
  label: string;
  /** Samples to take on a subject (bounded by what it holds, e.g. conversations left to delete). */
  count(subject: Subject, samples: number): number;
  warmUp: number;
  work(subject: Subject): (i: number) => unknown;
}

function operations(): Operation[] {
  const list: Operation[] = LIST_CASES.map((listCase) => ({
    label: listCase.label,
    count: (_, samples) => samples,
    warmUp: 5,
    work:
      ({ service }) =>
      (i) =>
        service.list(caller(listCase.viewer ?? MEMBERS[i % MEMBERS.length]), AGENT, listCase.query(i)),
  }));
  return [
    ...list,
    {
      label: "get one conversation",
      count: (_, samples) => samples,
      warmUp: 5,
      work:
        ({ service, seeded: { owned } }) =>
        (i) => {
          const target = owned[(i * 7919) % owned.length];
          return service.get(caller(target.owner), AGENT, target.id);
        },
    },
    {
      label: `transcript, ${LONG_TURNS * 2} messages`,
      count: (_, samples) => Math.min(samples, 50),
      warmUp: 2,
      work:
        ({ service, seeded: { long } }) =>
        (i) => {
          const target = long[i % long.length];
          return service.transcript(caller(target.owner), AGENT, target.id);
        },
    },
    {
      label: `fork, ${LONG_TURNS * 2} messages`,
      count: (_, samples) => Math.min(samples, 50),
      warmUp: 2,
      work:
        ({ service, seeded: { long }, forks }) =>
        async (i) => {
          const target = long[i % long.length];
          const child = await service.fork(caller(target.owner), AGENT, target.id, {});
          forks.push({ id: child.conversation_id, owner: target.owner });
        },
    },
    {
      label: "delete, 1-3 turns",
      count: ({ seeded: { owned } }, samples) => Math.min(samples, Math.floor(owned.length / 4)),
      warmUp: 2,
      work:
        ({ service, seeded: { owned } }) =>
        (i) => {
          // 104729 is prime: distinct i pick distinct conversations, so none is deleted twice.
          const target = owned[(i * 104729) % owned.length];
          return service.delete(caller(target.owner), AGENT, target.id);
        },
    },
    {
      label: `delete, ${LONG_TURNS * 2} messages (the forks)`,
      count: ({ forks }) => forks.length,
      warmUp: 0,
      work:
        ({ service, forks }) =>
        (i) =>
          service.delete(caller(forks[i].owner), AGENT, forks[i].id),
    },
  ];
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
const ms = (value: number) => value.toFixed(2).padStart(7);

function report(baseline: Subject, main: Subject): boolean {
  const labelWidth = Math.max(...[...main.figures.keys()].map((k) => k.length));
  const nb = baseline.n.toLocaleString("en");
  const nm = main.n.toLocaleString("en");
  console.log(
    `\n${"operation (ms)".padEnd(labelWidth)} | ${`p50 @${nb}`.padStart(9)} ${`p99 @${nb}`.padStart(9)} | ${`p50 @${nm}`.padStart(11)} ${`p99 @${nm}`.padStart(11)} ${"CPU p99".padStart(8)} | p50 ratio`,
  );
  let listsMet = true;
  for (const [label, figure] of main.figures) {
    const base = baseline.figures.get(label);
    if (!base) continue;
    const isList = label.startsWith("list");
    if (isList && figure.p99 >= LIST_P99_TARGET_MS) listsMet = false;
    console.log(
      `${label.padEnd(labelWidth)} | ${ms(base.p50).padStart(9)} ${ms(base.p99).padStart(9)} | ${ms(figure.p50).padStart(11)} ${ms(figure.p99).padStart(11)} ${ms(figure.cpuP99).padStart(8)} | ${(figure.p50 / base.p50).toFixed(2).padStart(6)}×${isList && figure.p99 >= LIST_P99_TARGET_MS ? "  over target" : ""}`,
    );
  }
  console.log(
    `\nlist p99 < ${LIST_P99_TARGET_MS} ms at ${nm}: ${listsMet ? "met" : "MISSED"}; samples per list: ${main.figures.get(LIST_CASES[0].label)?.samples}; load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")} on ${availableParallelism()} cores`,
  );
  for (const run of [baseline, main]) {
    console.log(
      `database @${run.n.toLocaleString("en")}: ${mb(run.bytes)}, ${mb((run.bytes / run.n) * 1000)} per 1k conversations (seeded in ${run.seeded.seconds.toFixed(1)} s, ${Math.round(run.n / run.seeded.seconds).toLocaleString("en")} conversations/s with their turns, ${run.seeded.long.length} long)`,
    );
  }
  if (main.parts.length > 0) {
    const listIndexes = main.parts.filter((p) => p.name.startsWith("conversations_list"));
    const listBytes = listIndexes.reduce((sum, p) => sum + p.bytes, 0);
    const rest = main.parts.filter((p) => !p.name.startsWith("conversations_list"));
    console.log(
      `  @${nm}: ${rest
        .slice(0, 6)
        .map((p) => `${p.name} ${mb(p.bytes)}`)
        .join(", ")}, the ${listIndexes.length} list indexes ${mb(listBytes)} (largest ${listIndexes
        .slice(0, 2)
        .map((p) => `${p.name} ${mb(p.bytes)}`)
        .join(", ")})`,
    );
  }
  return listsMet;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      n: { type: "string", default: "100000" },
      baseline: { type: "string", default: "1000" },
      samples: { type: "string", default: "300" },
      long: { type: "string", default: "10" },
      engine: { type: "string", default: "sqlite" },
      store: { type: "string" },
      concurrency: { type: "string" },
    },
  });
  const engineName = values.engine === "postgres" || values.store ? "postgres" : "sqlite";
  if (values.engine !== "sqlite" && values.engine !== "postgres")
    throw new Error(`--engine must be sqlite or postgres (got ${values.engine})`);
  let cluster: PostgresCluster | undefined;
  const where: StoreEngine = {
    name: engineName,
    concurrency: Number(values.concurrency ?? (engineName === "postgres" ? 8 : 1)),
  };
  if (engineName === "postgres") {
    if (!values.store) cluster = await startPostgresCluster();
    where.postgresUrl = values.store ?? cluster?.url;
  }
  const n = Number(values.n);
  const baselineN = Math.min(Number(values.baseline), n);
  const samples = Number(values.samples);
  const longCount = Number(values.long);
  console.log(
    `bench:store: ${baselineN.toLocaleString("en")} (baseline) and ${n.toLocaleString("en")} conversations on ${engineName === "postgres" ? `PostgreSQL (${cluster ? "a cluster of this run, fsync off" : "--store"}; the CPU column is this process's, not the server's)` : "SQLite"}`,
  );
  const baseline = await openSubject(baselineN, longCount, where);
  const large = await openSubject(n, longCount, where);
  try {
    const subjects = [baseline, large];
    for (const operation of operations()) {
      const count = Math.min(...subjects.map((subject) => operation.count(subject, samples)));
      const figures = await timeEach(
        count,
        subjects.map((subject) => operation.work(subject)),
        operation.warmUp,
      );
      for (const [k, subject] of subjects.entries()) subject.figures.set(operation.label, figures[k]);
    }
    report(baseline, large);
  } finally {
    await closeSubject(baseline);
    await closeSubject(large);
    await cluster?.stop();
  }
}

await main();
