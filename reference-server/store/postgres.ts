/**
 * The Store over PostgreSQL (node-postgres, a pool of connections), for deployments of several instances on
 * one database. Each method is one statement or one transaction. Writes that must not interleave with
 * another instance's (a turn's commit, a fork's copy, a delete) first lock their conversation's row, so
 * concurrent writers of one conversation wait for each other rather than read stale sequence numbers.
 *
 * No history cache: another instance may have written a session since this one read it.
 */
import { createHash, randomUUID } from "node:crypto";
import pg from "pg";
import {
  type ConversationRow,
  conversationColumns,
  conversationFields,
  patchedFields,
  rowToConversation,
} from "./conversation-row.ts";
import { listConversationsQuery, POSTGRES_DIALECT } from "./list-query.ts";
import { createPostgresFileStore } from "./postgres-file-store.ts";
import { migratePostgres } from "./postgres-migrations.ts";
import { inTransaction } from "./postgres-transaction.ts";
import { pageParams } from "./row-page.ts";
import {
  type CompactionRecord,
  ConversationExistsError,
  type EventRecord,
  isSessionHistory,
  type MessageRecord,
  type PendingTurn,
  type SessionAppend,
  type SessionFork,
  type SessionHistory,
  type SessionRecord,
  type Store,
  TurnLeaseLostError,
  type TurnWrite,
} from "./types.ts";

export interface PostgresStoreOptions {
  /** Connections in the pool (default 10). */
  maxConnections?: number;
  /** Shown in pg_stat_activity, so an operator (and a test) can tell this server's connections. */
  applicationName?: string;
}

/** Columns stored as UTF-8 bytes (postgres-migrations.ts says why). */
const BYTES_COLUMNS = new Set(["title"]);

type Queryable = pg.Pool | pg.PoolClient;

/**
 * Runs `sql` as a named prepared statement: each connection parses and plans a statement once, then runs it
 * with new values (the list query's 8 arms cost more to plan than to run: 1.6 ms → 0.45 ms at p50).
 */
function query<R extends pg.QueryResultRow = pg.QueryResultRow>(
  db: Queryable,
  sql: string,
  params: unknown[] = [],
): Promise<pg.QueryResult<R>> {
  return db.query<R>({ name: statementName(sql), text: sql, values: params });
}

/** The LISTEN/NOTIFY channel of TurnInterrupts. */
const INTERRUPT_CHANNEL = "agent_api_turn_interrupts";

/** A prepared statement's name for `sql` (PostgreSQL keeps names up to 63 bytes). */
function statementName(sql: string): string {
  return `q_${createHash("sha256").update(sql).digest("hex").slice(0, 32)}`;
}

/** 23505 = unique_violation. */
function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown }).code === "23505";
}

function bytes(text: string): Buffer {
  return Buffer.from(text, "utf8");
}

function fromBytes(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString("utf8") : String(value);
}

/** The columns a pending turn is read from, in the order `pendingTurnOf` maps them. */
const PENDING_TURN_COLUMNS = "conversation_id, turn_index, text, author_member_id, author_name, started_at";

function pendingTurnOf(row: Record<string, unknown>): PendingTurn {
  return {
    conversationId: row.conversation_id as string,
    turnIndex: row.turn_index as number,
    // Free text is stored as UTF-8 bytes (PostgreSQL's text refuses U+0000).
    text: fromBytes(row.text),
    authorMemberId: row.author_member_id as string | null,
    authorName: row.author_name as string | null,
    startedAt: row.started_at as string,
  };
}

function toParam(column: string, value: unknown): unknown {
  if (value === undefined) return null;
  if (BYTES_COLUMNS.has(column) && typeof value === "string") return bytes(value);
  return value;
}

function toConversation(row: Record<string, unknown>): ConversationRecord {
  return rowToConversation({ ...(row as unknown as ConversationRow), title: fromBytes(row.title) });
}

type ConversationRecord = ReturnType<typeof rowToConversation>;

const listedColumns = Object.values(conversationColumns).join(", ");

