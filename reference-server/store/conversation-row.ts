/**
 * A conversation's row as both engines store it, and its mapping to ConversationRecord: the one place that
 * maps the record's field names to the columns.
 */
import { textOf } from "./transcript-rows.ts";
import type { Channel, ConversationRecord } from "./types.ts";

/** Row shapes as the drivers return them (booleans are 0/1 in SQLite, booleans in PostgreSQL). */
export interface ConversationRow {
  id: string;
  workspace_id: string;
  agent: string;
  owner_member_id: string | null;
  channel: string;
  channel_id: string | null;
  notebook_path: string | null;
  automation: string | null;
  /** Text in SQLite, UTF-8 bytes in PostgreSQL (postgres/migrations.ts says why). */
  title: string | Buffer;
  shared: number | boolean;
  agent_session_id: string | null;
  parent_conversation_id: string | null;
  forked_at_turn_index: number | null;
  default_model: string | null;
  default_automation: string | null;
  turn_model: string | null;
  turn_automation: string | null;
  hidden: number | boolean;
  created_at: string;
  updated_at: string;
  turn_count: number;
  /** bigint: PostgreSQL's driver returns it as a string. */
  generation: number | string;
}

/** ConversationRecord field → column. */
export const conversationColumns = {
  id: "id",
  workspaceId: "workspace_id",
  agent: "agent",
  ownerMemberId: "owner_member_id",
  channel: "channel",
  channelId: "channel_id",
  notebookPath: "notebook_path",
  automation: "automation",
  title: "title",
  shared: "shared",
  agentSessionId: "agent_session_id",
  parentConversationId: "parent_conversation_id",
  forkedAtTurnIndex: "forked_at_turn_index",
  defaultModel: "default_model",
  defaultAutomation: "default_automation",
  turnModel: "turn_model",
  turnAutomation: "turn_automation",
  hidden: "hidden",
  createdAt: "created_at",
  updatedAt: "updated_at",
  turnCount: "turn_count",
  generation: "generation",
} as const satisfies Record<keyof ConversationRecord, keyof ConversationRow>;

export type ConversationField = keyof typeof conversationColumns;

/** The fields an insert writes: all but the generation, which the database assigns. */
export const conversationFields = (Object.keys(conversationColumns) as ConversationField[]).filter(
  (field) => field !== "generation",
);

/** The fields a patch sets (defined, and not the id), in the patch's order. */
export function patchedFields(patch: Partial<Omit<ConversationRecord, "id">>): ConversationField[] {
  return (Object.keys(patch) as ConversationField[]).filter(
    (f) =>
      f !== "id" &&
      f !== "generation" &&
      f in conversationColumns &&
      patch[f as keyof typeof patch] !== undefined,
  );
}

export function rowToConversation(row: ConversationRow): ConversationRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    agent: row.agent,
    ownerMemberId: row.owner_member_id,
    channel: row.channel as Channel,
    channelId: row.channel_id,
    notebookPath: row.notebook_path,
    automation: row.automation,
    title: textOf(row.title),
    shared: row.shared === 1 || row.shared === true,
    agentSessionId: row.agent_session_id,
    parentConversationId: row.parent_conversation_id,
    forkedAtTurnIndex: row.forked_at_turn_index,
    defaultModel: row.default_model,
    defaultAutomation: row.default_automation,
    turnModel: row.turn_model,
    turnAutomation: row.turn_automation,
    hidden: row.hidden === 1 || row.hidden === true,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    turnCount: row.turn_count,
    generation: Number(row.generation),
  };
}
