/**
 * Turn throughput and time to first SSE event of the reference server, at 1, 16 and 64 concurrent streams,
 * against a ceiling measured in the same run: a bare node:http server that answers the same request with
 * the same SSE bytes (captured from the reference server; only the message id differs) and does nothing
 * else (no auth, validation, store, sandbox or engine).
 *
 * Each server runs in its own child process, so the load generator (this process, undici) never shares an
 * event loop with the server it measures. Every stream owns one conversation and sends its turns into it
 * one after another (turns of one conversation are serialised by the server anyway); afterwards every
 * conversation's turn_count is compared with the turns that completed in it, so each counted turn was
 * durably stored. Turns use the scripted engine, one text block, no tools.
 *
 * Run: npm run bench:turns [-- --seconds 3 --levels 1,16,64 --profile DIR]
 *   (with DATABASE_URL=postgres://… the reference server runs on that PostgreSQL database)
 *   --profile DIR  writes a V8 CPU profile of the reference server process into DIR (.cpuprofile)
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Agent, request } from "undici";
import { DEMO_ADMIN_KEY } from "../reference-server/demo/workspace.ts";
import { SOURCE_CONDITION_FLAG } from "../scripts/source-condition.ts";
import { percentile } from "./stats.ts";

const SELF = fileURLToPath(import.meta.url);
const API_KEY = DEMO_ADMIN_KEY;
const AGENT = "demo-agent";
const PROMPT = "Say hello to the benchmark in one short sentence.";
const TARGET_RATIO_AT_64 = 0.5;

// ---------------------------------------------------------------------------------------------------------
// Server roles (child processes)

async function serveReference(dataDir: string): Promise<void> {
  const { startDemoServer } = await import("../reference-server/demo/index.ts");
  // DATABASE_URL=postgres://… measures the PostgreSQL store instead of SQLite.
  const server = await startDemoServer(300, { dataDir, store: process.env.DATABASE_URL || undefined });
  process.stdout.write(`READY ${server.url}\n`);
  const stop = async () => {
    await server.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop());
  process.on("SIGINT", () => void stop());
}

/** The ceiling: read and parse the JSON body, then write the captured frames one write per frame. */
async function serveBare(templateJson: string): Promise<void> {
  const frames = JSON.parse(templateJson) as string[];
  const messageId = /"id":"(msg_[0-9a-f]+)"/.exec(frames[0])?.[1];
  if (!messageId) throw new Error("template has no message id");
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      let body: { metadata?: { conversation_id?: string } };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        res.writeHead(400, { "content-type": "application/json" }).end('{"message":"bad json"}');
        return;
      }
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        connection: "keep-alive",
        "x-accel-buffering": "no",
        "x-conversation-id": body.metadata?.conversation_id ?? `conv_${randomBytes(16).toString("hex")}`,
      });
      res.flushHeaders();
      const freshId = `msg_${randomBytes(16).toString("hex")}`;
      res.write(frames[0].replace(messageId, freshId));
      for (let i = 1; i < frames.length; i++) res.write(frames[i]);
      res.end();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    const port = typeof address === "object" && address ? address.port : 0;
    process.stdout.write(`READY http://127.0.0.1:${port}\n`);
  });
  process.on("SIGTERM", () => server.close(() => process.exit(0)));
}

// ---------------------------------------------------------------------------------------------------------
// Load generator (main process)

interface Child {
  url: string;
  process: ChildProcess;
}

async function startChild(args: string[], input?: string, nodeFlags: string[] = []): Promise<Child> {
  const child = spawn(process.execPath, [...nodeFlags, SOURCE_CONDITION_FLAG, SELF, ...args], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  if (input !== undefined) child.stdin?.end(input);
  else child.stdin?.end();
  let out = "";
  child.stdout?.setEncoding("utf8");
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on("data", (chunk: string) => {
      out += chunk;
      const match = /READY (\S+)/.exec(out);
      if (match) resolve(match[1]);
    });
    child.on("exit", (code) =>
      reject(new Error(`${args.join(" ")} exited with ${code} before it was ready`)),
    );
  });
  return { url, process: child };
}

async function stopChild(child: Child): Promise<void> {
  if (child.process.exitCode !== null) return;
  const exited = once(child.process, "exit");
  child.process.kill("SIGTERM");
  await exited;
}

/** CPU seconds (user + system, all threads) a process has used so far; Linux /proc, else NaN. */
async function cpuSeconds(pid: number | undefined): Promise<number> {
  if (pid === undefined) return Number.NaN;
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command name.
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return Number.NaN;
  }
}
const CLOCK_TICKS = 100;

interface TurnTiming {
  ttfeMs: number;
  totalMs: number;
}

