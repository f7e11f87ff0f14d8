/**
 * The PostgreSQL schema as an ordered list of migrations, the counterpart of ../sqlite/migrations.ts: the table
 * `agent_api_schema` holds how many have run; a later version appends a migration and never edits an old one.
 * Several instances may start at once against one database: the migrations run under an advisory lock, so
 * one instance migrates and the others find the work done.
 *
 * Where the engines differ:
 * - Text the API takes from callers verbatim (a message, a title made from it, a compaction summary, a
 *   pending turn's text) is `bytea` holding UTF-8: PostgreSQL's `text` refuses U+0000, which a JSON string
 *   may carry. JSON documents (events, session history messages) stay `text`: JSON.stringify escapes it.
 * - Columns the list queries compare or order (ids, times) use the "C" collation, so their order is the
 *   byte order SQLite uses, whatever locale the cluster was created with.
 * - `audience` is a STORED generated column (PostgreSQL has no VIRTUAL ones), and "visible to every member"
 *   is chr(1) (no member id is a control character) rather than NULL: PostgreSQL walks an index in order past
 *   an equality, but not past `IS NULL`, so the shared arm of a list query would sort every match.
 */
import type { Client, PoolClient } from "pg";

/** The list filters that may be absent from a conversation (the SQLite migration 2 explains the indexes). */
const OPTIONAL_FILTER_COLUMNS = ["channel_id", "notebook_path", "automation"] as const;

function listIndexes(): string {
  const statements: string[] = [];
  for (let mask = 0; mask < 1 << OPTIONAL_FILTER_COLUMNS.length; mask++) {
    const columns = OPTIONAL_FILTER_COLUMNS.filter((_, bit) => mask & (1 << bit));
    const name = ["conversations_list", ...columns].join("_");
    const where = ["hidden = false", ...columns.map((column) => `${column} IS NOT NULL`)];
    statements.push(
      `CREATE INDEX ${name} ON conversations (workspace_id, agent, channel, audience, ${columns.map((c) => `${c}, `).join("")}updated_at DESC, created_at DESC, id DESC) WHERE ${where.join(" AND ")};`,
    );
  }
  return statements.join("\n");
}

