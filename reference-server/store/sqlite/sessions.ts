/**
 * Sessions and their Messages histories (tables sessions, session_messages): one row per message, so a turn
 * writes only the messages it added; parsed histories kept in memory (HistoryCache), since one process owns
 * the file.
 */
import type { SQLInputValue } from "node:sqlite";
import { HistoryCache } from "../history-cache.ts";
import {
  isSessionHistory,
  type SessionAppend,
  type SessionFork,
  type SessionHistory,
  type SessionRecord,
  type SessionsPart,
} from "../types.ts";
import type { SqliteDatabase } from "./database.ts";

export interface SqliteSessions {
  /** The Store's session methods. */
  readonly methods: SessionsPart;
  readonly historyCache: HistoryCache;
  /** A turn's session write, inside the turn's transaction; what to cache once it commits (undefined: drop). */
  appendSession(
    sessionId: string,
    append: SessionAppend,
    turnIndex: number,
    at: string,
    previous: { history: SessionHistory | undefined; chars: number | undefined } | undefined,
  ): { history: SessionHistory; chars: number } | undefined;
  /** Removes the conversation's sessions, inside the delete's transaction. */
  deleteSessionsOf(conversationId: string): void;
}

export function sqliteSessions(database: SqliteDatabase, historyCacheChars: number): SqliteSessions {
  const { statement, transaction } = database;
  const historyCache = new HistoryCache(historyCacheChars);

  function insertSession(record: SessionRecord): void {
    const history = isSessionHistory(record.context) ? record.context : undefined;
    statement(
      "INSERT INTO sessions (id, conversation_id, context, created_at, updated_at, history_tokens, history_length) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ).run(
      record.id,
      record.conversationId,
      history ? "null" : JSON.stringify(record.context ?? null),
      record.createdAt,
      record.updatedAt,
      history ? history.tokens : null,
      history ? history.messages.length : null,
    );
    // A new session is read back from its rows at its first resume (an insert fails on a taken id).
    if (history) insertSessionMessages(record.id, history.messages, 0, 0, record.turnIndex ?? null);
  }

  /**
   * Inserts messages[from..] as rows seq, seq + 1, ... written by turn `turnIndex`; returns the characters of
   * JSON written (the cache's measure).
   */
  function insertSessionMessages(
    sessionId: string,
    messages: unknown[],
    from: number,
    seq: number,
    turnIndex: number | null,
  ): number {
    const insert = statement(
      "INSERT INTO session_messages (session_id, seq, message, turn_index) VALUES (?, ?, ?, ?)",
    );
    let chars = 0;
    for (let index = from; index < messages.length; index++) {
      const json = JSON.stringify(messages[index]);
      chars += json.length + 1;
      insert.run(sessionId, seq++, json, turnIndex);
    }
    return chars;
  }

  /**
   * A turn's session write. Messages before `kept` are the ones the turn read and left alone: only the rest
   * is written, so a turn costs the same at turn 700 as at turn 1. Current rows past `kept` (a compaction,
   * a trailing user message the prompt joined) are marked replaced by this turn, not deleted, so a fork can
   * still read the history as it stood before. A session whose history is still an earlier version's
   * `context` value is written whole, once.
   */
  /** Returns what to cache once the transaction commits (undefined: drop the entry). */
  function appendSession(
    sessionId: string,
    append: SessionAppend,
    turnIndex: number,
    at: string,
    previous: { history: SessionHistory | undefined; chars: number | undefined } | undefined,
  ): { history: SessionHistory; chars: number } | undefined {
    const row = statement("SELECT history_tokens, history_length FROM sessions WHERE id = ?").get(
      sessionId,
    ) as { history_tokens: number | null; history_length: number | null } | undefined;
    if (!row) throw new Error(`commitTurn: no session ${sessionId}`);
    const { messages, tokens } = append.history;
    // Sessions written before migration 6 have no stored length: their rows are all current.
    const length =
      row.history_tokens === null
        ? 0
        : (row.history_length ??
          (
            statement(
              "SELECT count(*) AS n FROM session_messages WHERE session_id = ? AND replaced_at_turn IS NULL",
            ).get(sessionId) as { n: number }
          ).n);
    const from = Math.max(0, Math.min(append.kept, messages.length, length));
    if (length > from)
      // The newest current rows, walked from the end: a prompt joined to a trailing message touches one.
      statement(
        `UPDATE session_messages SET replaced_at_turn = ? WHERE session_id = ? AND seq IN (
           SELECT seq FROM session_messages WHERE session_id = ? AND replaced_at_turn IS NULL
           ORDER BY seq DESC LIMIT ?)`,
      ).run(turnIndex, sessionId, sessionId, length - from);
    const next = (
      statement("SELECT COALESCE(MAX(seq) + 1, 0) AS next FROM session_messages WHERE session_id = ?").get(
        sessionId,
      ) as { next: number }
    ).next;
    const added = insertSessionMessages(sessionId, messages, from, next, turnIndex);
    statement(
      "UPDATE sessions SET context = 'null', history_tokens = ?, history_length = ?, updated_at = ? WHERE id = ?",
    ).run(tokens, messages.length, at, sessionId);
    if (from === 0) return { history: { messages, tokens }, chars: added };
    // An append to the history the cache holds (not to a trailing message the turn replaced).
    const cached = previous?.history;
    const chars = previous?.chars;
    if (cached && chars !== undefined && cached.messages.length === from && from === length)
      return { history: { messages, tokens }, chars: chars + added };
    return undefined;
  }

  function readSessionHistory(sessionId: string, tokens: number): SessionHistory {
    const cached = historyCache.get(sessionId);
    if (cached) return cached;
    // One string from SQLite and one parse: a row object and a parse per message cost about half again.
    const joined =
      (
        statement(
          "SELECT group_concat(message, ',' ORDER BY seq) AS joined FROM session_messages WHERE session_id = ? AND replaced_at_turn IS NULL",
        ).get(sessionId) as { joined: string | null }
      ).joined ?? "";
    const history = { messages: JSON.parse(`[${joined}]`) as unknown[], tokens };
    historyCache.set(sessionId, history, joined.length + 1);
    return history;
  }

  /**
   * The parent's history as it stood after turn `uptoTurn - 1`: in the session that holds the newest turn
   * before it, the rows written before `uptoTurn` and not replaced before it. Copied as stored, in SQL.
   */
  function forkSession(fork: SessionFork): boolean {
    const { parentConversationId, uptoTurn, session } = fork;
    return transaction(() => {
      const source = statement(
        `SELECT m.session_id AS id, s.history_tokens AS tokens FROM session_messages m
         JOIN sessions s ON s.id = m.session_id
         WHERE s.conversation_id = ? AND m.turn_index < ?
         ORDER BY m.turn_index DESC LIMIT 1`,
      ).get(parentConversationId, uptoTurn) as { id: string; tokens: number | null } | undefined;
      if (!source || source.tokens === null) return false;
      const asOf = "turn_index < ? AND (replaced_at_turn IS NULL OR replaced_at_turn >= ?)";
      const size = statement(
        `SELECT count(*) FILTER (WHERE ${asOf}) AS n,
                COALESCE(sum(length(message)) FILTER (WHERE ${asOf}), 0) AS chars,
                COALESCE(sum(length(message)) FILTER (WHERE replaced_at_turn IS NULL), 0) AS current
         FROM session_messages WHERE session_id = ?`,
      ).get(uptoTurn, uptoTurn, uptoTurn, uptoTurn, source.id) as {
        n: number;
        chars: number;
        current: number;
      };
      // The upstream measured the whole current history; a prefix of it is taken in proportion to its size.
      const tokens =
        size.current > 0
          ? Math.round((source.tokens * size.chars) / size.current)
          : Math.ceil(size.chars / 4);
      statement(
        "INSERT INTO sessions (id, conversation_id, context, created_at, updated_at, history_tokens, history_length) VALUES (?, ?, 'null', ?, ?, ?, ?)",
      ).run(session.id, session.conversationId, session.createdAt, session.updatedAt, tokens, size.n);
      // Rows replaced before uptoTurn go too, still marked: a fork of the child can then go back as far.
      statement(
        `INSERT INTO session_messages (session_id, seq, message, turn_index, replaced_at_turn)
         SELECT ?, seq, message, turn_index, CASE WHEN replaced_at_turn < ? THEN replaced_at_turn END
         FROM session_messages WHERE session_id = ? AND turn_index < ? ORDER BY seq`,
      ).run(session.id, uptoTurn, source.id, uptoTurn);
      return true;
    });
  }

  return {
    historyCache,
    appendSession,

    deleteSessionsOf(conversationId) {
      for (const row of statement("SELECT id FROM sessions WHERE conversation_id = ?").all(
        conversationId,
      ) as Array<{
        id: string;
      }>)
        historyCache.delete(row.id);
      statement(
        "DELETE FROM session_messages WHERE session_id IN (SELECT id FROM sessions WHERE conversation_id = ?)",
      ).run(conversationId);
      statement("DELETE FROM sessions WHERE conversation_id = ?").run(conversationId);
    },

    methods: {
      async createSession(record: SessionRecord) {
        insertSession(record);
      },

      async forkSession(fork) {
        return forkSession(fork);
      },

      async getSession(id) {
        const row = statement(
          "SELECT id, conversation_id, context, created_at, updated_at, history_tokens FROM sessions WHERE id = ?",
        ).get(id) as Record<string, SQLInputValue> | undefined;
        if (!row) return undefined;
        return {
          id: row.id as string,
          conversationId: row.conversation_id as string,
          context:
            row.history_tokens === null
              ? JSON.parse(row.context as string)
              : readSessionHistory(id, row.history_tokens as number),
          createdAt: row.created_at as string,
          updatedAt: row.updated_at as string,
        };
      },

      async hasSession(id) {
        return statement("SELECT 1 FROM sessions WHERE id = ?").get(id) !== undefined;
      },

      async updateSessionContext(id, context, at) {
        historyCache.delete(id);
        transaction(() => {
          statement("DELETE FROM session_messages WHERE session_id = ?").run(id);
          const history = isSessionHistory(context) ? context : undefined;
          const updated = statement(
            "UPDATE sessions SET context = ?, history_tokens = ?, history_length = ?, updated_at = ? WHERE id = ?",
          ).run(
            history ? "null" : JSON.stringify(context ?? null),
            history ? history.tokens : null,
            history ? history.messages.length : null,
            at,
            id,
          );
          if (history && updated.changes > 0) insertSessionMessages(id, history.messages, 0, 0, null);
        });
      },

      async recordSession(record) {
        transaction(() => {
          const pointed = statement("UPDATE conversations SET agent_session_id = ? WHERE id = ?").run(
            record.id,
            record.conversationId,
          );
          if (pointed.changes === 0) return;
          insertSession(record);
        });
      },
    },
  };
}
