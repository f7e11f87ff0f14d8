/**
 * The SQLite schema as an ordered list of migrations. `PRAGMA user_version` holds how many have run;
 * a later version appends a migration (ALTER TABLE ... ADD COLUMN, new index) and never edits an old one,
 * so a data directory written by any earlier version opens and upgrades in place.
 */
import type { DatabaseSync } from "node:sqlite";

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
  // The model and automation the latest turn's request named, which a fork inherits (issue 10).
  `
  ALTER TABLE conversations ADD COLUMN turn_model TEXT;
  ALTER TABLE conversations ADD COLUMN turn_automation TEXT;
  `,
  // A turn's user message, durable before its 200 is sent; gone when the turn is committed. A row left at
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
];

export const SCHEMA_VERSION = migrations.length;

/** Runs the migrations this database has not seen yet, each in its own transaction. */
export function migrate(db: DatabaseSync): void {
  const row = db.prepare("PRAGMA user_version").get() as { user_version: number };
  const current = row.user_version;
  if (current > SCHEMA_VERSION) {
    throw new Error(
      `data directory was written by a newer version (schema ${current}, this build knows ${SCHEMA_VERSION})`,
    );
  }
  for (let version = current; version < SCHEMA_VERSION; version++) {
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