const migrations: ReadonlyArray<string> = [
  // 1: the schema SQLite reached at its migration 6, in one step.
  `
  CREATE TABLE conversations (
    id                     text COLLATE "C" PRIMARY KEY,
    workspace_id           text COLLATE "C" NOT NULL,
    agent                  text COLLATE "C" NOT NULL,
    owner_member_id        text COLLATE "C",
    channel                text COLLATE "C" NOT NULL CHECK (channel IN ('INTERACTIVE', 'NOTEBOOK', 'SLACK', 'EMAIL')),
    channel_id             text COLLATE "C",
    notebook_path          text COLLATE "C",
    automation             text COLLATE "C",
    title                  bytea NOT NULL,
    shared                 boolean NOT NULL DEFAULT false,
    agent_session_id       text COLLATE "C",
    parent_conversation_id text COLLATE "C",
    forked_at_turn_index   integer,
    default_model          text,
    default_automation     text,
    turn_model             text,
    turn_automation        text,
    hidden                 boolean NOT NULL DEFAULT false,
    created_at             text COLLATE "C" NOT NULL,
    updated_at             text COLLATE "C" NOT NULL,
    turn_count             integer NOT NULL DEFAULT 0,
    audience               text COLLATE "C" GENERATED ALWAYS AS (CASE WHEN NOT shared AND owner_member_id IS NOT NULL THEN owner_member_id ELSE chr(1) END) STORED
  );
  ${listIndexes()}

  CREATE TABLE messages (
    conversation_id    text COLLATE "C" NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq                integer NOT NULL,
    turn_index         integer NOT NULL,
    role               text NOT NULL CHECK (role IN ('user', 'assistant')),
    text               bytea NOT NULL,
    author_member_id   text,
    author_name        text,
    is_compact_summary boolean NOT NULL DEFAULT false,
    created_at         text NOT NULL,
    PRIMARY KEY (conversation_id, seq)
  );

  CREATE TABLE events (
    conversation_id text COLLATE "C" NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             integer NOT NULL,
    turn_index      integer NOT NULL,
    event           text NOT NULL,
    created_at      text NOT NULL,
    PRIMARY KEY (conversation_id, seq)
  );

  -- No foreign key, as in SQLite: a session may be written before or after the conversation row it serves.
  CREATE TABLE sessions (
    id              text COLLATE "C" PRIMARY KEY,
    conversation_id text COLLATE "C" NOT NULL,
    context         text NOT NULL,
    created_at      text NOT NULL,
    updated_at      text NOT NULL,
    history_tokens  integer,
    history_length  integer
  );
  CREATE INDEX sessions_by_conversation ON sessions (conversation_id);

  CREATE TABLE session_messages (
    session_id       text COLLATE "C" NOT NULL,
    seq              integer NOT NULL,
    message          text NOT NULL,
    turn_index       integer,
    replaced_at_turn integer,
    PRIMARY KEY (session_id, seq)
  );

  CREATE TABLE compactions (
    conversation_id text COLLATE "C" NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    -- SQLite's rowid: the order compactions were written in.
    seq             bigint GENERATED ALWAYS AS IDENTITY,
    turn_index      integer NOT NULL,
    summary         bytea NOT NULL,
    created_at      text NOT NULL
  );
  CREATE INDEX compactions_by_conversation ON compactions (conversation_id, turn_index);

  CREATE TABLE pending_turns (
    conversation_id  text COLLATE "C" PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    turn_index       integer NOT NULL,
    text             bytea NOT NULL,
    author_member_id text,
    author_name      text,
    started_at       text NOT NULL
  );
  `,
  // 2: the conversation's turn lock, shared by the instances: a lease with a fencing token (TurnLeases in
  // types.ts). No foreign key: a new conversation's first turn takes the lock before its row exists.
  `
  CREATE SEQUENCE turn_lease_tokens;
  CREATE TABLE turn_leases (
    conversation_id text COLLATE "C" PRIMARY KEY,
    token           bigint NOT NULL,
    holder          text NOT NULL,
    expires_at      timestamptz NOT NULL
  );
  `,
  // 3: pending agent_session_id recordings with their due time (ScheduledRecordings in types.ts). `session` is
  // the SessionRecord as JSON text.
  `
  CREATE TABLE pending_recordings (
    conversation_id text COLLATE "C" PRIMARY KEY,
    session         text NOT NULL,
    due_at          timestamptz NOT NULL
  );
  CREATE INDEX pending_recordings_by_due ON pending_recordings (due_at);
  `,
  // 4: files as shared state (file-store.ts): content-addressed blobs, stored in chunks so no value
  // is held whole in memory, and named sets of entries over them, each with a generation from one sequence
  // (a set removed and written again never repeats one, so a stale local copy can never look current).
  // Paths and link targets are bytea: a database's encoding must not refuse a file name.
  `
  CREATE TABLE file_blobs (
    sha256     bytea PRIMARY KEY,
    size       bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
  );
  CREATE TABLE file_chunks (
    sha256 bytea NOT NULL REFERENCES file_blobs (sha256) ON DELETE CASCADE,
    seq    integer NOT NULL,
    bytes  bytea NOT NULL,
    PRIMARY KEY (sha256, seq)
  );
  CREATE SEQUENCE file_set_generations;
  CREATE TABLE file_sets (
    set_key    text COLLATE "C" PRIMARY KEY,
    generation bigint NOT NULL
  );
  CREATE TABLE file_entries (
    set_key text COLLATE "C" NOT NULL REFERENCES file_sets (set_key) ON DELETE CASCADE,
    path    bytea NOT NULL,
    kind    text NOT NULL CHECK (kind IN ('file', 'dir', 'link')),
    mode    integer NOT NULL,
    size    bigint NOT NULL,
    sha256  bytea REFERENCES file_blobs (sha256),
    target  bytea,
    PRIMARY KEY (set_key, path)
  );
  -- The sweep asks, for each old blob, whether any entry still refers to it.
  CREATE INDEX file_entries_by_blob ON file_entries (sha256);
  `,
  // 5: each conversation's generation (ConversationRecord.generation), from a sequence: an id deleted and
  // created again is never the same generation, so no instance takes a local copy of the old one's files for
  // the new one's. Rows already there take the next values.
  `
  CREATE SEQUENCE conversation_generations;
  ALTER TABLE conversations ADD COLUMN generation bigint NOT NULL DEFAULT nextval('conversation_generations');
  `,
  // 6: blobs de-duplicated only within a workspace (issue 30, "no shared-storage side channel"): every blob,
  // chunk, set and entry row carries its workspace, and an entry refers to its own workspace's blob, so whether
  // a save uploads (and how long it takes) never depends on what another workspace holds or held. A set's
  // workspace comes from its key (an outputs set names it) or from its conversation's row; a working set
  // whose conversation is gone is what a delete removes, and goes. Each blob an entry refers to is copied, chunks
  // and all, to every workspace that refers to it; a blob no entry refers to is what the sweep would delete.
  `
  ALTER TABLE file_sets ADD COLUMN workspace_id text COLLATE "C";
  UPDATE file_sets SET workspace_id = CASE
    WHEN set_key LIKE '["outputs",%' THEN set_key::jsonb ->> 1
    WHEN set_key LIKE '["work",%' THEN (SELECT c.workspace_id FROM conversations c WHERE c.id = file_sets.set_key::jsonb ->> 1)
  END;
  DELETE FROM file_sets WHERE workspace_id IS NULL;
  ALTER TABLE file_sets ALTER COLUMN workspace_id SET NOT NULL;

  ALTER TABLE file_entries ADD COLUMN workspace_id text COLLATE "C";
  UPDATE file_entries e SET workspace_id = s.workspace_id FROM file_sets s WHERE s.set_key = e.set_key;
  ALTER TABLE file_entries ALTER COLUMN workspace_id SET NOT NULL;
  ALTER TABLE file_entries DROP CONSTRAINT file_entries_sha256_fkey;
  DROP INDEX file_entries_by_blob;

  ALTER TABLE file_chunks RENAME TO file_chunks_before_6;
  ALTER INDEX file_chunks_pkey RENAME TO file_chunks_before_6_pkey;
  ALTER TABLE file_blobs RENAME TO file_blobs_before_6;
  ALTER INDEX file_blobs_pkey RENAME TO file_blobs_before_6_pkey;
  CREATE TABLE file_blobs (
    workspace_id text COLLATE "C" NOT NULL,
    sha256       bytea NOT NULL,
    size         bigint NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (workspace_id, sha256)
  );
  CREATE TABLE file_chunks (
    workspace_id text COLLATE "C" NOT NULL,
    sha256       bytea NOT NULL,
    seq          integer NOT NULL,
    bytes        bytea NOT NULL,
    PRIMARY KEY (workspace_id, sha256, seq),
    FOREIGN KEY (workspace_id, sha256) REFERENCES file_blobs (workspace_id, sha256) ON DELETE CASCADE
  );
  INSERT INTO file_blobs (workspace_id, sha256, size, created_at)
    SELECT DISTINCT e.workspace_id, b.sha256, b.size, b.created_at
    FROM file_entries e JOIN file_blobs_before_6 b ON b.sha256 = e.sha256;
  INSERT INTO file_chunks (workspace_id, sha256, seq, bytes)
    SELECT b.workspace_id, c.sha256, c.seq, c.bytes
    FROM file_blobs b JOIN file_chunks_before_6 c ON c.sha256 = b.sha256;
  DROP TABLE file_chunks_before_6;
  DROP TABLE file_blobs_before_6;

  ALTER TABLE file_entries ADD FOREIGN KEY (workspace_id, sha256) REFERENCES file_blobs (workspace_id, sha256);
  -- The sweep asks, for each old blob, whether any entry of its workspace still refers to it.
  CREATE INDEX file_entries_by_blob ON file_entries (workspace_id, sha256);
  `,
];

