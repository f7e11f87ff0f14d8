/**
 * The checkpointer: a worker thread with a connection of its own that copies the WAL into the database every
 * `intervalMs` (PASSIVE: it never waits for, nor blocks, the server's writer). In WAL mode with synchronous
 * NORMAL a commit does not fsync, but the checkpoint SQLite runs inside the commit that crosses 1,000 WAL
 * pages fsyncs the WAL and the database file: on a busy disk that held the event loop 2–35 ms every ~40
 * turns, and every block of every running turn waited behind it (bench:engine's p99).
 */
import type { DatabaseSync } from "node:sqlite";
import { Worker } from "node:worker_threads";

/** Plain JavaScript in a string, so it runs the same from the TypeScript sources and from the compiled package. */
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

export interface Checkpointer {
  /** Runs a last checkpoint and returns once the worker's connection is closed. */
  close(): void;
}

/** Starts the checkpointer on `file` beside the server's connection `db`. */
export function startCheckpointer(
  db: DatabaseSync,
  file: string,
  options: { intervalMs: number; busyTimeoutMs: number },
): Checkpointer {
  /** Set to 1 by the checkpointer once its connection is closed. */
  const closed = new Int32Array(new SharedArrayBuffer(4));
  db.exec(`PRAGMA wal_autocheckpoint = ${BACKSTOP_CHECKPOINT_PAGES}`);
  let worker: Worker | undefined = new Worker(CHECKPOINTER, {
    eval: true,
    workerData: {
      file,
      intervalMs: Math.trunc(options.intervalMs),
      busyTimeoutMs: Math.trunc(options.busyTimeoutMs),
      closed,
    },
  });
  // A checkpointer that fails leaves the backstop: SQLite checkpoints inside commits again.
  worker.on("error", () => {
    worker = undefined;
    if (db.isOpen) db.exec("PRAGMA wal_autocheckpoint = 1000");
  });
  worker.unref();
  return {
    close() {
      // The checkpointer runs a last checkpoint, closes its connection and ends on its own; close() returns
      // once its connection is closed, so whoever opens the file next (a restart, an operator's sqlite3, a
      // backup) never finds it locked by a server that said it stopped.
      if (!worker) return;
      worker.postMessage("close");
      worker = undefined;
      Atomics.wait(closed, 0, 0, CHECKPOINTER_CLOSE_MS);
    },
  };
}