export async function openPostgresStore(url: string, options: PostgresStoreOptions = {}): Promise<Store> {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.maxConnections ?? 10,
    application_name: options.applicationName ?? "agent-api",
  });
  // An idle connection the server drops (a restart of PostgreSQL) must not take the process down; the pool
  // replaces it on the next query.
  pool.on("error", () => undefined);
  try {
    const client = await pool.connect();
    try {
      await migratePostgres(client);
    } finally {
      client.release();
    }
  } catch (error) {
    await pool.end();
    throw error;
  }

  let closed = false;
  /** Tells this store's own interrupts apart from other instances' on the shared channel. */
  const instanceId = randomUUID();

  const transaction = <T>(work: (client: pg.PoolClient) => Promise<T>) => inTransaction(pool, work);

  async function one<T>(db: Queryable, sql: string, params: unknown[] = []): Promise<T | undefined> {
    const { rows } = await query(db, sql, params);
    return rows[0] as T | undefined;
  }

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

  /** A turn's session write; sqlite.ts (appendSession) explains `kept` and the replaced rows. */
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
    // One string from the server and one parse, as in sqlite.ts.
    const row = await one<{ joined: string | null }>(
      pool,
      "SELECT string_agg(message, ',' ORDER BY seq) AS joined FROM session_messages WHERE session_id = $1 AND replaced_at_turn IS NULL",
      [sessionId],
    );
    return { messages: JSON.parse(`[${row?.joined ?? ""}]`) as unknown[], tokens };
  }

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

  const insertConversationSql = `INSERT INTO conversations (${conversationFields.map((f) => conversationColumns[f]).join(", ")})
    VALUES (${conversationFields.map((_, i) => `$${i + 1}`).join(", ")})`;

  return {
    async getConversation(id) {
      const row = await one<Record<string, unknown>>(
        pool,
        `SELECT ${listedColumns} FROM conversations WHERE id = $1`,
        [id],
      );
      return row ? toConversation(row) : undefined;
    },

    async insertConversation(record) {
      try {
        const { rows } = await query<{ generation: string }>(
          pool,
          `${insertConversationSql} RETURNING generation`,
          conversationFields.map((f) => toParam(conversationColumns[f], record[f])),
        );
        return Number(rows[0].generation);
      } catch (error) {
        if (isUniqueViolation(error)) throw new ConversationExistsError(record.id);
        throw error;
      }
    },

    async conversationGenerations(ids) {
      if (ids.length === 0) return new Map();
      const { rows } = await query<{ id: string; generation: string }>(
        pool,
        "SELECT id, generation FROM conversations WHERE id = ANY($1::text[])",
        [ids],
      );
      return new Map(rows.map((row) => [row.id, Number(row.generation)]));
    },

    async updateConversation(id, patch) {
      const fields = patchedFields(patch);
      if (fields.length === 0) return;
      const sql = `UPDATE conversations SET ${fields.map((f, i) => `${conversationColumns[f]} = $${i + 1}`).join(", ")} WHERE id = $${fields.length + 1}`;
      await query(pool, sql, [
        ...fields.map((f) => toParam(conversationColumns[f], patch[f as keyof typeof patch])),
        id,
      ]);
    },

    async deleteConversation(id) {
      return transaction(async (db) => {
        // Waits for a commit of this conversation in flight on another connection, then removes it whole.
        const locked = await query(db, "SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE", [id]);
        await query(
          db,
          "DELETE FROM session_messages WHERE session_id IN (SELECT id FROM sessions WHERE conversation_id = $1)",
          [id],
        );
        await query(db, "DELETE FROM sessions WHERE conversation_id = $1", [id]);
        if (locked.rowCount === 0) return false;
        const deleted = await query(db, "DELETE FROM conversations WHERE id = $1", [id]);
        return (deleted.rowCount ?? 0) > 0;
      });
    },

    async listConversations(filter) {
      const { sql, params } = listConversationsQuery(filter, POSTGRES_DIALECT);
      // Named, so each connection parses the query once per shape (there are 64) rather than every time.
      const { rows } = await query(pool, sql, params);
      return rows.map(toConversation);
    },

    async listMessages(conversationId, page) {
      const { rows } = await query(
        pool,
        `SELECT conversation_id, turn_index, seq, role, text, author_member_id, author_name, is_compact_summary, created_at
         FROM messages WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
        [conversationId, ...pageParams(page)],
      );
      return rows.map(
        (row): MessageRecord => ({
          conversationId: row.conversation_id,
          turnIndex: row.turn_index,
          seq: row.seq,
          role: row.role,
          text: fromBytes(row.text),
          authorMemberId: row.author_member_id,
          authorName: row.author_name,
          isCompactSummary: row.is_compact_summary,
          createdAt: row.created_at,
        }),
      );
    },

    async listEvents(conversationId, page) {
      const { rows } = await query(
        pool,
        "SELECT conversation_id, turn_index, seq, event, created_at FROM events WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        [conversationId, ...pageParams(page)],
      );
      return rows.map(
        (row): EventRecord => ({
          conversationId: row.conversation_id,
          turnIndex: row.turn_index,
          seq: row.seq,
          event: JSON.parse(row.event) as Record<string, unknown>,
          createdAt: row.created_at,
        }),
      );
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
      if (!row) return undefined;
      return {
        conversationId: row.conversation_id as string,
        turnIndex: row.turn_index as number,
        summary: fromBytes(row.summary),
        createdAt: row.created_at as string,
      } satisfies CompactionRecord;
    },

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

    turnLeases: {
      async tryAcquire(conversationId, holder, leaseMs) {
        // The database's clock decides expiry, so the instances' clocks need not agree.
        const row = await one<{ token: string }>(
          pool,
          `INSERT INTO turn_leases (conversation_id, token, holder, expires_at)
           VALUES ($1, nextval('turn_lease_tokens'), $2, clock_timestamp() + $3 * interval '1 millisecond')
           ON CONFLICT (conversation_id) DO UPDATE
             SET token = EXCLUDED.token, holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
             WHERE turn_leases.expires_at < clock_timestamp()
           RETURNING token`,
          [conversationId, holder, Math.max(1, Math.trunc(leaseMs))],
        );
        return row === undefined ? undefined : Number(row.token);
      },
      async renew(conversationId, token, leaseMs) {
        const renewed = await query(
          pool,
          `UPDATE turn_leases SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
           WHERE conversation_id = $1 AND token = $2`,
          [conversationId, token, Math.max(1, Math.trunc(leaseMs))],
        );
        return (renewed.rowCount ?? 0) > 0;
      },
      async release(conversationId, token) {
        await query(pool, "DELETE FROM turn_leases WHERE conversation_id = $1 AND token = $2", [
          conversationId,
          token,
        ]);
      },
    },

    scheduledRecordings: {
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
    },

    turnInterrupts: {
      async publish(conversationId, reason) {
        await query(pool, "SELECT pg_notify($1, $2)", [
          INTERRUPT_CHANNEL,
          JSON.stringify({ conversationId, reason, from: instanceId }),
        ]);
      },
      async subscribe(handler, onReconnect) {
        let closed = false;
        let listener: pg.Client | undefined;
        let retry: NodeJS.Timeout | undefined;
        let failures = 0;
        const hear = (message: pg.Notification) => {
          if (message.channel !== INTERRUPT_CHANNEL || !message.payload) return;
          try {
            const { conversationId, reason, from } = JSON.parse(message.payload) as {
              conversationId: string;
              reason: string;
              from?: string;
            };
            // PostgreSQL delivers a notification to every listener, the publisher's own included: this
            // instance already ended its turn and removed its files before it published.
            if (from !== instanceId) handler(conversationId, reason);
          } catch {
            // Not ours.
          }
        };
        // LISTEN holds its connection: one of its own, outside the pool. When it is cut, it is made again
        // (sooner at first, at most every 5 s), and the caller told, since notifications sent meanwhile are lost.
        const connect = async (): Promise<void> => {
          const client = new pg.Client({
            connectionString: url,
            application_name: `${options.applicationName ?? "agent-api"} listener`,
          });
          let lost = false;
          const onLost = () => {
            if (lost) return;
            lost = true;
            void client.end().catch(() => undefined);
            if (!closed && listener === client) scheduleReconnect();
          };
          client.on("error", onLost);
          client.on("end", onLost);
          client.on("notification", hear);
          try {
            await client.connect();
            await client.query(`LISTEN ${INTERRUPT_CHANNEL}`);
          } catch (error) {
            lost = true;
            await client.end().catch(() => undefined);
            throw error;
          }
          listener = client;
        };
        const scheduleReconnect = () => {
          if (closed || retry !== undefined) return;
          const delay = Math.min(5_000, 50 * 2 ** Math.min(failures, 7));
          retry = setTimeout(async () => {
            retry = undefined;
            if (closed) return;
            try {
              await connect();
              failures = 0;
              if (closed) await listener?.end().catch(() => undefined);
              else onReconnect?.();
            } catch {
              failures++;
              scheduleReconnect();
            }
          }, delay);
          retry.unref();
        };
        await connect();
        return async () => {
          closed = true;
          clearTimeout(retry);
          await listener?.end().catch(() => undefined);
        };
      },
    },

    fileStore: createPostgresFileStore(pool),

    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}
