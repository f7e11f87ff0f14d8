/** The share toggle (Endpoints/Toggle sharing; Authentication 5; States and transitions). */
import type { StatusExpectation } from "./expectation.ts";
import { lookUpConversation } from "./lookup.ts";
import { defineRules } from "./rules.ts";
import type { Actor, AgentKind, ModelState } from "./state.ts";

export const sharingRules = defineRules("sharing", {
  ownerToggles: {
    section: "States and transitions",
    check: "STATE-SHARE-TRUE",
    text: "The owner's share toggle succeeds and sets `shared` to the value sent",
  },
  ownerOnly: {
    section: "Authentication",
    check: "AUTH-OWNER-ONLY-SHARE",
    text: "Only the owner may toggle sharing, with no admin override: anyone else is refused and nothing changes",
  },
  bodyExact: {
    section: "Endpoints/Toggle sharing",
    check: "SHARE-BODY-STRICT",
    text: 'The body must be exactly {"shared": <boolean>}: any other body is refused and nothing changes',
  },
});

/** What a deployment may answer a body that is not exactly {"shared": <boolean>}. */
const MALFORMED = [400, 422];

export type ShareBody = { shared: boolean } | { malformed: unknown };

export function predictShare(
  state: ModelState,
  actor: Actor,
  agent: AgentKind,
  id: string,
  body: ShareBody,
): StatusExpectation {
  const found = lookUpConversation(state, actor, agent, id);
  if ("refusal" in found) {
    if (!("malformed" in body)) return { kind: "exact", refusal: found.refusal };
    // Whether the body is judged before the key or the conversation is not shown.
    return {
      kind: "one-of",
      refusals: [found.refusal, ...MALFORMED.map((status) => ({ status, rule: sharingRules.bodyExact }))],
      choice: `share with a malformed body when ${found.refusal.rule.id} applies too`,
    };
  }
  if (found.visibility !== "owner") {
    return {
      kind: "learned",
      among: [400, 403, 404, 409, 422],
      rule: sharingRules.ownerOnly,
      choice: "share by a member who is not the owner",
    };
  }
  if ("malformed" in body) {
    return {
      kind: "learned",
      among: MALFORMED,
      rule: sharingRules.bodyExact,
      choice: "share with a malformed body",
    };
  }
  return {
    kind: "learned",
    among: [200, 201, 204],
    rule: sharingRules.ownerToggles,
    choice: "share toggle success status",
  };
}
