/**
 * The conversation id resolution table of send-message (Endpoints/Send a message: conversation id resolution)
 * and the refusals of a send (Authentication 3; Errors).
 */
import { accessRefusal } from "./access.ts";
import { fromRefusals, type Refusal, type StatusExpectation } from "./expectation.ts";
import { defineRules } from "./rules.ts";
import type { Actor, AgentKind, ConversationModel, ModelState } from "./state.ts";

const IDS = "Endpoints/Send a message: conversation id resolution";

export const idRules = defineRules("ids", {
  omittedGenerated: {
    section: IDS,
    check: "CONVID-OMITTED-GENERATED",
    text: "conversation_id omitted: a new conversation, its id in X-Conversation-Id",
  },
  unknownVerbatim: {
    section: IDS,
    check: "CONVID-UNKNOWN-VERBATIM",
    text: "An unknown conversation_id: created with that id verbatim",
  },
  deletedIdNew: {
    section: IDS,
    check: "CONSIST-DELETED-ID-NEW",
    text: "The id of a deleted conversation is unknown again: a send creates a new conversation with it",
  },
  ownResumes: {
    section: IDS,
    check: "CONVID-OWN-RESUMES",
    text: "The caller's own conversation on this agent: resumes (the turn continues its history)",
  },
  otherAgent404: {
    section: IDS,
    check: "CONVID-OTHER-AGENT-404",
    text: "A conversation of a different agent: 404 with message `Conversation not found`",
  },
  othersUnshared404: {
    section: IDS,
    check: "CONVID-OTHERS-UNSHARED-404",
    text: "Someone else's conversation, not shared: 404 (existence never leaked)",
  },
  othersShared403: {
    section: IDS,
    check: "CONVID-OTHERS-SHARED-403",
    text: "Someone else's conversation shared with the workspace: 403 (readable, not writable)",
  },
  viewerSend403: {
    section: "Authentication",
    check: "AUTH-403-VIEWER-SEND",
    text: "A Viewer key gets 403 when sending a message",
  },
  refusedChangesNothing: {
    section: "Errors",
    check: "AUTH-403-VIEWER-SEND",
    text: "A refused send creates and changes no conversation",
  },
});

export type SendTarget =
  | { kind: "create"; rule: typeof idRules.omittedGenerated }
  | { kind: "create-verbatim"; id: string; rule: typeof idRules.unknownVerbatim }
  | { kind: "resume"; conversation: ConversationModel };

/** Refusals the conversation id alone earns a send, and where the turn goes otherwise. */
export function resolveSendTarget(
  state: ModelState,
  actor: Actor,
  agent: AgentKind,
  id: string | undefined,
): { refusals: Refusal[]; target?: SendTarget } {
  if (id === undefined) return { refusals: [], target: { kind: "create", rule: idRules.omittedGenerated } };
  const c = state.live(id);
  if (!c) {
    const deleted = state.byId(id) !== undefined;
    return {
      refusals: [],
      target: { kind: "create-verbatim", id, rule: deleted ? idRules.deletedIdNew : idRules.unknownVerbatim },
    };
  }
  if (c.agent !== agent) {
    return {
      refusals: [{ status: 404, rule: idRules.otherAgent404, message: "Conversation not found" }],
    };
  }
  if (c.owner === actor) return { refusals: [], target: { kind: "resume", conversation: c } };
  if (c.shared && (actor === "member" || actor === "viewer" || actor === "owner")) {
    return { refusals: [{ status: 403, rule: idRules.othersShared403 }] };
  }
  return { refusals: [{ status: 404, rule: idRules.othersUnshared404 }] };
}

/** The status a send gets: key and agent first, then the role, the delivery and the id together. */
export function predictSendStatus(
  state: ModelState,
  actor: Actor,
  agent: AgentKind,
  id: string | undefined,
  asyncDelivery: boolean,
  asyncRefusal: Refusal,
): { expectation: StatusExpectation; target?: SendTarget } {
  const access = accessRefusal(actor, agent);
  if (access) return { expectation: { kind: "exact", refusal: access } };
  const { refusals, target } = resolveSendTarget(state, actor, agent, id);
  if (actor === "viewer") refusals.unshift({ status: 403, rule: idRules.viewerSend403 });
  if (asyncDelivery) refusals.push(asyncRefusal);
  return { expectation: fromRefusals(refusals, "send"), target: refusals.length === 0 ? target : undefined };
}
