/** Deletes (Endpoints/Delete a conversation; Authentication 5; States and transitions). */
import type { StatusExpectation } from "./expectation.ts";
import { lookUpConversation } from "./lookup.ts";
import { defineRules } from "./rules.ts";
import type { Actor, AgentKind, ModelState } from "./state.ts";

export const deleteRules = defineRules("deletes", {
  owner204: {
    section: "Endpoints/Delete a conversation",
    check: "STATE-DELETE",
    text: "The owner's delete answers 204 No Content and removes the conversation",
  },
  ownerOnly: {
    section: "Authentication",
    check: "AUTH-OWNER-ONLY-DELETE",
    text: "Only the owner may delete, with no admin override: anyone else is refused and nothing changes",
  },
  onlyThat: {
    section: "States and transitions",
    check: "STATE-DELETE",
    text: "A delete removes that conversation and nothing else: its parent and the other forks of that parent stay",
  },
  goneEverywhere: {
    section: "States and transitions",
    check: "CONSIST-DELETED-EVERYWHERE",
    text: "A deleted conversation is gone from every route (404, never listed)",
  },
  remadeIsNew: {
    section: "Endpoints/Send a message",
    check: "CONSIST-DELETED-EVERYWHERE",
    text: "A send with a deleted conversation's id creates a new conversation: made after the delete (its `created_at` later than the deleted one's timestamps), counting only its own turns",
  },
});

export function predictDelete(
  state: ModelState,
  actor: Actor,
  agent: AgentKind,
  id: string,
): StatusExpectation {
  const found = lookUpConversation(state, actor, agent, id);
  if ("refusal" in found) return { kind: "exact", refusal: found.refusal };
  if (found.visibility !== "owner") {
    return {
      kind: "learned",
      among: [400, 403, 404, 409],
      rule: deleteRules.ownerOnly,
      choice: "delete by a member who is not the owner",
    };
  }
  return { kind: "exact", refusal: { status: 204, rule: deleteRules.owner204 } };
}
