/**
 * `agent-api model`: serves the scripted model as a Messages API upstream (`POST /v1/messages`,
 * streaming), deterministic and offline. Point `agent-api serve --engine anthropic` (ANTHROPIC_BASE_URL)
 * or any Messages client at it to check a deployment without a real model. `--style realistic` answers the
 * way real models do (preambles, markdown, several blocks, small deltas), reproducibly for a `--seed`.
 */
import { randomInt } from "node:crypto";
import { Command, Option } from "commander";
import { realisticUpstreamOptions } from "../scripted-model/realistic-style.ts";
import { serveScriptedModel } from "../scripted-model/scripted-transport.ts";
import { integer, parseCommand } from "./options.ts";

const STYLES = ["plain", "realistic"] as const;

function buildProgram(): Command {
  return new Command("agent-api model")
    .description("Serve the scripted model as a Messages API upstream (POST /v1/messages)")
    .option("--port <n>", "port to listen on (default 3002)", integer("model", "--port"), 3002)
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--latency-ms <n>", "wait before answering each call", integer("model", "--latency-ms"), 0)
    .option(
      "--block-delay-ms <n>",
      "wait before each content block's stop",
      integer("model", "--block-delay-ms"),
      0,
    )
    .option(
      "--deltas-per-block <n>",
      "deltas each block's content is split into",
      integer("model", "--deltas-per-block"),
      1,
    )
    .addOption(
      new Option(
        "--style <style>",
        "plain: terse exact answers; realistic: answers like a real model (preambles and sign-offs, markdown around values, several text blocks, a look at the files before a tool call, small deltas, a word when asked for silence)",
      )
        .choices(STYLES)
        .default("plain"),
    )
    .option(
      "--seed <n>",
      "seed of the realistic style's choices (default: a random one, printed)",
      integer("model", "--seed"),
    )
    .option(
      "--retry-after <seconds>",
      "Retry-After of the transient 429/529 answers (unset: retry-after-ms 10)",
      integer("model", "--retry-after"),
    )
    .exitOverride()
    .configureOutput({ writeErr: (text) => process.stderr.write(text) });
}

export async function main(args: string[]): Promise<number> {
  const program = buildProgram();
  const exit = parseCommand(program, args, "model");
  if (exit !== null) return exit;
  const opts = program.opts<{
    port: number;
    host: string;
    latencyMs: number;
    blockDelayMs: number;
    deltasPerBlock: number;
    retryAfter?: number;
    style: (typeof STYLES)[number];
    seed?: number;
  }>();
  const seed = opts.seed ?? randomInt(1, 1_000_000);
  const style = opts.style === "realistic" ? realisticUpstreamOptions(seed) : {};
  let server: Awaited<ReturnType<typeof serveScriptedModel>>;
  try {
    server = await serveScriptedModel({
      port: opts.port,
      host: opts.host,
      latencyMs: opts.latencyMs,
      blockDelayMs: opts.blockDelayMs,
      deltasPerBlock: Math.max(1, opts.deltasPerBlock),
      retryAfterSeconds: opts.retryAfter,
      ...style,
    });
  } catch (error) {
    process.stderr.write(`agent-api model: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  process.stdout.write(`Scripted model (Messages API) listening on ${server.url}\n`);
  if (opts.style === "realistic")
    process.stdout.write(`Style: realistic, seed ${seed} (the same answers again: --seed ${seed})\n`);
  process.stdout.write(
    `Use it: ANTHROPIC_BASE_URL=${server.url} ANTHROPIC_API_KEY=any agent-api serve --engine anthropic\n`,
  );
  await new Promise<void>((resolveStop) => {
    process.once("SIGINT", () => resolveStop());
    process.once("SIGTERM", () => resolveStop());
  });
  await server.close();
  return 0;
}
