/** StoredBytes over PostgreSQL: pg_column_size, the size each value takes as stored (compressed or not). */
import type pg from "pg";
import type { StoredBytes } from "../stored-bytes.ts";

function bytesSql(scope: string): string {
  return `SELECT
    (SELECT COALESCE(SUM(pg_column_size(m.text)), 0) FROM conversations c JOIN messages m ON m.conversation_id = c.id WHERE ${scope})
  + (SELECT COALESCE(SUM(pg_column_size(e.event)), 0) FROM conversations c JOIN events e ON e.conversation_id = c.id WHERE ${scope})
  + (SELECT COALESCE(SUM(pg_column_size(k.summary)), 0) FROM conversations c JOIN compactions k ON k.conversation_id = c.id WHERE ${scope})
  + (SELECT COALESCE(SUM(pg_column_size(p.text)), 0) FROM conversations c JOIN pending_turns p ON p.conversation_id = c.id WHERE ${scope})
  + (SELECT COALESCE(SUM(pg_column_size(s.context)), 0) FROM conversations c JOIN sessions s ON s.conversation_id = c.id WHERE ${scope})
  + (SELECT COALESCE(SUM(pg_column_size(sm.message)), 0) FROM conversations c JOIN sessions s ON s.conversation_id = c.id
       JOIN session_messages sm ON sm.session_id = s.id WHERE ${scope}) AS bytes`;
}

const OF_WORKSPACE = bytesSql("c.workspace_id = $1");
const OF_CONVERSATION = bytesSql("c.id = $1");

export function postgresStoredBytes(pool: pg.Pool): StoredBytes {
  return {
    async ofWorkspace(workspaceId) {
      const [sum, ids] = await Promise.all([
        pool.query<{ bytes: string }>(OF_WORKSPACE, [workspaceId]),
        pool.query<{ id: string }>("SELECT id FROM conversations WHERE workspace_id = $1", [workspaceId]),
      ]);
      return { bytes: Number(sum.rows[0]?.bytes ?? 0), conversationIds: ids.rows.map((r) => r.id) };
    },
    async ofConversation(conversationId) {
      const { rows } = await pool.query<{ bytes: string }>(OF_CONVERSATION, [conversationId]);
      return Number(rows[0]?.bytes ?? 0);
    },
  };
}
