/**
 * The load a real deployment carries: many turns open at once, each waiting on a slow model. `agent-api
 * model --latency-ms N` (the scripted model as a Messages upstream, answering each call after N ms) behind
 * `agent-api serve --demo --engine anthropic` instances on one PostgreSQL cluster behind nginx; the load
 * generator opens all turns at once (each its own conversation, one key) and reads every stream to its end.
 *
 * Reported per configuration (1 instance, 2 instances): the turns open at the same moment, memory per open
 * turn (the servers' RSS while all are open, less their RSS before, after a warm-up batch; nginx's beside
 * it), the time to each stream's first byte (the server sends its headers with the first event or
 * keep-alive comment, so this is the turn's start-up plus at most one keep-alive interval) and the longest
 * silence after it (the keep-alive comments must cover the model's wait: `--keep-alive-ms`, default 5000), errors (non-200, an error event, a stream cut before message_stop), and
 * the servers' open file descriptors at the peak against their limit.
 *
 * `--server-nofile N` lowers the servers' open-file limit once they run (prlimit), to see a deployment
 * whose limit was left at a distribution's default (each open turn holds two descriptors: the client's
 * socket and the upstream's).
 *
 * Run: npm run bench:open-turns [-- --turns 1000 --latency-ms 30000 --instances 1,2 --warm 16 --engine postgres
 *      --server-nofile N]
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Agent, request } from "undici";
import { freePort } from "../conformance/testing/nginx.ts";
import { DEMO_ADMIN_KEY } from "../reference-server/demo/workspace.ts";
import { SOURCE_CONDITION_FLAG } from "../scripts/source-condition.ts";
import { root } from "../test/postgres/processes.ts";
import { type Deployment, rssBytes, startDeployment } from "./deployment.ts";
import { percentile } from "./stats.ts";

const AGENT = "demo-agent";
const KEEP_ALIVE_MS = 5_000;
/** A gap past the keep-alive interval by more than this is late (timer and scheduling slack on 2 busy cores). */
const LATE_SLACK_MS = 1_000;

interface StreamResult {
  status: number;
  /** ms from the start of the batch. */
  firstEventAt: number;
  endedAt: number;
  /** Longest time between two reads of the stream, from its first byte to its end. */
  maxGapMs: number;
  complete: boolean;
  error?: string;
}

async function openTurn(dispatcher: Agent, url: string, conversationId: string, t0: number) {
  const result: StreamResult = {
    status: 0,
    firstEventAt: Number.NaN,
    endedAt: Number.NaN,
    maxGapMs: 0,
    complete: false,
  };
  let last = Number.NaN;
  try {
    const response = await request(`${url}/api/agents/${AGENT}/v1/messages`, {
      method: "POST",
      dispatcher,
      headers: { "x-api-key": DEMO_ADMIN_KEY, "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: "Say hello to the benchmark in one short sentence." }],
        metadata: { conversation_id: conversationId },
      }),
    });
    result.status = response.statusCode;
    let text = "";
    for await (const chunk of response.body) {
      const now = performance.now();
      // The time to the first byte is reported on its own: it holds the turn's start-up, not only a silence.
      if (!Number.isNaN(last)) result.maxGapMs = Math.max(result.maxGapMs, now - last);
      last = now;
      if (Number.isNaN(result.firstEventAt)) result.firstEventAt = now - t0;
      // Only the tail matters: the last event and whether an error event came.
      text = (text + (chunk as Buffer).toString("utf8")).slice(-4096);
      const at = text.indexOf("event: error");
      if (at >= 0) result.error ??= text.slice(at, at + 300).replace(/\s+/g, " ");
    }
    result.endedAt = performance.now() - t0;
    result.complete = text.includes("event: message_stop");
    if (response.statusCode !== 200) result.error ??= `HTTP ${response.statusCode}: ${text.slice(0, 200)}`;
    else if (!result.complete) result.error ??= "stream ended before message_stop";
  } catch (error) {
    result.endedAt = performance.now() - t0;
    result.error ??= (error as Error).message;
  }
  return result;
}

