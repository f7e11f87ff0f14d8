/** Turns acknowledged and not yet committed (table pending_turns). */
import type pg from "pg";
import { PENDING_TURN_COLUMNS, pendingTurnOf } from "../transcript-rows.ts";
import type { PendingTurn, PendingTurnsPart } from "../types.ts";
import { bytes, one, query } from "./queries.ts";

export function postgresPendingTurns(pool: pg.Pool): PendingTurnsPart {
  return {
    async beginTurn(pending: PendingTurn) {
      await query(
        pool,
        `INSERT INTO pending_turns (conversation_id, turn_index, text, author_member_id, author_name, started_at)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (conversation_id) DO UPDATE SET turn_index = EXCLUDED.turn_index, text = EXCLUDED.text,
           author_member_id = EXCLUDED.author_member_id, author_name = EXCLUDED.author_name,
           started_at = EXCLUDED.started_at`,
        [
          pending.conversationId,
          pending.turnIndex,
          bytes(pending.text),
          pending.authorMemberId,
          pending.authorName,
          pending.startedAt,
        ],
      );
    },

    async listPendingTurns() {
      const { rows } = await query(
        pool,
        `SELECT ${PENDING_TURN_COLUMNS} FROM pending_turns ORDER BY started_at, conversation_id`,
      );
      return rows.map(pendingTurnOf);
    },

    async getPendingTurn(conversationId) {
      const row = await one<Record<string, unknown>>(
        pool,
        `SELECT ${PENDING_TURN_COLUMNS} FROM pending_turns WHERE conversation_id = $1`,
        [conversationId],
      );
      return row ? pendingTurnOf(row) : undefined;
    },
  };
}
