/**
 * The SQLite schema as an ordered list of migrations. `PRAGMA user_version` holds how many have run;
 * a later version appends a migration (ALTER TABLE ... ADD COLUMN, new index) and never edits an old one,
 * so a data directory written by any earlier version opens and upgrades in place.
 */
import type { DatabaseSync } from "node:sqlite";

/**
 * The list filters that may be absent from a conversation. A query may combine any of them, so every subset
 * gets its own index with exactly those columns before the activity order: an index missing one filter
 * column walks past rows that fail it (`channel=SLACK` over schema 1's activity index read 47 ms at 100k).
 */
const OPTIONAL_FILTER_COLUMNS = ["channel_id", "notebook_path", "automation"] as const;

/**
 * Migration 2, built once from the subsets; its output is frozen by being a migration (a later change
 * appends a new one rather than editing this function).
 *
 * - `audience` folds the three visibility rules into one column: the owner while private, NULL once
 *   shared or when a channel owns it. "Visible to the caller" becomes `audience = caller` or
 *   `audience IS NULL`, two equality walks that SQLite merges in order (../list-query.ts), instead of an OR that
 *   no index can serve in activity order. It is a VIRTUAL generated column, so no write path maintains it
 *   and rows of an existing database have it the moment the column is added.
 * - `channel` (never null, four values) leads every index, and a query without a channel filter merges
 *   one walk per channel. Each turn moves its conversation in every list index that holds it (the
 *   activity time is in the key), so a plain interactive conversation sits in one list index, as in
 *   schema 1, rather than in a channel-less index and a channel one.
 * - The indexes are partial: hidden test runs are never listed, and a row without a channel id, notebook
 *   path or automation cannot match a filter on it, so each index holds only the rows it can return.
 * - The schema 1 list indexes go: every list query has a better one now.
 */
function listIndexesMigration(): string {
  const statements = [
    "ALTER TABLE conversations ADD COLUMN audience TEXT GENERATED ALWAYS AS (CASE WHEN shared = 0 THEN owner_member_id END) VIRTUAL;",
    "DROP INDEX conversations_by_agent_activity;",
    "DROP INDEX conversations_by_channel;",
    "DROP INDEX conversations_by_automation;",
  ];
  for (let mask = 0; mask < 1 << OPTIONAL_FILTER_COLUMNS.length; mask++) {
    const columns = OPTIONAL_FILTER_COLUMNS.filter((_, bit) => mask & (1 << bit));
    const name = ["conversations_list", ...columns].join("_");
    const where = ["hidden = 0", ...columns.map((column) => `${column} IS NOT NULL`)];
    statements.push(
      `CREATE INDEX ${name} ON conversations (workspace_id, agent, channel, audience, ${columns.map((c) => `${c}, `).join("")}updated_at DESC, created_at DESC, id DESC) WHERE ${where.join(" AND ")};`,
    );
  }
  return statements.join("\n");
}