export const POSTGRES_SCHEMA_VERSION = migrations.length;

/** Any 64-bit number of our own: the advisory lock the instances migrate under. */
const MIGRATION_LOCK = 0x4167_4150_4953;

/**
 * Runs the migrations this database has not seen yet, in one transaction under the migration lock; up to
 * `target` (a test builds a database as an earlier version left it).
 */
export async function migratePostgres(
  client: PoolClient | Client,
  target: number = POSTGRES_SCHEMA_VERSION,
): Promise<void> {
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    await client.query("CREATE TABLE IF NOT EXISTS agent_api_schema (version integer NOT NULL)");
    const { rows } = await client.query<{ version: number }>("SELECT version FROM agent_api_schema");
    const current = rows[0]?.version ?? 0;
    if (current > POSTGRES_SCHEMA_VERSION)
      throw new Error(
        `database was written by a newer version (schema ${current}, this build knows ${POSTGRES_SCHEMA_VERSION})`,
      );
    const upTo = Math.max(current, target);
    for (let version = current; version < upTo; version++) await client.query(migrations[version]);
    if (rows.length === 0) await client.query("INSERT INTO agent_api_schema (version) VALUES ($1)", [upTo]);
    else await client.query("UPDATE agent_api_schema SET version = $1", [upTo]);
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  }
}
