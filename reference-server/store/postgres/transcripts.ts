/**
 * A conversation's transcript (tables messages, events, compactions): read in keyset pages, written one
 * completed turn at a time (commitTurn: fenced by the turn's lease, with its pending row and session write in
 * the same transaction, under the conversation's row lock), copied for a fork.
 */
import type pg from "pg";
import { pageParams } from "../row-page.ts";
import { compactionOf, eventOf, messageOf } from "../transcript-rows.ts";
import { type TranscriptsPart, TurnLeaseLostError, type TurnWrite } from "../types.ts";
import { bytes, one, type Queryable, query } from "./queries.ts";
import type { PostgresSessions } from "./sessions.ts";
import { inTransaction } from "./transaction.ts";

export function postgresTranscripts(pool: pg.Pool, sessions: PostgresSessions): TranscriptsPart {
  const transaction = <T>(work: (client: pg.PoolClient) => Promise<T>) => inTransaction(pool, work);
  const { appendSession } = sessions;

  /** Next free seq of a conversation's messages or events (the caller holds the conversation's row lock). */
  async function nextSeq(
    db: Queryable,
    table: "messages" | "events",
    conversationId: string,
  ): Promise<number> {
    const row = await one<{ next: number }>(
      db,
      `SELECT COALESCE(MAX(seq) + 1, 0)::integer AS next FROM ${table} WHERE conversation_id = $1`,
      [conversationId],
    );
    return row?.next ?? 0;
  }

  return {
    async listMessages(conversationId, page) {
      const { rows } = await query(
        pool,
        `SELECT conversation_id, turn_index, seq, role, text, author_member_id, author_name, is_compact_summary, created_at
         FROM messages WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
        [conversationId, ...pageParams(page)],
      );
      return rows.map(messageOf);
    },

    async listEvents(conversationId, page) {
      const { rows } = await query(
        pool,
        "SELECT conversation_id, turn_index, seq, event, created_at FROM events WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        [conversationId, ...pageParams(page)],
      );
      return rows.map(eventOf);
    },

    async commitTurn(write: TurnWrite) {
      // Serialised before the transaction starts: a value that cannot be stored fails with nothing written.
      const events = write.events.map((event) => JSON.stringify(event));
      await transaction(async (db) => {
        if (write.fence !== undefined) {
          const lease = await one<{ token: string }>(
            db,
            "SELECT token FROM turn_leases WHERE conversation_id = $1 FOR UPDATE",
            [write.conversationId],
          );
          if (lease === undefined || Number(lease.token) !== write.fence) throw new TurnLeaseLostError();
        }
        // One round trip each (a turn's commit is most of its statements): the pending turn goes with the
        // row's update, the messages with the events, each numbered after the last under the row's lock.
        const bumped = await query(
          db,
          `WITH finished AS (DELETE FROM pending_turns WHERE conversation_id = $3)
           UPDATE conversations SET updated_at = $1, turn_count = $2 WHERE id = $3`,
          [write.at, write.turnIndex + 1, write.conversationId],
        );
        if (bumped.rowCount === 0) throw new Error(`commitTurn: no conversation ${write.conversationId}`);
        if (write.messages.length > 0 || events.length > 0) {
          await query(
            db,
            `WITH added_messages AS (
               INSERT INTO messages (conversation_id, seq, turn_index, role, text, author_member_id, author_name, is_compact_summary, created_at)
               SELECT $1, (SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE conversation_id = $1)::integer + ordinality::integer - 1,
                 $2, role, text, author_member_id, author_name, is_compact_summary, $3
               FROM unnest($4::text[], $5::bytea[], $6::text[], $7::text[], $8::boolean[]) WITH ORDINALITY
                 AS m (role, text, author_member_id, author_name, is_compact_summary, ordinality))
             INSERT INTO events (conversation_id, seq, turn_index, event, created_at)
             SELECT $1, (SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE conversation_id = $1)::integer + ordinality::integer - 1,
               $2, event, $3
             FROM unnest($9::text[]) WITH ORDINALITY AS e (event, ordinality)`,
            [
              write.conversationId,
              write.turnIndex,
              write.at,
              write.messages.map((m) => m.role),
              write.messages.map((m) => bytes(m.text)),
              write.messages.map((m) => m.authorMemberId),
              write.messages.map((m) => m.authorName),
              write.messages.map((m) => m.isCompactSummary),
              events,
            ],
          );
        }
        if (write.compaction) {
          await query(
            db,
            "INSERT INTO compactions (conversation_id, turn_index, summary, created_at) VALUES ($1, $2, $3, $4)",
            [write.conversationId, write.turnIndex, bytes(write.compaction.summary), write.at],
          );
        }
        if (write.session && "append" in write.session) {
          await appendSession(db, write.session.append.id, write.session.append, write.turnIndex, write.at);
        } else if (write.session && "clearPointer" in write.session) {
          await query(db, "UPDATE conversations SET agent_session_id = NULL WHERE id = $1", [
            write.conversationId,
          ]);
        }
      });
    },

    async copyTurns(parentId, childId, uptoTurn) {
      await transaction(async (db) => {
        const child = await query(db, "SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE", [childId]);
        if (child.rowCount === 0) throw new Error(`copyTurns: no conversation ${childId}`);
        await query(
          db,
          `INSERT INTO messages (conversation_id, seq, turn_index, role, text, author_member_id, author_name, is_compact_summary, created_at)
           SELECT $1, seq + $2, turn_index, role, text, author_member_id, author_name, is_compact_summary, created_at
           FROM messages WHERE conversation_id = $3 AND turn_index < $4 ORDER BY seq`,
          [childId, await nextSeq(db, "messages", childId), parentId, uptoTurn],
        );
        await query(
          db,
          `INSERT INTO events (conversation_id, seq, turn_index, event, created_at)
           SELECT $1, seq + $2, turn_index, event, created_at
           FROM events WHERE conversation_id = $3 AND turn_index < $4 ORDER BY seq`,
          [childId, await nextSeq(db, "events", childId), parentId, uptoTurn],
        );
        await query(
          db,
          `INSERT INTO compactions (conversation_id, turn_index, summary, created_at)
           SELECT $1, turn_index, summary, created_at FROM compactions
           WHERE conversation_id = $2 AND turn_index < $3 ORDER BY seq`,
          [childId, parentId, uptoTurn],
        );
      });
    },

    async getLastCompaction(conversationId) {
      const row = await one<Record<string, unknown>>(
        pool,
        `SELECT conversation_id, turn_index, summary, created_at FROM compactions
         WHERE conversation_id = $1 ORDER BY turn_index DESC, seq DESC LIMIT 1`,
        [conversationId],
      );
      return row ? compactionOf(row) : undefined;
    },
  };
}
