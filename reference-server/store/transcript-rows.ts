/**
 * A transcript's rows as both engines store them (messages, events, compactions, pending turns), and their
 * mapping to the records: the one place that maps these columns. Free text comes back as a string from SQLite
 * and as UTF-8 bytes from PostgreSQL (whose text type refuses U+0000; postgres/migrations.ts), so it is read
 * through `textOf`.
 */
import type { CompactionRecord, EventRecord, MessageRecord, PendingTurn } from "./types.ts";

type Row = Record<string, unknown>;

/** A text column's value: the string itself, or the UTF-8 bytes it is stored as. */
export function textOf(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString("utf8") : String(value);
}

/** The columns a message is read from. */
export const MESSAGE_COLUMNS =
  "conversation_id, turn_index, seq, role, text, author_member_id, author_name, is_compact_summary, created_at";

export function messageOf(row: Row): MessageRecord {
  return {
    conversationId: row.conversation_id as string,
    turnIndex: row.turn_index as number,
    seq: row.seq as number,
    role: row.role as MessageRecord["role"],
    text: textOf(row.text),
    authorMemberId: row.author_member_id as string | null,
    authorName: row.author_name as string | null,
    // 0/1 in SQLite, a boolean in PostgreSQL.
    isCompactSummary: row.is_compact_summary === 1 || row.is_compact_summary === true,
    createdAt: row.created_at as string,
  };
}

export function eventOf(row: Row): EventRecord {
  return {
    conversationId: row.conversation_id as string,
    turnIndex: row.turn_index as number,
    seq: row.seq as number,
    event: JSON.parse(row.event as string) as Record<string, unknown>,
    createdAt: row.created_at as string,
  };
}

export function compactionOf(row: Row): CompactionRecord {
  return {
    conversationId: row.conversation_id as string,
    turnIndex: row.turn_index as number,
    summary: textOf(row.summary),
    createdAt: row.created_at as string,
  };
}

/** The columns a pending turn is read from, in the order `pendingTurnOf` maps them. */
export const PENDING_TURN_COLUMNS =
  "conversation_id, turn_index, text, author_member_id, author_name, started_at";

export function pendingTurnOf(row: Row): PendingTurn {
  return {
    conversationId: row.conversation_id as string,
    turnIndex: row.turn_index as number,
    text: textOf(row.text),
    authorMemberId: row.author_member_id as string | null,
    authorName: row.author_name as string | null,
    startedAt: row.started_at as string,
  };
}
