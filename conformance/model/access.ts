/**
 * Keys, workspaces and agents: which requests are refused before any conversation is looked at, and with what
 * (Authentication; Errors). 401 comes first: without a recognised key there is no workspace to look in.
 */
import type { Refusal } from "./expectation.ts";
import { defineRules } from "./rules.ts";
import { type Actor, type AgentKind, UNAUTHENTICATED_ACTORS, WORKSPACE_AGENTS } from "./state.ts";

export const REVOKED_BODY = { message: "API key has been revoked" };

export const accessRules = defineRules("access", {
  missingKey401: {
    section: "Authentication",
    check: "AUTH-401-EVERY-ROUTE",
    text: "A missing or unrecognized key gives 401, on every route, whatever the agent or conversation named",
  },
  revoked401: {
    section: "Authentication",
    check: "AUTH-401-REVOKED",
    text: 'A revoked key gives 401 with body {"message": "API key has been revoked"}',
  },
  foreignKey404: {
    section: "Authentication",
    check: "AUTH-404-FOREIGN-AGENT",
    text: "A key reaches only its workspace's agents: another workspace's key gets 404 on this workspace's agents",
  },
  foreignAgent404: {
    section: "Authentication",
    check: "AUTH-404-FOREIGN-AGENT",
    text: "An agent in another workspace (or no agent of that name) gives 404",
  },
});

/** The refusal a request gets for its key and agent alone, or null when both are good. */
export function accessRefusal(actor: Actor, agent: AgentKind): Refusal | null {
  if (actor === "revoked") return { status: 401, rule: accessRules.revoked401, exactBody: REVOKED_BODY };
  if (UNAUTHENTICATED_ACTORS.has(actor)) return { status: 401, rule: accessRules.missingKey401 };
  if (actor === "foreign") return { status: 404, rule: accessRules.foreignKey404 };
  if (!WORKSPACE_AGENTS.has(agent)) return { status: 404, rule: accessRules.foreignAgent404 };
  return null;
}
