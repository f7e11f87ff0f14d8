/**
 * Long conversations and long uptimes (issue 13): is a turn's cost flat in the conversation's length, and
 * is the server's memory flat once it is warm?
 *
 * 1. Phases: N concurrent clients send short turns round-robin over M conversations for T seconds, several
 *    phases in a row on one server, so conversations grow from phase to phase. Per phase: turns, server CPU
 *    per turn, and the server's heap after a full GC and RSS at the phase's end.
 * 2. Probe: one fresh conversation, turns sent one after another; the server CPU per turn is measured over
 *    a window of turns starting at 1, 100, 300 and 700 prior turns (the history each of them resumes).
 *
 * The server runs in a child process (`--expose-gc`, an IPC channel for its own CPU and memory figures),
 * so the load generator never shares its event loop. Sessions are recorded at once (session delay 0): every
 * turn resumes the whole history, which is what grows. The phases run on the server's default compaction
 * budget (`--phase-budget` to change it); the probe gets a server of its own whose budget lets 700 turns stay
 * one history (compaction would reset it, which is the point of compaction, not of this probe). Both
 * servers are warmed up first on conversations of their own (`--warmup` seconds), so no figure includes
 * the compiler's first work.
 *
 * Run: npm run bench:soak [-- --clients 200 --conversations 1000 --seconds 60 --phases 3 --probe 1,100,300,700
 *   --window 30 --profile DIR]
 *   --probe   the checkpoints (prior turns) of the one-conversation probe; empty to skip it
 *   --window  turns measured at each checkpoint
 *   --budget N        the probe server's compaction budget (tokens); --phase-budget N the phases' server's
 *   --checkpoint-ms N  the server's checkpointIntervalMs (0: SQLite checkpoints inside commits)
 *   --profile DIR  writes a V8 CPU profile of the server process into DIR (.cpuprofile)
 *   --upstream     the scripted model runs in a process of its own, reached over HTTP (`--engine anthropic`
 *                  against `agent-api model`), so the server's CPU is the server's alone, as with a real
 *                  upstream; by default it runs in-process and its work (parsing the request, answering)
 *                  counts as the server's
 */

