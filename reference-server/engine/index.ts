/**
 * Engine selection by name (the server's `--engine` flag). There is one loop (loop.ts); an engine is the
 * loop bound to a model: `scripted` reaches the scripted model in-process through the SDK's `fetch`
 * option, `anthropic` reaches ANTHROPIC_BASE_URL (the Anthropic API by default) with ANTHROPIC_API_KEY.
 */
import Anthropic from "@anthropic-ai/sdk";
import {
  createScriptedUpstream,
  type ScriptedUpstreamOptions,
} from "../scripted-model/scripted-transport.ts";
import { createLoopEngine, type LoopSettings } from "./loop.ts";
import type { AgentEngine } from "./types.ts";

export interface EngineOptions extends Partial<LoopSettings> {
  /** SDK retries of a call refused with 408/409/429/5xx/529 (honouring Retry-After). */
  maxRetries?: number;
  /** The scripted model's options (in-process). */
  scripted?: ScriptedUpstreamOptions;
}

const DEFAULT_MAX_RETRIES = 2;

export function createScriptedEngine(options: EngineOptions = {}): AgentEngine {
  const upstream = createScriptedUpstream(options.scripted);
  const client = new Anthropic({
    apiKey: "scripted",
    // The host is never resolved: the SDK hands every request to the scripted model's handler.
    baseURL: "http://scripted.invalid",
    fetch: upstream.fetch,
    maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
  });
  return createLoopEngine("scripted", () => client, options);
}

/** `anthropic`: ANTHROPIC_API_KEY (required) and ANTHROPIC_BASE_URL (optional). */
export function createAnthropicEngine(options: EngineOptions = {}): AgentEngine {
  const apiKey = process.env.ANTHROPIC_API_KEY;
  if (!apiKey)
    throw new Error('engine "anthropic" needs ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL)');
  const client = new Anthropic({
    apiKey,
    baseURL: process.env.ANTHROPIC_BASE_URL || undefined,
    maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
    // SDK 1.12 sends the key only as `Authorization: Bearer`; Messages upstreams read `x-api-key`.
    defaultHeaders: { "x-api-key": apiKey },
  });
  return createLoopEngine("anthropic", () => client, options);
}

const ENGINES: Record<string, (options: EngineOptions) => AgentEngine> = {
  scripted: createScriptedEngine,
  anthropic: createAnthropicEngine,
};

export const KNOWN_ENGINES: readonly string[] = Object.keys(ENGINES);

export function createEngine(
  name: "scripted" | "anthropic" | (string & {}),
  options: EngineOptions = {},
): AgentEngine {
  const make = Object.hasOwn(ENGINES, name) ? ENGINES[name] : undefined;
  if (!make) throw new Error(`unknown engine "${name}"; known engines: ${KNOWN_ENGINES.join(", ")}`);
  return make(options);
}

export { serveScriptedModel } from "../scripted-model/scripted-transport.ts";
export { LOOP_DEFAULTS, UpstreamError, type UpstreamFailureKind } from "./loop.ts";
export type { AgentEngine, AgentEvent, MessageParam, TurnInput, TurnOutcome, TurnUsage } from "./types.ts";
