/**
 * What the agent loop adds to a block's way to the client: the scripted model, served over HTTP like
 * `agent-api model`, streams a two-block answer (thinking, then text) with its deltas spread over time;
 * the reference server on `--engine anthropic` relays it. For each block, the time from the upstream
 * sending its `content_block_stop` to the client reading the server's `content_block_stop` is measured,
 * at 1, 16 and 64 concurrent turns (each its own conversation), and the bench checks that the first
 * block reached the client before the upstream had finished generating the second.
 *
 * The servers (model and reference server) share one child process; the load generator is this process.
 * Times are wall-clock (performance.timeOrigin + now) on one machine, so both sides read the same clock.
 *
 * The server's event-loop delay (perf_hooks.monitorEventLoopDelay, while the measured turns run) is printed
 * beside the figures: a block that arrives while the loop is held waits for as long.
 *
 * Run: npm run bench:engine [-- --levels 1,16,64 --rounds 4 --block-delay-ms 150 --deltas 5 --profile DIR]
 *   --profile DIR  writes a V8 CPU profile of the server process into DIR (.cpuprofile)
 *   --checkpoint-ms N  the server's checkpointIntervalMs (0: SQLite checkpoints inside commits, as before)
 */

import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { EventSourceParserStream } from "eventsource-parser/stream";
import { DEMO_ADMIN_KEY } from "../reference-server/demo/workspace.ts";
import { SOURCE_CONDITION_FLAG } from "../scripts/source-condition.ts";

const SELF = fileURLToPath(import.meta.url);
const TARGET_P99_MS_AT_64 = 5;
const now = () => performance.timeOrigin + performance.now();

async function serve(
  dataDir: string,
  stopsFile: string,
  blockDelayMs: number,
  deltas: number,
  checkpointMs: number | undefined,
) {
  const { serveScriptedModel } = await import("../reference-server/scripted-model/scripted-transport.ts");
  const { writeFileSync } = await import("node:fs");
  const { monitorEventLoopDelay } = await import("node:perf_hooks");
  // How long the server's event loop was held by one piece of synchronous work: what a block waits behind.
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  const stops: Array<{ nonce: string; index: number; at: number }> = [];
  const model = await serveScriptedModel({
    blockDelayMs,
    deltasPerBlock: deltas,
    onBlockStop: (request, index, at) => {
      const text = JSON.stringify(request.messages.at(-1)?.content ?? "");
      const nonce = /bench-[0-9]+-[0-9]+-[01]/.exec(text)?.[0];
      if (nonce) stops.push({ nonce, index, at });
    },
  });
  process.env.ANTHROPIC_BASE_URL = model.url;
  process.env.ANTHROPIC_API_KEY = "bench";
  const { startDemoServer } = await import("../reference-server/demo/index.ts");
  const server = await startDemoServer(300, {
    dataDir,
    engine: "anthropic",
    ...(checkpointMs === undefined ? {} : { checkpointIntervalMs: checkpointMs }),
  });
  process.stdout.write(`READY ${server.url} ${model.url}\n`);
  process.on("message", (message: string) => {
    if (message === "measure") loopDelay.enable();
  });
  process.on("SIGTERM", async () => {
    loopDelay.disable();
    const ms = (ns: number) => ns / 1e6;
    const loop = {
      p50: ms(loopDelay.percentile(50)),
      p99: ms(loopDelay.percentile(99)),
      max: ms(loopDelay.max),
    };
    writeFileSync(stopsFile, JSON.stringify({ stops, loop }));
    await server.close();
    await model.close();
    process.exit(0);
  });
}

interface ClientTurn {
  nonce: string;
  stops: number[];
}