function body(conversationId: string): string {
  return JSON.stringify({
    model: "demo-large",
    max_tokens: 256,
    stream: true,
    messages: [{ role: "user", content: PROMPT }],
    metadata: { conversation_id: conversationId },
  });
}

/** One turn; the time to first event is when the first complete SSE frame ("...\n\n") has arrived. */
async function oneTurn(dispatcher: Agent, baseUrl: string, conversationId: string): Promise<TurnTiming> {
  const started = performance.now();
  const response = await request(`${baseUrl}/api/agents/${AGENT}/v1/messages`, {
    method: "POST",
    dispatcher,
    headers: { "x-api-key": API_KEY, "content-type": "application/json" },
    body: body(conversationId),
  });
  if (response.statusCode !== 200) {
    throw new Error(`HTTP ${response.statusCode}: ${await response.body.text()}`);
  }
  let ttfe = -1;
  let text = "";
  for await (const chunk of response.body) {
    text += (chunk as Buffer).toString("utf8");
    if (ttfe < 0 && text.includes("\n\n")) ttfe = performance.now() - started;
  }
  if (
    !text.startsWith("event: message_start\n") ||
    !text.endsWith('event: message_stop\ndata: {"type":"message_stop"}\n\n')
  ) {
    throw new Error(`unexpected stream: ${text.slice(0, 200)} ... ${text.slice(-120)}`);
  }
  return { ttfeMs: ttfe, totalMs: performance.now() - started };
}

interface LevelResult {
  streams: number;
  turns: number;
  seconds: number;
  turnsPerSecond: number;
  p50: number;
  p99: number;
  /** conversation id → turns completed in it */
  perConversation: Map<string, number>;
  /** CPU time of the server process per measured turn, in ms. */
  serverCpuMsPerTurn: number;
  /** CPU time of this load generator per measured turn, in ms. */
  clientCpuMsPerTurn: number;
}

async function runLevel(
  server: Child,
  label: string,
  streams: number,
  seconds: number,
): Promise<LevelResult> {
  const baseUrl = server.url;
  const dispatcher = new Agent({ connections: streams, pipelining: 1, keepAliveTimeout: 30_000 });
  const runId = randomBytes(4).toString("hex");
  const perConversation = new Map<string, number>();
  const samples: number[] = [];
  try {
    // Warm-up: every stream opens its connection and runs a few turns (not measured, but stored and counted).
    const conversations = Array.from(
      { length: streams },
      (_, i) => `bench-${label}-${streams}-${runId}-${i}`,
    );
    for (const id of conversations) perConversation.set(id, 0);
    const warmUntil = performance.now() + 500;
    await Promise.all(
      conversations.map(async (id) => {
        while (performance.now() < warmUntil) {
          await oneTurn(dispatcher, baseUrl, id);
          perConversation.set(id, (perConversation.get(id) ?? 0) + 1);
        }
      }),
    );
    let turns = 0;
    const serverCpu = await cpuSeconds(server.process.pid);
    const clientCpu = process.cpuUsage();
    const started = performance.now();
    const until = started + seconds * 1000;
    await Promise.all(
      conversations.map(async (id) => {
        while (performance.now() < until) {
          const timing = await oneTurn(dispatcher, baseUrl, id);
          samples.push(timing.ttfeMs);
          turns++;
          perConversation.set(id, (perConversation.get(id) ?? 0) + 1);
        }
      }),
    );
    const elapsed = (performance.now() - started) / 1000;
    const serverCpuUsed = (await cpuSeconds(server.process.pid)) - serverCpu;
    const clientCpuUsed = process.cpuUsage(clientCpu);
    return {
      serverCpuMsPerTurn: (serverCpuUsed * 1000) / turns,
      clientCpuMsPerTurn: (clientCpuUsed.user + clientCpuUsed.system) / 1000 / turns,
      streams,
      turns,
      seconds: elapsed,
      turnsPerSecond: turns / elapsed,
      p50: percentile(samples, 50),
      p99: percentile(samples, 99),
      perConversation,
    };
  } finally {
    await dispatcher.close();
  }
}

/** Every turn that completed is stored: turn_count of each conversation equals the turns sent into it. */
async function verifyStored(baseUrl: string, perConversation: Map<string, number>): Promise<number> {
  const dispatcher = new Agent({ connections: 8 });
  let total = 0;
  try {
    for (const [id, expected] of perConversation) {
      const response = await request(
        `${baseUrl}/api/agents/${AGENT}/conversations/${encodeURIComponent(id)}`,
        {
          dispatcher,
          headers: { "x-api-key": API_KEY },
        },
      );
      const json = (await response.body.json()) as { conversation?: { turn_count?: number } };
      const stored = json.conversation?.turn_count;
      if (stored !== expected) {
        throw new Error(`conversation ${id}: ${expected} turns completed but turn_count is ${stored}`);
      }
      total += stored;
    }
  } finally {
    await dispatcher.close();
  }
  return total;
}

