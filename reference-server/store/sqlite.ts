/**
 * The Store over node:sqlite (embedded SQLite, WAL). One connection per process; every call runs to its end
 * synchronously underneath its promise, so a turn's writes never interleave with another's inside a
 * transaction.
 */
import type { SQLInputValue, StatementSync } from "node:sqlite";
import {
  type ConversationRow,
  conversationColumns,
  conversationFields,
  patchedFields,
  rowToConversation,
} from "./conversation-row.ts";
import { HistoryCache } from "./history-cache.ts";
import { listConversationsQuery } from "./list-query.ts";
import { pageParams } from "./row-page.ts";
import { type Checkpointer, startCheckpointer } from "./sqlite-checkpointer.ts";
import {
  DEFAULT_BUSY_TIMEOUT_MS,
  openSqliteConnection,
  type SqliteConnectionOptions,
} from "./sqlite-connection.ts";
import {
  type CompactionRecord,
  ConversationExistsError,
  type EventRecord,
  isSessionHistory,
  type ListFilter,
  type MessageRecord,
  type PendingTurn,
  type SessionAppend,
  type SessionFork,
  type SessionHistory,
  type SessionRecord,
  type Store,
  type TurnWrite,
} from "./types.ts";

/** The columns a pending turn is read from, in the order `pendingTurnOf` maps them. */
const PENDING_TURN_COLUMNS = "conversation_id, turn_index, text, author_member_id, author_name, started_at";

function pendingTurnOf(row: Record<string, SQLInputValue>): PendingTurn {
  return {
    conversationId: row.conversation_id as string,
    turnIndex: row.turn_index as number,
    text: row.text as string,
    authorMemberId: row.author_member_id as string | null,
    authorName: row.author_name as string | null,
    startedAt: row.started_at as string,
  };
}

export interface SqliteStoreOptions extends SqliteConnectionOptions {
  /**
   * Milliseconds between the checkpoints a worker thread runs on its own connection; 0 (default) leaves
   * checkpoints to SQLite inside commits, on the event loop. The server sets 100 (reference-server/index.ts).
   */
  checkpointIntervalMs?: number;
  /**
   * Session histories kept parsed in memory, up to this many characters of JSON in all (least recently used
   * first out; default 16 MB). 0 turns the cache off.
   */
  historyCacheChars?: number;
}

function toSqlValue(value: unknown): SQLInputValue {
  if (value === undefined) return null;
  if (typeof value === "boolean") return value ? 1 : 0;
  return value as SQLInputValue;
}

function isUniqueViolation(error: unknown): boolean {
  const errcode = (error as { errcode?: unknown }).errcode;
  // 1555 = SQLITE_CONSTRAINT_PRIMARYKEY, 2067 = SQLITE_CONSTRAINT_UNIQUE.
  return errcode === 1555 || errcode === 2067;
}