const migrations: ReadonlyArray<string> = [
  // 1: the initial schema.
  `
  CREATE TABLE conversations (
    id                     TEXT PRIMARY KEY,
    workspace_id           TEXT NOT NULL,
    agent                  TEXT NOT NULL,
    owner_member_id        TEXT,
    channel                TEXT NOT NULL CHECK (channel IN ('INTERACTIVE', 'NOTEBOOK', 'SLACK', 'EMAIL')),
    channel_id             TEXT,
    notebook_path          TEXT,
    automation             TEXT,
    title                  TEXT NOT NULL,
    shared                 INTEGER NOT NULL DEFAULT 0,
    agent_session_id       TEXT,
    parent_conversation_id TEXT,
    forked_at_turn_index   INTEGER,
    default_model          TEXT,
    default_automation     TEXT,
    hidden                 INTEGER NOT NULL DEFAULT 0,
    created_at             TEXT NOT NULL,
    updated_at             TEXT NOT NULL,
    turn_count             INTEGER NOT NULL DEFAULT 0
  ) STRICT;
  -- Listing: one agent of one workspace, newest activity first.
  CREATE INDEX conversations_by_agent_activity
    ON conversations (workspace_id, agent, updated_at DESC, created_at DESC, id DESC);
  CREATE INDEX conversations_by_channel ON conversations (workspace_id, agent, channel, channel_id);
  CREATE INDEX conversations_by_automation ON conversations (workspace_id, agent, automation);

  CREATE TABLE messages (
    conversation_id    TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq                INTEGER NOT NULL,
    turn_index         INTEGER NOT NULL,
    role               TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    text               TEXT NOT NULL,
    author_member_id   TEXT,
    author_name        TEXT,
    is_compact_summary INTEGER NOT NULL DEFAULT 0,
    created_at         TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
  ) STRICT, WITHOUT ROWID;

  CREATE TABLE events (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    turn_index      INTEGER NOT NULL,
    event           TEXT NOT NULL CHECK (json_valid(event)),
    created_at      TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
  ) STRICT, WITHOUT ROWID;

  -- No foreign key: the service may create a session before or after the conversation row it serves;
  -- deleteConversation removes a conversation's sessions explicitly.
  CREATE TABLE sessions (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    context         TEXT NOT NULL CHECK (json_valid(context)),
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
  ) STRICT;
  CREATE INDEX sessions_by_conversation ON sessions (conversation_id);

  CREATE TABLE compactions (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    turn_index      INTEGER NOT NULL,
    summary         TEXT NOT NULL,
    created_at      TEXT NOT NULL
  ) STRICT;
  CREATE INDEX compactions_by_conversation ON compactions (conversation_id, turn_index);
  `,
  // 2: every list query is a walk of one index that stops after `limit` rows (issue 14).
  listIndexesMigration(),
  // 3: the model and automation the latest turn's request named, which a fork inherits (issue 10).
  `
  ALTER TABLE conversations ADD COLUMN turn_model TEXT;
  ALTER TABLE conversations ADD COLUMN turn_automation TEXT;
  `,
  // 4: a turn's user message, durable before its 200 is sent; gone when the turn is committed. A row left at
  // start-up is a turn the process did not live to finish (issue 10).
  `
  CREATE TABLE pending_turns (
    conversation_id  TEXT PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    turn_index       INTEGER NOT NULL,
    text             TEXT NOT NULL,
    author_member_id TEXT,
    author_name      TEXT,
    started_at       TEXT NOT NULL
  ) STRICT;
  `,
  // 5: a session's Messages history one row per message, so a turn appends its own messages instead of
  // rewriting the whole history (issue 13). `history_tokens` NULL: the history is still the `context` value
  // an earlier version wrote (or a fork's text entries); the session's next turn moves it into rows.
  `
  ALTER TABLE sessions ADD COLUMN history_tokens INTEGER;
  CREATE TABLE session_messages (
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    message    TEXT NOT NULL CHECK (json_valid(message)),
    PRIMARY KEY (session_id, seq)
  ) STRICT, WITHOUT ROWID;
  `,
  // 6: which turn wrote each history message and which turn replaced it (a compaction, a prompt joined to a
  // trailing user message), so a fork can take the history exactly as it stood after any turn (issue 9).
  // Replaced rows stay; the current history is the rows not replaced. NULL turn_index: written before this
  // migration (a fork falls back to the transcript's text for such a session). `history_length` counts the
  // current rows (NULL: count them once).
  `
  ALTER TABLE session_messages ADD COLUMN turn_index INTEGER;
  ALTER TABLE session_messages ADD COLUMN replaced_at_turn INTEGER;
  ALTER TABLE sessions ADD COLUMN history_length INTEGER;
  `,
  // 7: each conversation's generation (ConversationRecord.generation), from a counter that only grows, so an
  // id deleted and created again is never the same generation (rowid may be reused after a delete). Rows
  // already there take their rowid, and the counter starts past them.
  `
  ALTER TABLE conversations ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
  UPDATE conversations SET generation = rowid;
  CREATE TABLE conversation_generations (last INTEGER NOT NULL) STRICT;
  INSERT INTO conversation_generations (last) SELECT COALESCE(MAX(rowid), 0) FROM conversations;
  `,
];

export const SCHEMA_VERSION = migrations.length;

/** Runs the migrations this database has not seen yet (up to `target`), each in its own transaction. */
export function migrate(db: DatabaseSync, target: number = SCHEMA_VERSION): void {
  const row = db.prepare("PRAGMA user_version").get() as { user_version: number };
  const current = row.user_version;
  if (current > SCHEMA_VERSION) {
    throw new Error(
      `data directory was written by a newer version (schema ${current}, this build knows ${SCHEMA_VERSION})`,
    );
  }
  // `target` below the latest exists for tests that build a database as an older version wrote it.
  for (let version = current; version < target; version++) {
    db.exec("BEGIN IMMEDIATE");
    try {
      db.exec(migrations[version]);
      // PRAGMA takes no bound parameters; the value is our own integer.
      db.exec(`PRAGMA user_version = ${version + 1}`);
      db.exec("COMMIT");
    } catch (error) {
      db.exec("ROLLBACK");
      throw error;
    }
  }
}
