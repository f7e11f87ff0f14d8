/**
 * The Store over node:sqlite (embedded SQLite, WAL). One connection per process; every call is
 * synchronous and short, so a turn's writes never interleave with another's inside a transaction.
 */
import { chmodSync } from "node:fs";
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import { Worker } from "node:worker_threads";
import { migrate } from "./schema.ts";
import {
  CHANNELS,
  type Channel,
  type CompactionRecord,
  ConversationExistsError,
  type ConversationRecord,
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

export interface SqliteStoreOptions {
  /**
   * NORMAL (default): in WAL mode a commit is durable against a crash or kill of the server process
   * (the WAL is written before COMMIT returns; only fsync is deferred to checkpoints), and may lose the
   * last commits only on power loss or an OS crash. FULL also fsyncs the WAL on every commit.
   */
  synchronous?: "NORMAL" | "FULL";
  /** How long a writer waits for another connection's lock before SQLITE_BUSY. */
  busyTimeoutMs?: number;
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

/**
 * Parsed session histories, so a turn does not read and parse its whole history again: the turn before
 * left it here. Correct because this connection is the only writer (one process per data directory) and
 * every write to a session's rows goes through the store, which updates or drops the entry only once its
 * transaction committed. Bounded by size, so memory stays flat however many conversations there are.
 * Callers get the cached array itself and must not change it (the engine copies before appending).
 */
class HistoryCache {
  readonly #limit: number;
  readonly #entries = new Map<string, { history: SessionHistory; chars: number }>();
  #chars = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  get(id: string): SessionHistory | undefined {
    const entry = this.#entries.get(id);
    if (!entry) return undefined;
    // Most recently used last: Map keeps insertion order.
    this.#entries.delete(id);
    this.#entries.set(id, entry);
    return entry.history;
  }

  chars(id: string): number | undefined {
    return this.#entries.get(id)?.chars;
  }

  set(id: string, history: SessionHistory, chars: number): void {
    this.delete(id);
    if (chars > this.#limit) return;
    this.#entries.set(id, { history, chars });
    this.#chars += chars;
    for (const [oldest, entry] of this.#entries) {
      if (this.#chars <= this.#limit) break;
      this.#entries.delete(oldest);
      this.#chars -= entry.chars;
    }
  }

  delete(id: string): void {
    const entry = this.#entries.get(id);
    if (!entry) return;
    this.#entries.delete(id);
    this.#chars -= entry.chars;
  }

  clear(): void {
    this.#entries.clear();
    this.#chars = 0;
  }
}

/** Row shapes as SQLite returns them (booleans are 0/1). */
interface ConversationRow {
  id: string;
  workspace_id: string;
  agent: string;
  owner_member_id: string | null;
  channel: string;
  channel_id: string | null;
  notebook_path: string | null;
  automation: string | null;
  title: string;
  shared: number;
  agent_session_id: string | null;
  parent_conversation_id: string | null;
  forked_at_turn_index: number | null;
  default_model: string | null;
  default_automation: string | null;
  turn_model: string | null;
  turn_automation: string | null;
  hidden: number;
  created_at: string;
  updated_at: string;
  turn_count: number;
}

/** ConversationRecord field → column, the single place that maps the two namings. */
const conversationColumns = {
  id: "id",
  workspaceId: "workspace_id",
  agent: "agent",
  ownerMemberId: "owner_member_id",
  channel: "channel",
  channelId: "channel_id",
  notebookPath: "notebook_path",
  automation: "automation",
  title: "title",
  shared: "shared",
  agentSessionId: "agent_session_id",
  parentConversationId: "parent_conversation_id",
  forkedAtTurnIndex: "forked_at_turn_index",
  defaultModel: "default_model",
  defaultAutomation: "default_automation",
  turnModel: "turn_model",
  turnAutomation: "turn_automation",
  hidden: "hidden",
  createdAt: "created_at",
  updatedAt: "updated_at",
  turnCount: "turn_count",
} as const satisfies Record<keyof ConversationRecord, keyof ConversationRow>;

type ConversationField = keyof typeof conversationColumns;

function toSqlValue(value: unknown): SQLInputValue {
  if (value === undefined) return null;
  if (typeof value === "boolean") return value ? 1 : 0;
  return value as SQLInputValue;
}

function rowToConversation(row: ConversationRow): ConversationRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    agent: row.agent,
    ownerMemberId: row.owner_member_id,
    channel: row.channel as Channel,
    channelId: row.channel_id,
    notebookPath: row.notebook_path,
    automation: row.automation,
    title: row.title,
    shared: row.shared === 1,
    agentSessionId: row.agent_session_id,
    parentConversationId: row.parent_conversation_id,
    forkedAtTurnIndex: row.forked_at_turn_index,
    defaultModel: row.default_model,
    defaultAutomation: row.default_automation,
    turnModel: row.turn_model,
    turnAutomation: row.turn_automation,
    hidden: row.hidden === 1,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    turnCount: row.turn_count,
  };
}

/** `since` may be any ISO 8601 form (offsets, no ms); stored times are `toISOString()`, so normalise to compare lexically. */
function normaliseSince(since: string): string {
  const ms = Date.parse(since);
  return Number.isNaN(ms) ? since : new Date(ms).toISOString();
}

function isUniqueViolation(error: unknown): boolean {
  const errcode = (error as { errcode?: unknown }).errcode;
  // 1555 = SQLITE_CONSTRAINT_PRIMARYKEY, 2067 = SQLITE_CONSTRAINT_UNIQUE.
  return errcode === 1555 || errcode === 2067;
}

const ACTIVITY_ORDER = "ORDER BY updated_at DESC, created_at DESC, id DESC";
const listedColumns = Object.values(conversationColumns).join(", ");

/**
 * The list query for a filter, exported so the query-plan test checks exactly what the store runs.
 *
 * One arm per visibility rule group and channel (schema.ts, migration 2): the caller's private
 * conversations (`audience = caller`) and the shared or channel-owned ones (`audience IS NULL`), for the
 * filtered channel or else for each of the four. Each arm is an equality walk of the list index for this
 * set of filters, already in activity order; a compound ORDER BY makes SQLite merge the walks row by row
 * (MERGE (UNION ALL)) and stop at the LIMIT, so about `limit` index entries (plus a look-ahead per arm)
 * are read whatever the store's size. Giving each arm its own ORDER BY ... LIMIT in a subquery instead
 * makes SQLite sort each arm's rows again before merging (USE TEMP B-TREE FOR ORDER BY).
 */
export function listConversationsQuery(filter: ListFilter): { sql: string; params: SQLInputValue[] } {
  const where = ["workspace_id = ?", "agent = ?", "hidden = 0", "channel = ?"];
  const optional: SQLInputValue[] = [];
  const equalities = [
    ["channel_id", filter.channelId],
    ["notebook_path", filter.notebookPath],
    ["automation", filter.automation],
  ] as const;
  for (const [column, value] of equalities) {
    if (value === undefined) continue;
    where.push(`${column} = ?`);
    optional.push(value);
  }
  if (filter.since !== undefined) {
    where.push("updated_at >= ?");
    optional.push(normaliseSince(filter.since));
  }
  const arms: string[] = [];
  const params: SQLInputValue[] = [];
  for (const channel of filter.channel === undefined ? CHANNELS : [filter.channel]) {
    for (const viewer of [filter.viewerMemberId, null]) {
      const audience = viewer === null ? "audience IS NULL" : "audience = ?";
      arms.push(`SELECT ${listedColumns} FROM conversations WHERE ${[...where, audience].join(" AND ")}`);
      params.push(filter.workspaceId, filter.agent, channel, ...optional);
      if (viewer !== null) params.push(viewer);
    }
  }
  params.push(Math.max(0, Math.trunc(filter.limit)));
  return { sql: `${arms.join(" UNION ALL ")} ${ACTIVITY_ORDER} LIMIT ?`, params };
}

/**
 * The checkpointer: a worker thread with a connection of its own that copies the WAL into the database every
 * `intervalMs` (PASSIVE: it never waits for, nor blocks, the server's writer). In WAL mode with synchronous
 * NORMAL a commit does not fsync, but the checkpoint SQLite runs inside the commit that crosses 1,000 WAL
 * pages fsyncs the WAL and the database file: on a busy disk that held the event loop 2–35 ms every ~40
 * turns, and every block of every running turn waited behind it (bench:engine's p99). Plain JavaScript in a
 * string, so it runs the same from the TypeScript sources and from the compiled package.
 */
const CHECKPOINTER = `
const { parentPort, workerData } = require("node:worker_threads");
const { DatabaseSync } = require("node:sqlite");
const db = new DatabaseSync(workerData.file);
db.exec("PRAGMA busy_timeout = " + workerData.busyTimeoutMs);
const checkpoint = () => {
  try { db.exec("PRAGMA wal_checkpoint(PASSIVE)"); } catch { /* busy or closing: the next tick retries */ }
};
const timer = setInterval(checkpoint, workerData.intervalMs);
parentPort.on("message", () => {
  clearInterval(timer);
  checkpoint();
  db.close();
  // The server's close() waits on this: once it returns, no connection of ours holds the file.
  Atomics.store(workerData.closed, 0, 1);
  Atomics.notify(workerData.closed, 0);
  parentPort.close();
});
`;

/** How long close() waits for the checkpointer's last checkpoint (a worker that hangs must not hold a shutdown). */
const CHECKPOINTER_CLOSE_MS = 5_000;

/**
 * SQLite's own checkpoint stays as a backstop. The WAL starts over only when a write begins with every frame
 * copied, which a server with pauses between turns gives the checkpointer often; under writes without a
 * pause it never catches up, and this checkpoint (copying only what the checkpointer has not) restarts it.
 */
const BACKSTOP_CHECKPOINT_PAGES = 4_000;

export function openSqliteStore(file: string, options: SqliteStoreOptions = {}): Store {
  const db = new DatabaseSync(file);
  try {
    // Private to the server (SQLite gives its -wal and -shm files the same mode): the data directory is
    // searchable by sandbox users on their way to their working directories.
    chmodSync(file, 0o600);
    db.exec(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(`PRAGMA synchronous = ${options.synchronous === "FULL" ? "FULL" : "NORMAL"}`);
    db.exec("PRAGMA foreign_keys = ON");
    migrate(db);
  } catch (error) {
    db.close();
    throw error;
  }
  const checkpointIntervalMs = options.checkpointIntervalMs ?? 0;
  let checkpointer: Worker | undefined;
  /** Set to 1 by the checkpointer once its connection is closed. */
  const checkpointerClosed = new Int32Array(new SharedArrayBuffer(4));
  if (checkpointIntervalMs > 0) {
    db.exec(`PRAGMA wal_autocheckpoint = ${BACKSTOP_CHECKPOINT_PAGES}`);
    checkpointer = new Worker(CHECKPOINTER, {
      eval: true,
      workerData: {
        file,
        intervalMs: Math.trunc(checkpointIntervalMs),
        busyTimeoutMs: Math.trunc(options.busyTimeoutMs ?? 5000),
        closed: checkpointerClosed,
      },
    });
    // A checkpointer that fails leaves the backstop: SQLite checkpoints inside commits again.
    checkpointer.on("error", () => {
      checkpointer = undefined;
      if (db.isOpen) db.exec("PRAGMA wal_autocheckpoint = 1000");
    });
    checkpointer.unref();
  }

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

  const allFields = Object.keys(conversationColumns) as ConversationField[];
  const insertConversationSql = `INSERT INTO conversations (${allFields.map((f) => conversationColumns[f]).join(", ")})
    VALUES (${allFields.map(() => "?").join(", ")})`;

  return {
    getConversation(id) {
      const row = statement("SELECT * FROM conversations WHERE id = ?").get(id) as
        | ConversationRow
        | undefined;
      return row ? rowToConversation(row) : undefined;
    },

    insertConversation(record) {
      try {
        statement(insertConversationSql).run(...allFields.map((f) => toSqlValue(record[f])));
      } catch (error) {
        if (isUniqueViolation(error)) throw new ConversationExistsError(record.id);
        throw error;
      }
    },

    updateConversation(id, patch) {
      const fields = (Object.keys(patch) as ConversationField[]).filter(
        (f) => f !== "id" && f in conversationColumns && patch[f as keyof typeof patch] !== undefined,
      );
      if (fields.length === 0) return;
      const sql = `UPDATE conversations SET ${fields.map((f) => `${conversationColumns[f]} = ?`).join(", ")} WHERE id = ?`;
      statement(sql).run(...fields.map((f) => toSqlValue(patch[f as keyof typeof patch])), id);
    },

    deleteConversation(id) {
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

    listConversations(filter: ListFilter) {
      const { sql, params } = listConversationsQuery(filter);
      return (statement(sql).all(...params) as unknown as ConversationRow[]).map(rowToConversation);
    },

    listMessages(conversationId) {
      const rows = statement(
        `SELECT conversation_id, turn_index, seq, role, text, author_member_id, author_name, is_compact_summary, created_at
         FROM messages WHERE conversation_id = ? ORDER BY seq`,
      ).all(conversationId) as Array<Record<string, SQLInputValue>>;
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

    listEvents(conversationId) {
      const rows = statement(
        "SELECT conversation_id, turn_index, seq, event, created_at FROM events WHERE conversation_id = ? ORDER BY seq",
      ).all(conversationId) as Array<Record<string, SQLInputValue>>;
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

    commitTurn(write: TurnWrite) {
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

    beginTurn(pending: PendingTurn) {
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

    listPendingTurns() {
      const rows = statement(
        "SELECT conversation_id, turn_index, text, author_member_id, author_name, started_at FROM pending_turns ORDER BY started_at, conversation_id",
      ).all() as Array<Record<string, SQLInputValue>>;
      return rows.map(
        (row): PendingTurn => ({
          conversationId: row.conversation_id as string,
          turnIndex: row.turn_index as number,
          text: row.text as string,
          authorMemberId: row.author_member_id as string | null,
          authorName: row.author_name as string | null,
          startedAt: row.started_at as string,
        }),
      );
    },

    copyTurns(parentId, childId, uptoTurn) {
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

    getLastCompaction(conversationId) {
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

    createSession(record: SessionRecord) {
      insertSession(record);
    },

    forkSession,

    getSession(id) {
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

    hasSession(id) {
      return statement("SELECT 1 FROM sessions WHERE id = ?").get(id) !== undefined;
    },

    updateSessionContext(id, context, at) {
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

    recordSession(record) {
      transaction(() => {
        const pointed = statement("UPDATE conversations SET agent_session_id = ? WHERE id = ?").run(
          record.id,
          record.conversationId,
        );
        if (pointed.changes === 0) return;
        insertSession(record);
      });
    },

    close() {
      historyCache.clear();
      statements.clear();
      // The checkpointer runs a last checkpoint, closes its connection and ends on its own; close() returns
      // once its connection is closed, so whoever opens the file next (a restart, an operator's sqlite3, a
      // backup) never finds it locked by a server that said it stopped.
      if (checkpointer) {
        checkpointer.postMessage("close");
        checkpointer = undefined;
        Atomics.wait(checkpointerClosed, 0, 0, CHECKPOINTER_CLOSE_MS);
      }
      if (db.isOpen) db.close();
    },
  };
}
