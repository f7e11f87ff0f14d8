/**
 * StoredBytes over SQLite: octet_length reads a value's size from its record header, not the value itself.
 * node:sqlite runs synchronously, so a workspace is summed a batch of conversations at a time, giving the event
 * loop back between batches (2,000 conversations of 5 turns took ~100 ms in one statement; a batch takes a few).
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { StoredBytes } from "../stored-bytes.ts";

const BATCH = 100;

/** The bytes of the conversations that `scope` (a condition on `c`, the conversations table) selects. */
function bytesSql(scope: string): string {
  return `SELECT
    (SELECT COALESCE(SUM(octet_length(m.text)), 0) FROM conversations c JOIN messages m ON m.conversation_id = c.id WHERE ${scope})
  + (SELECT COALESCE(SUM(octet_length(e.event)), 0) FROM conversations c JOIN events e ON e.conversation_id = c.id WHERE ${scope})
  + (SELECT COALESCE(SUM(octet_length(k.summary)), 0) FROM conversations c JOIN compactions k ON k.conversation_id = c.id WHERE ${scope})
  + (SELECT COALESCE(SUM(octet_length(p.text)), 0) FROM conversations c JOIN pending_turns p ON p.conversation_id = c.id WHERE ${scope})
  + (SELECT COALESCE(SUM(octet_length(s.context)), 0) FROM conversations c JOIN sessions s ON s.conversation_id = c.id WHERE ${scope})
  + (SELECT COALESCE(SUM(octet_length(sm.message)), 0) FROM conversations c JOIN sessions s ON s.conversation_id = c.id
       JOIN session_messages sm ON sm.session_id = s.id WHERE ${scope}) AS bytes`;
}

/** The number of subqueries in bytesSql: each takes the scope's parameters once. */
const SUBQUERIES = 6;

export function sqliteStoredBytes(db: DatabaseSync): StoredBytes {
  const ids = db.prepare("SELECT id FROM conversations WHERE workspace_id = ?");
  const bySize = new Map<number, StatementSync>();
  const sumOf = (batch: string[]): number => {
    let statement = bySize.get(batch.length);
    if (statement === undefined) {
      statement = db.prepare(bytesSql(`c.id IN (${batch.map(() => "?").join(", ")})`));
      bySize.set(batch.length, statement);
    }
    const params = Array.from({ length: SUBQUERIES }, () => batch).flat();
    return Number((statement.get(...params) as { bytes: number }).bytes);
  };
  return {
    async ofWorkspace(workspaceId) {
      const conversationIds = (ids.all(workspaceId) as Array<{ id: string }>).map((r) => r.id);
      let bytes = 0;
      for (let start = 0; start < conversationIds.length; start += BATCH) {
        if (start > 0) await new Promise((resolve) => setImmediate(resolve));
        bytes += sumOf(conversationIds.slice(start, start + BATCH));
      }
      return { bytes, conversationIds };
    },
    async ofConversation(conversationId) {
      return sumOf([conversationId]);
    },
  };
}
