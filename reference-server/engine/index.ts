/** Engine selection by name (the server's `--engine` flag / config). */

import type { AnthropicEngineOptions } from "./anthropic.ts";
import { createScriptedEngine } from "./scripted.ts";
import type { AgentEngine } from "./types.ts";

/**
 * `anthropic` reads ANTHROPIC_API_KEY, and optionally ANTHROPIC_BASE_URL and ANTHROPIC_MODEL. The SDK is
 * imported on the first turn: it adds ~0.2 s to start-up, which a server on the scripted engine never needs.
 */
function anthropicFromEnvironment(): AgentEngine {
  const apiKey = process.env.ANTHROPIC_API_KEY;
  if (!apiKey)
    throw new Error('engine "anthropic" needs ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL)');
  const options: AnthropicEngineOptions = {
    apiKey,
    baseURL: process.env.ANTHROPIC_BASE_URL || undefined,
    model: process.env.ANTHROPIC_MODEL || undefined,
  };
  let engine: Promise<AgentEngine> | undefined;
  return {
    name: "anthropic",
    async *runTurn(input) {
      engine ??= import("./anthropic.ts").then((m) => m.createAnthropicEngine(options));
      return yield* (await engine).runTurn(input);
    },
  };
}

const ENGINES: Record<string, () => AgentEngine> = {
  scripted: () => createScriptedEngine(),
  anthropic: anthropicFromEnvironment,
};

export const KNOWN_ENGINES: readonly string[] = Object.keys(ENGINES);

export function createEngine(name: "scripted" | "anthropic" | (string & {})): AgentEngine {
  const make = Object.hasOwn(ENGINES, name) ? ENGINES[name] : undefined;
  if (!make) throw new Error(`unknown engine "${name}"; known engines: ${KNOWN_ENGINES.join(", ")}`);
  return make();
}

export { createScriptedEngine, type ScriptedEngineOptions } from "./scripted.ts";
export type { AgentEngine, AgentEvent, SessionEntry, TurnInput, TurnOutcome } from "./types.ts";
