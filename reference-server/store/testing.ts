/** Test fixtures of the store: a conversation record with every field at a plain default. */
import type { ConversationRecord } from "./types.ts";

/** A private interactive conversation `c1` of alice on demo-agent, with `overrides` on top. */
export function conversationRecord(overrides: Partial<ConversationRecord> = {}): ConversationRecord {
  return {
    id: "c1",
    workspaceId: "demo",
    agent: "demo-agent",
    ownerMemberId: "alice",
    channel: "INTERACTIVE",
    channelId: null,
    notebookPath: null,
    automation: null,
    title: "Hello",
    shared: false,
    agentSessionId: null,
    parentConversationId: null,
    forkedAtTurnIndex: null,
    defaultModel: null,
    defaultAutomation: null,
    turnModel: null,
    turnAutomation: null,
    hidden: false,
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
    turnCount: 0,
    ...overrides,
  };
}