import { type ChildProcess, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { getHeapSpaceStatistics } from "node:v8";
import { Agent, request } from "undici";
import { DEMO_ADMIN_KEY } from "../reference-server/demo/workspace.ts";

const SELF = fileURLToPath(import.meta.url);
const API_KEY = DEMO_ADMIN_KEY;
const AGENT = "demo-agent";
const PROMPT = "Say hello to the soak test in one short sentence.";
const CHECKPOINTS = [1, 100, 300, 700];
/** Compaction budget (tokens) of the probe's server: 700 short turns stay one history below it. */
const PROBE_BUDGET = 1_000_000;

interface ServerStats {
  /** process.cpuUsage() user + system, µs since the server process started. */
  cpuMicros: number;
  heapUsed: number;
  /** The V8 heap's committed size (what it holds from the OS, used or not). */
  heapTotal: number;
  /** Of it, the young generation's (new_space), which V8 grows with the allocation rate. */
  newSpace: number;
  rss: number;
  /** Memory outside the JS heap that V8 knows of: `external` includes `arrayBuffers` (Buffers). */
  external: number;
  arrayBuffers: number;
}

type StatsRequest = { type: "stats"; gc: boolean; id: number };

// ---------------------------------------------------------------------------------------------------------
// Server role (child process)

async function serve(
  dataDir: string,
  budget: number | undefined,
  upstream: boolean,
  checkpointMs: number | undefined,
): Promise<void> {
  const { startDemoServer } = await import("../reference-server/demo/index.ts");
  const { server } = await startDemoServer(0, {
    dataDir,
    // ANTHROPIC_BASE_URL is the scripted model in its own process (set by the parent).
    engine: upstream ? "anthropic" : "scripted",
    ...(budget === undefined ? {} : { compactionBudgetTokens: budget }),
    ...(checkpointMs === undefined ? {} : { checkpointIntervalMs: checkpointMs }),
  });
  const gc = (globalThis as { gc?: () => void }).gc;
  process.on("message", (message: StatsRequest) => {
    if (message.gc && gc) {
      gc();
      gc();
    }
    const cpu = process.cpuUsage();
    // Memory only when asked for it: the probe asks for CPU around every turn.
    const memory = message.gc
      ? process.memoryUsage()
      : {
          heapUsed: Number.NaN,
          heapTotal: Number.NaN,
          rss: Number.NaN,
          external: Number.NaN,
          arrayBuffers: Number.NaN,
        };
    process.send?.({
      id: message.id,
      stats: {
        cpuMicros: cpu.user + cpu.system,
        heapUsed: memory.heapUsed,
        heapTotal: memory.heapTotal,
        newSpace: message.gc
          ? (getHeapSpaceStatistics().find((space) => space.space_name === "new_space")?.space_size ?? 0)
          : Number.NaN,
        rss: memory.rss,
        external: memory.external,
        arrayBuffers: memory.arrayBuffers,
      },
    });
  });
  process.on("disconnect", () => void server.close().then(() => process.exit(0)));
  process.send?.({ ready: server.url });
}

// ---------------------------------------------------------------------------------------------------------
// Load generator (main process)

class ServerChild {
  #next = 0;
  readonly url: string;
  readonly child: ChildProcess;
  readonly dataDir: string;
  constructor(url: string, child: ChildProcess, dataDir: string) {
    this.url = url;
    this.child = child;
    this.dataDir = dataDir;
  }

  stats(gc: boolean): Promise<ServerStats> {
    const id = this.#next++;
    return new Promise((resolve) => {
      const onMessage = (message: { id?: number; stats?: ServerStats }) => {
        if (message.id !== id || !message.stats) return;
        this.child.off("message", onMessage);
        resolve(message.stats);
      };
      this.child.on("message", onMessage);
      this.child.send({ type: "stats", gc, id } satisfies StatsRequest);
    });
  }
}

/** The scripted model served over HTTP in its own process (`--upstream`): its work is not the server's. */
async function serveModel(): Promise<void> {
  const { serveScriptedModel } = await import("../reference-server/scripted-model/scripted-transport.ts");
  const model = await serveScriptedModel({});
  process.on("disconnect", () => void model.close().then(() => process.exit(0)));
  process.send?.({ ready: model.url });
}

async function startModelChild(): Promise<{ url: string; child: ChildProcess }> {
  const child = fork(SELF, ["--serve-model"], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const url = await new Promise<string>((resolve, reject) => {
    child.once("message", (message: { ready?: string }) => {
      if (message.ready) resolve(message.ready);
    });
    child.once("exit", (code) => reject(new Error(`model exited with ${code} before it was ready`)));
  });
  return { url, child };
}

async function startServerChild(
  dataDir: string,
  budget: number | undefined,
  profile: string | undefined,
  upstreamUrl: string | undefined,
  checkpointMs?: number,
): Promise<ServerChild> {
  const profileFlags = profile ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve(profile)}`] : [];
  const child = fork(
    SELF,
    [
      "--serve",
      dataDir,
      ...(budget === undefined ? [] : ["--budget", String(budget)]),
      ...(upstreamUrl ? ["--upstream"] : []),
      ...(checkpointMs === undefined ? [] : ["--checkpoint-ms", String(checkpointMs)]),
    ],
    {
      execArgv: ["--expose-gc", ...profileFlags],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      env: upstreamUrl
        ? { ...process.env, ANTHROPIC_BASE_URL: upstreamUrl, ANTHROPIC_API_KEY: "scripted" }
        : process.env,
    },
  );
  const url = await new Promise<string>((resolve, reject) => {
    child.once("message", (message: { ready?: string }) => {
      if (message.ready) resolve(message.ready);
    });
    child.once("exit", (code) => reject(new Error(`server exited with ${code} before it was ready`)));
  });
  return new ServerChild(url, child, dataDir);
}

/** One turn; returns the text of its answer (the stream must end with message_stop). */
async function turn(dispatcher: Agent, baseUrl: string, conversationId: string, prompt = PROMPT) {
  const response = await request(`${baseUrl}/api/agents/${AGENT}/v1/messages`, {
    method: "POST",
    dispatcher,
    headers: { "x-api-key": API_KEY, "content-type": "application/json" },
    body: JSON.stringify({
      model: "demo-large",
      max_tokens: 256,
      stream: true,
      messages: [{ role: "user", content: prompt }],
      metadata: { conversation_id: conversationId },
    }),
  });
  if (response.statusCode !== 200)
    throw new Error(`HTTP ${response.statusCode}: ${await response.body.text()}`);
  const text = await response.body.text();
  if (!text.endsWith('event: message_stop\ndata: {"type":"message_stop"}\n\n'))
    throw new Error(`the turn did not complete: ${text.slice(-300)}`);
  return text;
}

interface PhaseResult {
  turns: number;
  errors: number;
  cpuMsPerTurn: number;
  heapMB: number;
  heapTotalMB: number;
  newSpaceMB: number;
  rssMB: number;
  externalMB: number;
  arrayBuffersMB: number;
  /** The data directory's SQLite WAL at the phase's end. */
  walMB: number;
}

async function phase(
  server: ServerChild,
  dispatcher: Agent,
  conversations: string[],
  clients: number,
  seconds: number,
  cursor: { next: number },
): Promise<PhaseResult> {
  const before = await server.stats(false);
  let turns = 0;
  let errors = 0;
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < until) {
        const id = conversations[cursor.next++ % conversations.length];
        try {
          await turn(dispatcher, server.url, id);
          turns++;
        } catch (error) {
          errors++;
          if (errors <= 3) console.error(error instanceof Error ? error.message : error);
        }
      }
    }),
  );
  const cpu = (await server.stats(false)).cpuMicros - before.cpuMicros;
  const after = await server.stats(true);
  return {
    turns,
    errors,
    cpuMsPerTurn: cpu / 1000 / Math.max(1, turns),
    heapMB: after.heapUsed / 2 ** 20,
    heapTotalMB: after.heapTotal / 2 ** 20,
    newSpaceMB: after.newSpace / 2 ** 20,
    rssMB: after.rss / 2 ** 20,
    externalMB: after.external / 2 ** 20,
    arrayBuffersMB: after.arrayBuffers / 2 ** 20,
    walMB:
      ((await stat(path.join(server.dataDir, "agent-api.sqlite-wal")).catch(() => undefined))?.size ?? 0) /
      2 ** 20,
  };
}

/** Server CPU per turn over `window` sequential turns, starting at each checkpoint's number of prior turns. */
async function probe(
  server: ServerChild,
  dispatcher: Agent,
  checkpoints: number[],
  window: number,
): Promise<Array<{ prior: number; cpuMsPerTurn: number }>> {
  const id = `soak-probe-${randomBytes(4).toString("hex")}`;
  const word = `soak${randomBytes(3).toString("hex")}`;
  await turn(dispatcher, server.url, id, `Remember this code word: ${word}. Reply with just OK.`);
  let prior = 1;
  const results: Array<{ prior: number; cpuMsPerTurn: number }> = [];
  for (const checkpoint of checkpoints) {
    while (prior < checkpoint) {
      await turn(dispatcher, server.url, id);
      prior++;
    }
    // The median turn: a GC pause or a descheduled moment (other jobs on the machine) lands on some turns of
    // a window, not on the cost a turn has at this length.
    const samples: number[] = [];
    for (let i = 0; i < window; i++) {
      const before = await server.stats(false);
      await turn(dispatcher, server.url, id);
      samples.push(((await server.stats(false)).cpuMicros - before.cpuMicros) / 1000);
    }
    samples.sort((a, b) => a - b);
    results.push({ prior: checkpoint, cpuMsPerTurn: samples[Math.floor(samples.length / 2)] });
    prior += window;
  }
  // The history really was resumed all along: the first turn's word is still remembered.
  const recall = await turn(
    dispatcher,
    server.url,
    id,
    "What code word did I ask you to remember? Reply with just the word.",
  );
  if (!recall.includes(word)) throw new Error(`the probe conversation forgot ${word}: its history was lost`);
  return results;
}

function fmt(value: number, digits = 2): string {
  return value.toFixed(digits);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      serve: { type: "string" },
      budget: { type: "string" },
      clients: { type: "string", default: "50" },
      conversations: { type: "string", default: "200" },
      seconds: { type: "string", default: "10" },
      phases: { type: "string", default: "3" },
      probe: { type: "string", default: CHECKPOINTS.join(",") },
      window: { type: "string", default: "30" },
      warmup: { type: "string", default: "5" },
      "phase-budget": { type: "string" },
      profile: { type: "string" },
      upstream: { type: "boolean", default: false },
      "serve-model": { type: "boolean", default: false },
      "checkpoint-ms": { type: "string" },
    },
  });
  const checkpointMs = values["checkpoint-ms"] === undefined ? undefined : Number(values["checkpoint-ms"]);
  const budget = values.budget === undefined ? undefined : Number(values.budget);
  if (values["serve-model"]) return serveModel();
  if (values.serve) return serve(values.serve, budget, values.upstream === true, checkpointMs);
  const probeBudget = budget ?? PROBE_BUDGET;

  const clients = Number(values.clients);
  const conversationCount = Number(values.conversations);
  const seconds = Number(values.seconds);
  const phases = Number(values.phases);
  const checkpoints = String(values.probe)
    .split(",")
    .filter((s) => s.trim() !== "")
    .map(Number);
  const window = Number(values.window);

  const warmup = Number(values.warmup);
  const dataDir = await mkdtemp(path.join(tmpdir(), "bench-soak-"));
  const model = values.upstream ? await startModelChild() : undefined;
  const dispatcher = new Agent({ connections: clients + 1, keepAliveTimeout: 30_000 });
  const runId = randomBytes(4).toString("hex");
  /** Turns over conversations of their own, not counted: the server's code is compiled and hot before. */
  const warmUp = async (server: ServerChild) => {
    const spare = Array.from({ length: clients }, (_, i) => `soak-warm-${runId}-${i}`);
    if (warmup > 0) await phase(server, dispatcher, spare, clients, warmup, { next: 0 });
  };
  try {
    console.log(
      `bench:soak (model ${values.upstream ? "over HTTP, own process" : "in-process"}): ${clients} clients over ${conversationCount} conversations, ${phases} phases of ${seconds} s after ${warmup} s of warm-up; compaction budget ${values["phase-budget"] ?? "the server's default"}`,
    );
    if (phases > 0) {
      const server = await startServerChild(
        path.join(dataDir, "phases"),
        values["phase-budget"] === undefined ? undefined : Number(values["phase-budget"]),
        values.profile,
        model?.url,
        checkpointMs,
      );
      try {
        await warmUp(server);
        const conversations = Array.from({ length: conversationCount }, (_, i) => `soak-${runId}-${i}`);
        const cursor = { next: 0 };
        const results: PhaseResult[] = [];
        for (let p = 1; p <= phases; p++) {
          const result = await phase(server, dispatcher, conversations, clients, seconds, cursor);
          results.push(result);
          console.log(
            `phase ${p}: ${result.turns} turns (${result.errors} errors), ~${fmt(cursor.next / conversationCount, 0)} turns per conversation, ` +
              `server CPU ${fmt(result.cpuMsPerTurn)} ms/turn, heap after GC ${fmt(result.heapMB, 1)} MB (committed ${fmt(result.heapTotalMB, 1)} MB, young generation ${fmt(result.newSpaceMB, 1)} MB), RSS ${fmt(result.rssMB, 1)} MB ` +
              `(external ${fmt(result.externalMB, 1)} MB of which array buffers ${fmt(result.arrayBuffersMB, 1)} MB; WAL ${fmt(result.walMB, 1)} MB)`,
          );
        }
        if (results.length >= 3) {
          const [first, second] = results;
          const last = results[results.length - 1];
          console.log(
            `turns last/first phase: ${fmt(last.turns / first.turns)} (target within 10%); ` +
              `heap last/second: ${fmt(last.heapMB / second.heapMB)}, RSS last/second: ${fmt(last.rssMB / second.rssMB)} (target ±10%)`,
          );
        }
      } finally {
        await stopChild(server.child);
      }
    }
    if (checkpoints.length > 0) {
      // A server of its own whose budget lets 700 turns stay one uncompacted history.
      const server = await startServerChild(
        path.join(dataDir, "probe"),
        probeBudget,
        values.profile,
        model?.url,
        checkpointMs,
      );
      try {
        await warmUp(server);
        const probed = await probe(server, dispatcher, checkpoints, window);
        const base = probed[0].cpuMsPerTurn;
        console.log(
          `probe (one conversation, median server CPU of ${window} turns per point, compaction budget ${probeBudget}): ${probed
            .map((r) => `${r.prior} prior turns ${fmt(r.cpuMsPerTurn)} ms (${fmt(r.cpuMsPerTurn / base)}×)`)
            .join(", ")}; target at the last point ≤ 1.3×`,
        );
      } finally {
        await stopChild(server.child);
      }
    }
  } finally {
    await dispatcher.close();
    if (model) await stopChild(model.child);
    await rm(dataDir, { recursive: true, force: true });
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = once(child, "exit");
  child.disconnect();
  await exited;
}

await main();