/** The reference server's SSE frames for the benchmark request, to be replayed by the bare server. */
async function captureFrames(baseUrl: string): Promise<string[]> {
  const response = await request(`${baseUrl}/api/agents/${AGENT}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": API_KEY, "content-type": "application/json" },
    body: body(`bench-template-${randomBytes(4).toString("hex")}`),
  });
  const text = await response.body.text();
  return text
    .split("\n\n")
    .filter((f) => f.length > 0)
    .map((f) => `${f}\n\n`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      serve: { type: "string" },
      data: { type: "string" },
      seconds: { type: "string", default: "3" },
      levels: { type: "string", default: "1,16,64" },
      profile: { type: "string" },
    },
  });
  if (values.serve === "reference") return serveReference(values.data as string);
  if (values.serve === "bare") {
    let input = "";
    process.stdin.setEncoding("utf8");
    for await (const chunk of process.stdin) input += chunk;
    return serveBare(input);
  }

  const seconds = Number(values.seconds);
  const levels = String(values.levels)
    .split(",")
    .map((n) => Number(n.trim()));
  const dataDir = await mkdtemp(path.join(tmpdir(), "bench-turns-"));
  const profileFlags = values.profile ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve(values.profile)}`] : [];
  const reference = await startChild(["--serve", "reference", "--data", dataDir], undefined, profileFlags);
  let bare: Child | undefined;
  try {
    const frames = await captureFrames(reference.url);
    bare = await startChild(["--serve", "bare"], JSON.stringify(frames));
    const sseBytes = frames.join("").length;
    process.stderr.write(
      `node ${process.version}; ${seconds}s per level after a 0.5s warm-up; one turn = ${frames.length} SSE frames, ${sseBytes} bytes\n`,
    );

    const rows: Array<{ ref: LevelResult; base: LevelResult; stored: number }> = [];
    for (const streams of levels) {
      const ref = await runLevel(reference, "ref", streams, seconds);
      const base = await runLevel(bare, "bare", streams, seconds);
      const stored = await verifyStored(reference.url, ref.perConversation);
      rows.push({ ref, base, stored });
      process.stderr.write(`  measured ${streams} stream(s)\n`);
    }

    const num = (n: number, digits = 0) => n.toFixed(digits).padStart(9);
    console.log(
      `${"streams".padStart(7)} | ${"reference turns/s".padStart(17)} ${"p50 TTFE".padStart(9)} ${"p99 TTFE".padStart(9)} | ${"bare turns/s".padStart(12)} ${"p50 TTFE".padStart(9)} ${"p99 TTFE".padStart(9)} | ${"ratio".padStart(6)} | stored`,
    );
    for (const { ref, base, stored } of rows) {
      console.log(
        `${String(ref.streams).padStart(7)} | ${num(ref.turnsPerSecond).padStart(17)} ${num(ref.p50, 2)} ${num(ref.p99, 2)} | ${num(base.turnsPerSecond).padStart(12)} ${num(base.p50, 2)} ${num(base.p99, 2)} | ${(ref.turnsPerSecond / base.turnsPerSecond).toFixed(2).padStart(6)} | ${stored} turns verified in ${ref.perConversation.size} conversations`,
      );
    }
    console.log("TTFE = time to first SSE event, in ms; ratio = reference turns/s ÷ bare turns/s.");
    console.log(
      `CPU per turn (ms, server process incl. its threads / load generator): ${rows
        .map(
          ({ ref, base }) =>
            `${ref.streams} streams: reference ${ref.serverCpuMsPerTurn.toFixed(3)} / ${ref.clientCpuMsPerTurn.toFixed(3)}, bare ${base.serverCpuMsPerTurn.toFixed(3)} / ${base.clientCpuMsPerTurn.toFixed(3)}`,
        )
        .join("; ")}`,
    );
    const at64 = rows.find((r) => r.ref.streams === 64);
    if (at64) {
      const ratio = at64.ref.turnsPerSecond / at64.base.turnsPerSecond;
      console.log(
        `at 64 streams: ${ratio.toFixed(2)}× the bare node:http ceiling (target ≥ ${TARGET_RATIO_AT_64}×: ${ratio >= TARGET_RATIO_AT_64 ? "met" : "missed"})`,
      );
    }
  } finally {
    if (bare) await stopChild(bare);
    await stopChild(reference);
    await rm(dataDir, { recursive: true, force: true });
  }
}

await main();
