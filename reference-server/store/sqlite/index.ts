/**
 * The Store over node:sqlite (embedded SQLite, WAL). One connection per process; every call runs to its end
 * synchronously underneath its promise, so a turn's writes never interleave with another's inside a
 * transaction. One module per table or concern: conversations, transcripts (messages, events, compactions and
 * a turn's commit), pending turns, sessions; the rows they share with PostgreSQL are mapped in
 * ../conversation-row.ts and ../transcript-rows.ts.
 */
import type { OneInstanceStore } from "../types.ts";
import { type Checkpointer, startCheckpointer } from "./checkpointer.ts";
import { DEFAULT_BUSY_TIMEOUT_MS, openSqliteConnection, type SqliteConnectionOptions } from "./connection.ts";
import { sqliteConversations } from "./conversations.ts";
import { sqliteDatabase } from "./database.ts";
import { sqlitePendingTurns } from "./pending-turns.ts";
import { sqliteSessions } from "./sessions.ts";
import { sqliteStoredBytes } from "./stored-bytes.ts";
import { sqliteTranscripts } from "./transcripts.ts";

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

export function openSqliteStore(file: string, options: SqliteStoreOptions = {}): OneInstanceStore {
  const db = openSqliteConnection(file, options);
  const checkpointIntervalMs = options.checkpointIntervalMs ?? 0;
  let checkpointer: Checkpointer | undefined =
    checkpointIntervalMs > 0
      ? startCheckpointer(db, file, {
          intervalMs: checkpointIntervalMs,
          busyTimeoutMs: options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS,
        })
      : undefined;
  const database = sqliteDatabase(db);
  const sessions = sqliteSessions(database, options.historyCacheChars ?? 16 * 2 ** 20);

  return {
    sharing: "one-instance",
    ...sqliteConversations(database, sessions),
    ...sqliteTranscripts(database, sessions),
    ...sqlitePendingTurns(database),
    ...sessions.methods,
    storedBytes: sqliteStoredBytes(db),

    async close() {
      sessions.historyCache.clear();
      database.forgetStatements();
      checkpointer?.close();
      checkpointer = undefined;
      if (db.isOpen) db.close();
    },
  };
}
