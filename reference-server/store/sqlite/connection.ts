/** The server's SQLite connection: its file mode, pragmas and schema. */
import { chmodSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { migrate } from "./migrations.ts";

export interface SqliteConnectionOptions {
  /**
   * NORMAL (default): in WAL mode a commit is durable against a crash or kill of the server process
   * (the WAL is written before COMMIT returns; only fsync is deferred to checkpoints), and may lose the
   * last commits only on power loss or an OS crash. FULL also fsyncs the WAL on every commit.
   */
  synchronous?: "NORMAL" | "FULL";
  /** How long a writer waits for another connection's lock before SQLITE_BUSY. */
  busyTimeoutMs?: number;
}

export const DEFAULT_BUSY_TIMEOUT_MS = 5000;

/** Opens `file` in WAL mode with the schema migrated to the latest version. */
export function openSqliteConnection(file: string, options: SqliteConnectionOptions = {}): DatabaseSync {
  const db = new DatabaseSync(file);
  try {
    // Private to the server (SQLite gives its -wal and -shm files the same mode): the data directory is
    // searchable by sandbox users on their way to their working directories.
    chmodSync(file, 0o600);
    db.exec(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS)}`);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(`PRAGMA synchronous = ${options.synchronous === "FULL" ? "FULL" : "NORMAL"}`);
    db.exec("PRAGMA foreign_keys = ON");
    migrate(db);
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}