/** A turn through the reference server, or (baseline) the same request straight to the model server. */
async function turn(url: string, nonce: string, direct = false): Promise<ClientTurn> {
  const content = `Think step by step before answering. Say ${nonce}.`;
  const res = await fetch(direct ? `${url}/v1/messages` : `${url}/api/agents/demo-agent/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": DEMO_ADMIN_KEY, "content-type": "application/json" },
    body: JSON.stringify({
      messages: [{ role: "user", content }],
      ...(direct ? { model: "demo-large", max_tokens: 1024, stream: true } : {}),
    }),
  });
  const stops: number[] = [];
  const events = (res.body as ReadableStream<Uint8Array>)
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream());
  for await (const event of events) {
    if (event.event === "content_block_stop") stops[JSON.parse(event.data).index] = now();
    if (event.event === "error") throw new Error(event.data);
  }
  return { nonce, stops };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function main() {
  const { values } = parseArgs({
    options: {
      role: { type: "string" },
      data: { type: "string" },
      stops: { type: "string" },
      levels: { type: "string", default: "1,16,64" },
      rounds: { type: "string", default: "4" },
      "block-delay-ms": { type: "string", default: "150" },
      deltas: { type: "string", default: "5" },
      profile: { type: "string" },
      "checkpoint-ms": { type: "string" },
    },
  });
  const checkpointMs = values["checkpoint-ms"] === undefined ? undefined : Number(values["checkpoint-ms"]);
  const blockDelayMs = Number(values["block-delay-ms"]);
  const deltas = Number(values.deltas);
  if (values.role === "serve") {
    await serve(values.data as string, values.stops as string, blockDelayMs, deltas, checkpointMs);
    return;
  }
  const rows: string[] = [];
  for (const level of (values.levels as string).split(",").map(Number)) {
    const dataDir = await mkdtemp(path.join(tmpdir(), "bench-engine-"));
    const stopsFile = path.join(dataDir, "upstream-stops.json");
    const child = spawn(
      process.execPath,
      [
        ...(values.profile ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve(values.profile)}`] : []),
        SOURCE_CONDITION_FLAG,
        SELF,
        "--role",
        "serve",
        "--data",
        dataDir,
        "--stops",
        stopsFile,
        "--block-delay-ms",
        String(blockDelayMs),
        "--deltas",
        String(deltas),
        ...(checkpointMs === undefined ? [] : ["--checkpoint-ms", String(checkpointMs)]),
      ],
      { stdio: ["ignore", "pipe", "inherit", "ipc"] },
    );
    let url = "";
    let modelUrl = "";
    if (!child.stdout) throw new Error("the server's stdout is not piped");
    for await (const chunk of child.stdout) {
      const match = /READY (\S+) (\S+)/.exec(String(chunk));
      if (match) {
        [, url, modelUrl] = match;
        break;
      }
    }
    const rounds = Number(values.rounds);
    const run = async (prefix: string, direct: boolean) => {
      const turns: ClientTurn[] = [];
      for (let round = 0; round < rounds; round++) {
        const batch = Array.from({ length: level }, (_, i) =>
          turn(direct ? modelUrl : url, `bench-${round}-${i}-${prefix}`, direct),
        );
        turns.push(...(await Promise.all(batch)));
      }
      return turns;
    };
    // Baseline first: the same answers read straight from the model server (its own socket and SSE cost).
    const baseline = await run("0", true);
    child.send("measure");
    const turns = await run("1", false);
    child.kill("SIGTERM");
    await once(child, "exit");
    const { stops: upstream, loop } = JSON.parse(await readFile(stopsFile, "utf8")) as {
      stops: Array<{ nonce: string; index: number; at: number }>;
      loop: { p50: number; p99: number; max: number };
    };
    const byNonce = new Map<string, number[]>();
    for (const s of upstream) {
      const list = byNonce.get(s.nonce) ?? [];
      list[s.index] = s.at;
      byNonce.set(s.nonce, list);
    }
    const delays = (list: ClientTurn[]) => {
      const out: number[] = [];
      for (const t of list) {
        const up = byNonce.get(t.nonce) ?? [];
        for (const index of [0, 1]) out.push(t.stops[index] - up[index]);
      }
      return out.sort((a, b) => a - b);
    };
    const added = delays(turns);
    const base = delays(baseline);
    const firstBeforeSecond = turns.filter((t) => t.stops[0] < (byNonce.get(t.nonce) ?? [])[1]).length;
    const p50 = percentile(added, 50);
    const p99 = percentile(added, 99);
    const cell = (n: number) => n.toFixed(2).padStart(7);
    rows.push(
      `| ${String(level).padStart(3)} | ${String(added.length).padStart(5)} | ${cell(p50)} | ${cell(p99)} | ${cell(percentile(base, 50))} | ${cell(percentile(base, 99))} | ${firstBeforeSecond}/${turns.length} | ${cell(loop.p99)} | ${cell(loop.max)} |`,
    );
    await rm(dataDir, { recursive: true, force: true });
    if (level === 64 && p99 > TARGET_P99_MS_AT_64)
      process.stderr.write(
        `p99 at 64 turns is ${p99.toFixed(2)} ms, above the ${TARGET_P99_MS_AT_64} ms target\n`,
      );
  }
  process.stdout.write(
    `upstream block delay ${blockDelayMs} ms, ${deltas} deltas per block; delay = client's content_block_stop - upstream's; baseline = the client reading the model server directly\n`,
  );
  process.stdout.write(
    "| turns | blocks | p50 ms | p99 ms | baseline p50 | baseline p99 | first block before second generated | server loop delay p99 | max |\n|---|---|---|---|---|---|---|---|---|\n",
  );
  process.stdout.write(`${rows.join("\n")}\n`);
}

await main();
