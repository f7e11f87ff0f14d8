/** Test fixtures of the store: a conversation record with every field at a plain default. */
import { newConversation } from "./new-conversation.ts";
import type { ConversationRecord } from "./types.ts";

/** A private interactive conversation `c1` of alice on demo-agent, with `overrides` on top. */
export function conversationRecord(overrides: Partial<ConversationRecord> = {}): ConversationRecord {
  return newConversation({
    id: "c1",
    workspaceId: "demo",
    agent: "demo-agent",
    ownerMemberId: "alice",
    title: "Hello",
    createdAt: "2026-01-01T00:00:00.000Z",
    ...overrides,
  });
}
