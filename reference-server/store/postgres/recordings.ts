/** Pending `agent_session_id` recordings with their due times on the database's clock (table pending_recordings). */
import type pg from "pg";
import type { ScheduledRecordings, SessionRecord } from "../types.ts";
import { one, query } from "./queries.ts";
import type { PostgresSessions } from "./sessions.ts";
import { inTransaction } from "./transaction.ts";

export function postgresScheduledRecordings(pool: pg.Pool, sessions: PostgresSessions): ScheduledRecordings {
  const transaction = <T>(work: (client: pg.PoolClient) => Promise<T>) => inTransaction(pool, work);
  const { insertSession } = sessions;
  return {
    async schedule(session, delayMs) {
      await query(
        pool,
        `INSERT INTO pending_recordings (conversation_id, session, due_at)
         VALUES ($1, $2, clock_timestamp() + $3 * interval '1 millisecond')
         ON CONFLICT (conversation_id) DO UPDATE SET session = EXCLUDED.session, due_at = EXCLUDED.due_at`,
        [session.conversationId, JSON.stringify(session), Math.max(0, Math.trunc(delayMs))],
      );
    },
    async cancel(conversationId) {
      await query(pool, "DELETE FROM pending_recordings WHERE conversation_id = $1", [conversationId]);
    },
    async get(conversationId) {
      const row = await one<{ session: string }>(
        pool,
        "SELECT session FROM pending_recordings WHERE conversation_id = $1",
        [conversationId],
      );
      return row ? (JSON.parse(row.session) as SessionRecord) : undefined;
    },
    async recordDue() {
      return transaction(async (db) => {
        // SKIP LOCKED: instances polling at once take different rows, and each row is recorded once.
        const { rows } = await query<{ session: string }>(
          db,
          `DELETE FROM pending_recordings WHERE conversation_id IN (
             SELECT conversation_id FROM pending_recordings WHERE due_at <= clock_timestamp()
             ORDER BY due_at LIMIT 100 FOR UPDATE SKIP LOCKED)
           RETURNING session`,
        );
        for (const row of rows) {
          const record = JSON.parse(row.session) as SessionRecord;
          const pointed = await query(db, "UPDATE conversations SET agent_session_id = $1 WHERE id = $2", [
            record.id,
            record.conversationId,
          ]);
          if ((pointed.rowCount ?? 0) > 0) await insertSession(db, record);
        }
        return rows.length;
      });
    },
  };
}
