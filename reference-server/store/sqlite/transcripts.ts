/**
 * A conversation's transcript (tables messages, events, compactions): read in keyset pages, written one
 * completed turn at a time (commitTurn, with the turn's pending row and session write in the same
 * transaction), copied for a fork.
 */
import type { SQLInputValue } from "node:sqlite";
import { pageParams } from "../row-page.ts";
import { compactionOf, eventOf, messageOf } from "../transcript-rows.ts";
import type { SessionHistory, TranscriptsPart, TurnWrite } from "../types.ts";
import type { SqliteDatabase } from "./database.ts";
import type { SqliteSessions } from "./sessions.ts";

export function sqliteTranscripts(database: SqliteDatabase, sessions: SqliteSessions): TranscriptsPart {
  const { statement, transaction } = database;
  const { historyCache, appendSession } = sessions;
  return {
    async listMessages(conversationId, page) {
      const rows = statement(
        `SELECT conversation_id, turn_index, seq, role, text, author_member_id, author_name, is_compact_summary, created_at
         FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
      ).all(conversationId, ...pageParams(page)) as Array<Record<string, SQLInputValue>>;
      return rows.map(messageOf);
    },

    async listEvents(conversationId, page) {
      const rows = statement(
        "SELECT conversation_id, turn_index, seq, event, created_at FROM events WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?",
      ).all(conversationId, ...pageParams(page)) as Array<Record<string, SQLInputValue>>;
      return rows.map(eventOf);
    },

    async commitTurn(write: TurnWrite) {
      const sessionId = write.session && "append" in write.session ? write.session.append.id : undefined;
      const previous =
        sessionId === undefined
          ? undefined
          : { history: historyCache.get(sessionId), chars: historyCache.chars(sessionId) };
      // Dropped first: a transaction that fails must not leave the cache ahead of the rows.
      if (sessionId !== undefined) historyCache.delete(sessionId);
      let cacheEntry: { history: SessionHistory; chars: number } | undefined;
      transaction(() => {
        const bumped = statement("UPDATE conversations SET updated_at = ?, turn_count = ? WHERE id = ?").run(
          write.at,
          write.turnIndex + 1,
          write.conversationId,
        );
        if (bumped.changes === 0) throw new Error(`commitTurn: no conversation ${write.conversationId}`);
        statement("DELETE FROM pending_turns WHERE conversation_id = ?").run(write.conversationId);
        let messageSeq = (
          statement("SELECT COALESCE(MAX(seq) + 1, 0) AS next FROM messages WHERE conversation_id = ?").get(
            write.conversationId,
          ) as { next: number }
        ).next;
        const insertMessage = statement(
          `INSERT INTO messages (conversation_id, seq, turn_index, role, text, author_member_id, author_name, is_compact_summary, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        );
        for (const message of write.messages) {
          insertMessage.run(
            write.conversationId,
            messageSeq++,
            write.turnIndex,
            message.role,
            message.text,
            message.authorMemberId,
            message.authorName,
            message.isCompactSummary ? 1 : 0,
            write.at,
          );
        }
        let eventSeq = (
          statement("SELECT COALESCE(MAX(seq) + 1, 0) AS next FROM events WHERE conversation_id = ?").get(
            write.conversationId,
          ) as { next: number }
        ).next;
        const insertEvent = statement(
          "INSERT INTO events (conversation_id, seq, turn_index, event, created_at) VALUES (?, ?, ?, ?, ?)",
        );
        for (const event of write.events) {
          insertEvent.run(write.conversationId, eventSeq++, write.turnIndex, JSON.stringify(event), write.at);
        }
        if (write.compaction) {
          statement(
            "INSERT INTO compactions (conversation_id, turn_index, summary, created_at) VALUES (?, ?, ?, ?)",
          ).run(write.conversationId, write.turnIndex, write.compaction.summary, write.at);
        }
        if (write.session && "append" in write.session) {
          cacheEntry = appendSession(
            write.session.append.id,
            write.session.append,
            write.turnIndex,
            write.at,
            previous,
          );
        } else if (write.session && "clearPointer" in write.session) {
          statement("UPDATE conversations SET agent_session_id = NULL WHERE id = ?").run(
            write.conversationId,
          );
        }
      });
      if (sessionId !== undefined && cacheEntry)
        historyCache.set(sessionId, cacheEntry.history, cacheEntry.chars);
    },

    async copyTurns(parentId, childId, uptoTurn) {
      transaction(() => {
        // Offsets keep seq unique should the child already hold messages (it normally holds none).
        const nextSeq = (table: "messages" | "events") =>
          (
            statement(`SELECT COALESCE(MAX(seq) + 1, 0) AS next FROM ${table} WHERE conversation_id = ?`).get(
              childId,
            ) as { next: number }
          ).next;
        statement(
          `INSERT INTO messages (conversation_id, seq, turn_index, role, text, author_member_id, author_name, is_compact_summary, created_at)
           SELECT ?, seq + ?, turn_index, role, text, author_member_id, author_name, is_compact_summary, created_at
           FROM messages WHERE conversation_id = ? AND turn_index < ? ORDER BY seq`,
        ).run(childId, nextSeq("messages"), parentId, uptoTurn);
        statement(
          `INSERT INTO events (conversation_id, seq, turn_index, event, created_at)
           SELECT ?, seq + ?, turn_index, event, created_at
           FROM events WHERE conversation_id = ? AND turn_index < ? ORDER BY seq`,
        ).run(childId, nextSeq("events"), parentId, uptoTurn);
        // The copied history includes any compaction summary message, so its last-compaction goes too.
        statement(
          `INSERT INTO compactions (conversation_id, turn_index, summary, created_at)
           SELECT ?, turn_index, summary, created_at FROM compactions
           WHERE conversation_id = ? AND turn_index < ? ORDER BY rowid`,
        ).run(childId, parentId, uptoTurn);
      });
    },

    async getLastCompaction(conversationId) {
      const row = statement(
        `SELECT conversation_id, turn_index, summary, created_at FROM compactions
         WHERE conversation_id = ? ORDER BY turn_index DESC, rowid DESC LIMIT 1`,
      ).get(conversationId) as Record<string, SQLInputValue> | undefined;
      return row ? compactionOf(row) : undefined;
    },
  };
}