export function openSqliteStore(file: string, options: SqliteStoreOptions = {}): Store {
  const db = openSqliteConnection(file, options);
  const checkpointIntervalMs = options.checkpointIntervalMs ?? 0;
  let checkpointer: Checkpointer | undefined =
    checkpointIntervalMs > 0
      ? startCheckpointer(db, file, {
          intervalMs: checkpointIntervalMs,
          busyTimeoutMs: options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS,
        })
      : undefined;

  // Statements are compiled once per distinct SQL text (the list and update statements vary by which
  // filters/fields are present, so they are keyed by their text too).
  const statements = new Map<string, StatementSync>();
  function statement(sql: string): StatementSync {
    let prepared = statements.get(sql);
    if (!prepared) {
      prepared = db.prepare(sql);
      statements.set(sql, prepared);
    }
    return prepared;
  }

  function transaction<T>(work: () => T): T {
    db.exec("BEGIN IMMEDIATE");
    try {
      const result = work();
      db.exec("COMMIT");
      return result;
    } catch (error) {
      if (db.isTransaction) db.exec("ROLLBACK");
      throw error;
    }
  }

  const historyCache = new HistoryCache(options.historyCacheChars ?? 16 * 2 ** 20);

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

  const insertConversationSql = `INSERT INTO conversations (${conversationFields.map((f) => conversationColumns[f]).join(", ")}, generation)
    VALUES (${conversationFields.map(() => "?").join(", ")}, ?)`;

  return {
    async getConversation(id) {
      const row = statement("SELECT * FROM conversations WHERE id = ?").get(id) as
        | ConversationRow
        | undefined;
      return row ? rowToConversation(row) : undefined;
    },

    async insertConversation(record) {
      try {
        return transaction(() => {
          const { last } = statement(
            "UPDATE conversation_generations SET last = last + 1 RETURNING last",
          ).get() as { last: number };
          statement(insertConversationSql).run(...conversationFields.map((f) => toSqlValue(record[f])), last);
          return last;
        });
      } catch (error) {
        if (isUniqueViolation(error)) throw new ConversationExistsError(record.id);
        throw error;
      }
    },

    async conversationGenerations(ids) {
      const generations = new Map<string, number>();
      for (const id of ids) {
        const row = statement("SELECT generation FROM conversations WHERE id = ?").get(id) as
          | { generation: number }
          | undefined;
        if (row) generations.set(id, row.generation);
      }
      return generations;
    },

    async updateConversation(id, patch) {
      const fields = patchedFields(patch);
      if (fields.length === 0) return;
      const sql = `UPDATE conversations SET ${fields.map((f) => `${conversationColumns[f]} = ?`).join(", ")} WHERE id = ?`;
      statement(sql).run(...fields.map((f) => toSqlValue(patch[f as keyof typeof patch])), id);
    },

    async deleteConversation(id) {
      return transaction(() => {
        // Messages, events and compactions go by ON DELETE CASCADE; sessions carry no foreign key.
        for (const row of statement("SELECT id FROM sessions WHERE conversation_id = ?").all(id) as Array<{
          id: string;
        }>)
          historyCache.delete(row.id);
        statement(
          "DELETE FROM session_messages WHERE session_id IN (SELECT id FROM sessions WHERE conversation_id = ?)",
        ).run(id);
        statement("DELETE FROM sessions WHERE conversation_id = ?").run(id);
        return statement("DELETE FROM conversations WHERE id = ?").run(id).changes > 0;
      });
    },

    async listConversations(filter: ListFilter) {
      const { sql, params } = listConversationsQuery(filter);
      return (statement(sql).all(...params) as unknown as ConversationRow[]).map(rowToConversation);
    },

    async listMessages(conversationId, page) {
      const rows = statement(
        `SELECT conversation_id, turn_index, seq, role, text, author_member_id, author_name, is_compact_summary, created_at
         FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
      ).all(conversationId, ...pageParams(page)) as Array<Record<string, SQLInputValue>>;
      return rows.map(
        (row): MessageRecord => ({
          conversationId: row.conversation_id as string,
          turnIndex: row.turn_index as number,
          seq: row.seq as number,
          role: row.role as MessageRecord["role"],
          text: row.text as string,
          authorMemberId: row.author_member_id as string | null,
          authorName: row.author_name as string | null,
          isCompactSummary: row.is_compact_summary === 1,
          createdAt: row.created_at as string,
        }),
      );
    },

    async listEvents(conversationId, page) {
      const rows = statement(
        "SELECT conversation_id, turn_index, seq, event, created_at FROM events WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?",
      ).all(conversationId, ...pageParams(page)) as Array<Record<string, SQLInputValue>>;
      return rows.map(
        (row): EventRecord => ({
          conversationId: row.conversation_id as string,
          turnIndex: row.turn_index as number,
          seq: row.seq as number,
          event: JSON.parse(row.event as string) as Record<string, unknown>,
          createdAt: row.created_at as string,
        }),
      );
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
      if (!row) return undefined;
      return {
        conversationId: row.conversation_id as string,
        turnIndex: row.turn_index as number,
        summary: row.summary as string,
        createdAt: row.created_at as string,
      } satisfies CompactionRecord;
    },

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

    async close() {
      historyCache.clear();
      statements.clear();
      checkpointer?.close();
      checkpointer = undefined;
      if (db.isOpen) db.close();
    },
  };
}