function openFiles(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return Number.NaN;
  }
}

function openFilesLimit(pid: number): string {
  try {
    return /Max open files\s+(\S+)/.exec(readFileSync(`/proc/${pid}/limits`, "utf8"))?.[1] ?? "?";
  } catch {
    return "?";
  }
}

async function startModel(latencyMs: number): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      SOURCE_CONDITION_FLAG,
      join(root, "conformance/cli/agent-api.ts"),
      "model",
      "--port",
      String(port),
      "--latency-ms",
      String(latencyMs),
    ],
    { cwd: root, stdio: ["ignore", "pipe", "inherit"] },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (chunk) => {
      if (/listening on/.test(String(chunk))) resolve();
    });
    child.once("exit", (code) => reject(new Error(`agent-api model exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

interface Figures {
  instances: number;
  turns: number;
  openAtOnce: number;
  firstEventP50: number;
  firstEventP99: number;
  firstEventMax: number;
  lastEnd: number;
  rssBefore: number;
  rssOpen: number;
  nginxBefore: number;
  nginxOpen: number;
  maxGap: number;
  gapP99: number;
  late: number;
  errors: number;
  /** Each distinct error (its first 100 characters) and how many streams had it. */
  errorKinds: Map<string, number>;
  fdsPeak: number;
  fdLimit: string;
}

async function runBatch(
  deployment: Deployment,
  count: number,
  tag: string,
  latencyMs: number,
  onOpen?: () => void,
): Promise<StreamResult[]> {
  const dispatcher = new Agent({
    connections: count,
    keepAliveTimeout: 10_000,
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  try {
    const t0 = performance.now();
    const runId = randomBytes(4).toString("hex");
    // Sampled while every turn is waiting on the model: past the ramp, before the first answer.
    const sampler = onOpen ? setTimeout(onOpen, latencyMs * 0.75) : undefined;
    const results = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        openTurn(dispatcher, deployment.url, `open-${tag}-${runId}-${i}`, t0),
      ),
    );
    clearTimeout(sampler);
    return results;
  } finally {
    await dispatcher.close();
  }
}

async function measure(
  engine: "sqlite" | "postgres",
  instances: number,
  turns: number,
  latencyMs: number,
  warm: number,
  modelUrl: string,
  serverNofile: number | undefined,
): Promise<Figures> {
  const deployment = await startDeployment({
    engine,
    instances,
    serveArgs: ["--engine", "anthropic"],
    env: { ANTHROPIC_BASE_URL: modelUrl, ANTHROPIC_API_KEY: "bench" },
    nginxConnections: turns * 2 + 512,
  });
  if (serverNofile !== undefined)
    for (const pid of deployment.serverPids)
      execFileSync("prlimit", ["--pid", String(pid), `--nofile=${serverNofile}:${serverNofile}`]);
  const rss = () => deployment.serverPids.reduce((sum, pid) => sum + rssBytes(pid), 0);
  const nginxRss = () => {
    // The master and its one worker.
    let total = rssBytes(deployment.nginxPid);
    for (const name of readdirSync("/proc"))
      if (/^[0-9]+$/.test(name)) {
        try {
          const stat = readFileSync(`/proc/${name}/stat`, "utf8");
          if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === deployment.nginxPid)
            total += rssBytes(Number(name));
        } catch {
          // Gone.
        }
      }
    return total;
  };
  try {
    // Warm-up batch (not measured): code paths compiled, pools and caches at their working size.
    if (warm > 0) await runBatch(deployment, warm, "warm", latencyMs);
    const rssBefore = rss();
    const nginxBefore = nginxRss();
    let rssOpen = Number.NaN;
    let nginxOpen = Number.NaN;
    let fdsPeak = 0;
    const results = await runBatch(deployment, turns, "measured", latencyMs, () => {
      rssOpen = rss();
      nginxOpen = nginxRss();
      fdsPeak = deployment.serverPids.reduce((sum, pid) => sum + openFiles(pid), 0);
    });
    const firstEvents = results.map((r) => r.firstEventAt).filter((t) => !Number.isNaN(t));
    const firstEnd = Math.min(...results.map((r) => r.endedAt));
    const gaps = results.map((r) => r.maxGapMs);
    const failed = results.filter((r) => r.error !== undefined);
    return {
      instances,
      turns,
      openAtOnce: firstEvents.filter((t) => t < firstEnd).length,
      firstEventP50: percentile(firstEvents, 50),
      firstEventP99: percentile(firstEvents, 99),
      firstEventMax: Math.max(...firstEvents),
      lastEnd: Math.max(...results.map((r) => r.endedAt)),
      rssBefore,
      rssOpen,
      nginxBefore,
      nginxOpen,
      maxGap: Math.max(...gaps),
      gapP99: percentile(gaps, 99),
      late: gaps.filter((g) => g > KEEP_ALIVE_MS + LATE_SLACK_MS).length,
      errors: failed.length,
      errorKinds: failed.reduce((kinds, r) => {
        const kind = (r.error ?? "").replace(/\s+/g, " ").slice(0, 120);
        return kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      }, new Map<string, number>()),
      fdsPeak,
      fdLimit: openFilesLimit(deployment.serverPids[0]),
    };
  } finally {
    await deployment.stop();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      turns: { type: "string", default: "1000" },
      "latency-ms": { type: "string", default: "30000" },
      instances: { type: "string", default: "1,2" },
      warm: { type: "string", default: "16" },
      engine: { type: "string", default: "postgres" },
      "server-nofile": { type: "string" },
    },
  });
  const turns = Number(values.turns);
  const latencyMs = Number(values["latency-ms"]);
  const warm = Number(values.warm);
  const engine = values.engine === "sqlite" ? "sqlite" : "postgres";
  process.stderr.write(
    `bench:open-turns: ${turns} turns at once, model latency ${latencyMs} ms, ${engine}, through nginx; load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(
        " ",
      )} on ${availableParallelism()} cores; this process's open-file limit ${openFilesLimit(process.pid)}\n`,
  );
  const model = await startModel(latencyMs);
  const rows: Figures[] = [];
  try {
    for (const instances of String(values.instances).split(",").map(Number)) {
      rows.push(
        await measure(
          engine,
          instances,
          turns,
          latencyMs,
          warm,
          model.url,
          values["server-nofile"] === undefined ? undefined : Number(values["server-nofile"]),
        ),
      );
      process.stderr.write(`  measured ${instances} instance(s)\n`);
    }
  } finally {
    model.child.kill("SIGTERM");
  }
  const mib = (bytes: number) => (bytes / 1048576).toFixed(1);
  const s = (ms: number) => (ms / 1000).toFixed(2);
  console.log(
    `\n| instances | turns | open at once | first byte p50/p99/max s | last end s | servers' RSS before → open MiB | per open turn KiB | nginx per turn KiB | longest silence after the first byte, max / p99 s | streams with a silence > ${s(KEEP_ALIVE_MS + LATE_SLACK_MS)} s | errors | servers' fds at peak (limit) |`,
  );
  console.log("|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const r of rows)
    console.log(
      `| ${r.instances} | ${r.turns} | ${r.openAtOnce} | ${s(r.firstEventP50)} / ${s(r.firstEventP99)} / ${s(r.firstEventMax)} | ${s(r.lastEnd)} | ${mib(r.rssBefore)} → ${mib(r.rssOpen)} | ${((r.rssOpen - r.rssBefore) / r.turns / 1024).toFixed(1)} | ${((r.nginxOpen - r.nginxBefore) / r.turns / 1024).toFixed(1)} | ${s(r.maxGap)} / ${s(r.gapP99)} | ${r.late} | ${r.errors} | ${r.fdsPeak} (${r.fdLimit} each) |`,
    );
  for (const r of rows)
    for (const [kind, count] of r.errorKinds) console.log(`${r.instances} instance(s): ${count} × ${kind}`);
  console.log(
    `keep-alive interval ${KEEP_ALIVE_MS} ms (agent-api serve --keep-alive-ms default); load average after: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
}

await main();
