/** Agents as a caller's key sees them: only its own workspace's agents exist (others give 404). */
import type { components } from "@agent-api/client/api-types";
import type { AgentConfig, ServerConfig } from "../config/types.ts";
import { badRequest, notFound } from "../errors/catalogue.ts";
import type { Caller } from "./types.ts";

export type ModelList = components["schemas"]["ModelList"];

export function findAgent(config: ServerConfig, caller: Caller, name: string): AgentConfig {
  const agent = config.agents.find((a) => a.name === name && a.workspaceId === caller.workspaceId);
  // An agent of another workspace is answered exactly like a missing one.
  if (!agent) throw notFound(`Agent not found: ${name}`);
  return agent;
}

/**
 * `created_at` of a model whose configuration gives none. The SDKs' model types require the field; the Unix
 * epoch says "unknown" plainly and is the same on every instance behind a balancer.
 */
export const MODEL_CREATED_AT_UNKNOWN = "1970-01-01T00:00:00.000Z";

/** The agent's models with its configured default first. */
export function listModels(agent: AgentConfig): ModelList {
  const byId = new Map(agent.models.map((m) => [m.id, m]));
  const first = byId.get(agent.defaultModel) ?? { id: agent.defaultModel, display_name: agent.defaultModel };
  const rest = agent.models.filter((m) => m.id !== agent.defaultModel);
  return {
    data: [first, ...rest].map((m) => ({
      type: "model" as const,
      id: m.id,
      display_name: m.display_name,
      created_at: m.created_at ?? MODEL_CREATED_AT_UNKNOWN,
    })),
    has_more: false,
  };
}

/**
 * A model named by a request must be one of the agent's models list ids: running a turn under a made-up
 * name would only fail later, or silently use something else. The ids are exactly those the list shows
 * (no aliases are resolved here, so there are no other names to accept).
 */
export function checkModel(agent: AgentConfig, model: string, field: string): void {
  const ids = listModels(agent).data.map((m) => m.id);
  if (ids.includes(model)) return;
  throw badRequest(
    `${field} ${JSON.stringify(model)} is not a model of agent ${agent.name}: use one of the ids listed by GET /api/agents/${encodeURIComponent(agent.name)}/v1/models (${ids.join(", ")})`,
  );
}
