/**
 * Sessions and their Messages histories (tables sessions, session_messages). No history cache: another
 * instance may have written a session since this one read it.
 */
import type pg from "pg";
import {
  isSessionHistory,
  type SessionAppend,
  type SessionFork,
  type SessionHistory,
  type SessionRecord,
  type SessionsPart,
} from "../types.ts";
import { one, type Queryable, query } from "./queries.ts";
import { inTransaction } from "./transaction.ts";

export interface PostgresSessions {
  /** The Store's session methods. */
  readonly methods: SessionsPart;
  insertSession(db: Queryable, record: SessionRecord): Promise<void>;
  /** A turn's session write, inside the turn's transaction. */
  appendSession(
    db: pg.PoolClient,
    sessionId: string,
    append: SessionAppend,
    turnIndex: number,
    at: string,
  ): Promise<void>;
}

export function postgresSessions(pool: pg.Pool): PostgresSessions {
  const transaction = <T>(work: (client: pg.PoolClient) => Promise<T>) => inTransaction(pool, work);

  async function insertSession(db: Queryable, record: SessionRecord): Promise<void> {
    const history = isSessionHistory(record.context) ? record.context : undefined;
    await query(
      db,
      "INSERT INTO sessions (id, conversation_id, context, created_at, updated_at, history_tokens, history_length) VALUES ($1, $2, $3, $4, $5, $6, $7)",
      [
        record.id,
        record.conversationId,
        history ? "null" : JSON.stringify(record.context ?? null),
        record.createdAt,
        record.updatedAt,
        history ? history.tokens : null,
        history ? history.messages.length : null,
      ],
    );
    if (history) await insertSessionMessages(db, record.id, history.messages, 0, 0, record.turnIndex ?? null);
  }

  /**
   * Inserts messages[from..] as rows seq, seq + 1, ... written by turn `turnIndex`, in one statement; `seq`
   * null: after the session's last row (the caller holds the session's row lock).
   */
  async function insertSessionMessages(
    db: Queryable,
    sessionId: string,
    messages: unknown[],
    from: number,
    seq: number | null,
    turnIndex: number | null,
  ): Promise<void> {
    if (from >= messages.length) return;
    const json = messages.slice(from).map((message) => JSON.stringify(message));
    await query(
      db,
      `INSERT INTO session_messages (session_id, seq, message, turn_index)
       SELECT $1, COALESCE($2::integer, (SELECT COALESCE(MAX(seq) + 1, 0) FROM session_messages WHERE session_id = $1)::integer)
         + ordinality::integer - 1, message, $4
       FROM unnest($3::text[]) WITH ORDINALITY AS m (message, ordinality)`,
      [sessionId, seq, json, turnIndex],
    );
  }

  /** A turn's session write; ../sqlite/sessions.ts (appendSession) explains `kept` and the replaced rows. */
  async function appendSession(
    db: pg.PoolClient,
    sessionId: string,
    append: SessionAppend,
    turnIndex: number,
    at: string,
  ): Promise<void> {
    const row = await one<{ history_tokens: number | null; history_length: number | null }>(
      db,
      "SELECT history_tokens, history_length FROM sessions WHERE id = $1 FOR UPDATE",
      [sessionId],
    );
    if (!row) throw new Error(`commitTurn: no session ${sessionId}`);
    const { messages, tokens } = append.history;
    const length =
      row.history_tokens === null
        ? 0
        : (row.history_length ??
          (
            (await one<{ n: number }>(
              db,
              "SELECT count(*)::integer AS n FROM session_messages WHERE session_id = $1 AND replaced_at_turn IS NULL",
              [sessionId],
            )) as { n: number }
          ).n);
    const from = Math.max(0, Math.min(append.kept, messages.length, length));
    if (length > from)
      await query(
        db,
        `UPDATE session_messages SET replaced_at_turn = $1 WHERE session_id = $2 AND seq IN (
           SELECT seq FROM session_messages WHERE session_id = $2 AND replaced_at_turn IS NULL
           ORDER BY seq DESC LIMIT $3)`,
        [turnIndex, sessionId, length - from],
      );
    await insertSessionMessages(db, sessionId, messages, from, null, turnIndex);
    await query(
      db,
      "UPDATE sessions SET context = 'null', history_tokens = $1, history_length = $2, updated_at = $3 WHERE id = $4",
      [tokens, messages.length, at, sessionId],
    );
  }

  async function readSessionHistory(sessionId: string, tokens: number): Promise<SessionHistory> {
    // One string from the server and one parse, as in ../sqlite/sessions.ts.
    const row = await one<{ joined: string | null }>(
      pool,
      "SELECT string_agg(message, ',' ORDER BY seq) AS joined FROM session_messages WHERE session_id = $1 AND replaced_at_turn IS NULL",
      [sessionId],
    );
    return { messages: JSON.parse(`[${row?.joined ?? ""}]`) as unknown[], tokens };
  }

  return {
    insertSession,
    appendSession,
    methods: {
      async createSession(record) {
        await insertSession(pool, record);
      },

      async forkSession(fork: SessionFork) {
        const { parentConversationId, uptoTurn, session } = fork;
        return transaction(async (db) => {
          const source = await one<{ id: string; tokens: number | null }>(
            db,
            `SELECT m.session_id AS id, s.history_tokens AS tokens FROM session_messages m
             JOIN sessions s ON s.id = m.session_id
             WHERE s.conversation_id = $1 AND m.turn_index < $2
             ORDER BY m.turn_index DESC LIMIT 1`,
            [parentConversationId, uptoTurn],
          );
          if (!source || source.tokens === null) return false;
          const asOf = "turn_index < $1 AND (replaced_at_turn IS NULL OR replaced_at_turn >= $1)";
          const size = (await one<{ n: number; chars: number; current: number }>(
            db,
            `SELECT (count(*) FILTER (WHERE ${asOf}))::integer AS n,
                    COALESCE(sum(length(message)) FILTER (WHERE ${asOf}), 0)::float8 AS chars,
                    COALESCE(sum(length(message)) FILTER (WHERE replaced_at_turn IS NULL), 0)::float8 AS current
             FROM session_messages WHERE session_id = $2`,
            [uptoTurn, source.id],
          )) as { n: number; chars: number; current: number };
          const tokens =
            size.current > 0
              ? Math.round((source.tokens * size.chars) / size.current)
              : Math.ceil(size.chars / 4);
          await query(
            db,
            "INSERT INTO sessions (id, conversation_id, context, created_at, updated_at, history_tokens, history_length) VALUES ($1, $2, 'null', $3, $4, $5, $6)",
            [session.id, session.conversationId, session.createdAt, session.updatedAt, tokens, size.n],
          );
          await query(
            db,
            `INSERT INTO session_messages (session_id, seq, message, turn_index, replaced_at_turn)
             SELECT $1, seq, message, turn_index, CASE WHEN replaced_at_turn < $2 THEN replaced_at_turn END
             FROM session_messages WHERE session_id = $3 AND turn_index < $2 ORDER BY seq`,
            [session.id, uptoTurn, source.id],
          );
          return true;
        });
      },

      async getSession(id) {
        const row = await one<Record<string, unknown>>(
          pool,
          "SELECT id, conversation_id, context, created_at, updated_at, history_tokens FROM sessions WHERE id = $1",
          [id],
        );
        if (!row) return undefined;
        return {
          id: row.id as string,
          conversationId: row.conversation_id as string,
          context:
            row.history_tokens === null
              ? JSON.parse(row.context as string)
              : await readSessionHistory(id, row.history_tokens as number),
          createdAt: row.created_at as string,
          updatedAt: row.updated_at as string,
        };
      },

      async hasSession(id) {
        return (await one(pool, "SELECT 1 FROM sessions WHERE id = $1", [id])) !== undefined;
      },

      async updateSessionContext(id, context, at) {
        const history = isSessionHistory(context) ? context : undefined;
        const serialised = history ? "null" : JSON.stringify(context ?? null);
        await transaction(async (db) => {
          await query(db, "DELETE FROM session_messages WHERE session_id = $1", [id]);
          const updated = await query(
            db,
            "UPDATE sessions SET context = $1, history_tokens = $2, history_length = $3, updated_at = $4 WHERE id = $5",
            [serialised, history ? history.tokens : null, history ? history.messages.length : null, at, id],
          );
          if (history && (updated.rowCount ?? 0) > 0)
            await insertSessionMessages(db, id, history.messages, 0, 0, null);
        });
      },

      async recordSession(record) {
        await transaction(async (db) => {
          const pointed = await query(db, "UPDATE conversations SET agent_session_id = $1 WHERE id = $2", [
            record.id,
            record.conversationId,
          ]);
          if (pointed.rowCount === 0) return;
          await insertSession(db, record);
        });
      },
    },
  };
}
