/**
 * A conversation's record as it is created: no session, no fork, no remembered model or automation, no turns,
 * private, visible, updated when created. The service, the demo seed and the tests build one from what
 * differs, so a field added to ConversationRecord gets its starting value in one place.
 */
import type { ConversationRecord } from "./types.ts";

/** What a new conversation must be told; anything else of the record may be given too. */
export type NewConversation = Pick<
  ConversationRecord,
  "id" | "workspaceId" | "agent" | "ownerMemberId" | "title" | "createdAt"
> &
  Partial<ConversationRecord>;

export function newConversation(fields: NewConversation): ConversationRecord {
  return {
    channel: "INTERACTIVE",
    channelId: null,
    notebookPath: null,
    automation: null,
    shared: false,
    agentSessionId: null,
    parentConversationId: null,
    forkedAtTurnIndex: null,
    defaultModel: null,
    defaultAutomation: null,
    turnModel: null,
    turnAutomation: null,
    hidden: false,
    updatedAt: fields.createdAt,
    turnCount: 0,
    // The database assigns it at the insert.
    generation: 0,
    ...fields,
  };
}
