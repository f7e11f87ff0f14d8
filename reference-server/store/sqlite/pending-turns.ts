/** Turns acknowledged and not yet committed (table pending_turns). */
import type { SQLInputValue } from "node:sqlite";
import { PENDING_TURN_COLUMNS, pendingTurnOf } from "../transcript-rows.ts";
import type { PendingTurn, PendingTurnsPart } from "../types.ts";
import type { SqliteDatabase } from "./database.ts";

export function sqlitePendingTurns(database: SqliteDatabase): PendingTurnsPart {
  const { statement } = database;
  return {
    async beginTurn(pending: PendingTurn) {
      statement(
        `INSERT OR REPLACE INTO pending_turns (conversation_id, turn_index, text, author_member_id, author_name, started_at)
         VALUES (?, ?, ?, ?, ?, ?)`,
      ).run(
        pending.conversationId,
        pending.turnIndex,
        pending.text,
        pending.authorMemberId,
        pending.authorName,
        pending.startedAt,
      );
    },

    async listPendingTurns() {
      const rows = statement(
        `SELECT ${PENDING_TURN_COLUMNS} FROM pending_turns ORDER BY started_at, conversation_id`,
      ).all() as Array<Record<string, SQLInputValue>>;
      return rows.map(pendingTurnOf);
    },

    async getPendingTurn(conversationId) {
      const row = statement(
        `SELECT ${PENDING_TURN_COLUMNS} FROM pending_turns WHERE conversation_id = ?`,
      ).get(conversationId) as Record<string, SQLInputValue> | undefined;
      return row ? pendingTurnOf(row) : undefined;
    },
  };
}
