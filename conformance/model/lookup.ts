/** The gate every conversation route shares: key, agent, then the conversation and what the caller may do with it. */
import { accessRefusal } from "./access.ts";
import type { Refusal } from "./expectation.ts";
import type { Actor, AgentKind, ConversationModel, ModelState } from "./state.ts";
import { type Visibility, visibility, visibilityRules } from "./visibility.ts";

export type Lookup = { refusal: Refusal } | { conversation: ConversationModel; visibility: Visibility };

export function lookUpConversation(state: ModelState, actor: Actor, agent: AgentKind, id: string): Lookup {
  const access = accessRefusal(actor, agent);
  if (access) return { refusal: access };
  const c = state.live(id);
  if (!c) return { refusal: { status: 404, rule: visibilityRules.missingIs404 } };
  if (c.agent !== agent) return { refusal: { status: 404, rule: visibilityRules.otherAgentIs404 } };
  const v = visibility(actor, c);
  if (v === "none") return { refusal: { status: 404, rule: visibilityRules.privateIs404 } };
  return { conversation: c, visibility: v };
}
