/**
 * The API's visibility and ownership rules, and the mapping of stored conversations to the API shape.
 * Visible to a caller: own conversations, conversations shared with the workspace, channel-owned ones.
 */
import type { components } from "@agent-api/client/api-types";
import type { ConversationRecord } from "../store/types.ts";
import type { Caller } from "./types.ts";

export type ApiConversation = components["schemas"]["Conversation"];

export function isOwner(record: ConversationRecord, caller: Caller): boolean {
  return record.ownerMemberId !== null && record.ownerMemberId === caller.memberId;
}

/** Same workspace and agent, and one of the three visibility rules. */
export function canSee(record: ConversationRecord, caller: Caller, agent: string): boolean {
  if (record.workspaceId !== caller.workspaceId || record.agent !== agent) return false;
  return isOwner(record, caller) || record.shared || record.ownerMemberId === null;
}

export function toApiConversation(record: ConversationRecord, caller: Caller): ApiConversation {
  return {
    id: record.id,
    title: record.title,
    channel: record.channel,
    shared: record.shared,
    is_owner: isOwner(record, caller),
    agent_session_id: record.agentSessionId,
    parent_conversation_id: record.parentConversationId,
    forked_at_turn_index: record.forkedAtTurnIndex,
    created_at: record.createdAt,
    updated_at: record.updatedAt,
    turn_count: record.turnCount,
  };
}
