import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openSqliteStore } from "./sqlite/index.ts";
import { SCHEMA_VERSION } from "./sqlite/migrations.ts";
import { conversationRecord, textTurn } from "./testing.ts";
import type { Store } from "./types.ts";

let dir: string;
let file: string;
let store: Store;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "store-test-"));
  file = join(dir, "agent-api.sqlite");
  store = openSqliteStore(file);
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("SQLite file", () => {
  it("opens in WAL mode with foreign keys on and the current schema version", async () => {
    await store.close();
    const db = new DatabaseSync(file);
    expect(db.prepare("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
    expect(db.prepare("PRAGMA user_version").get()).toEqual({ user_version: SCHEMA_VERSION });
    db.close();
    store = openSqliteStore(file);
  });

  it("refuses a data file from a newer schema version instead of guessing", async () => {
    await store.close();
    const db = new DatabaseSync(file);
    db.exec(`PRAGMA user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    expect(() => openSqliteStore(file)).toThrow(/newer version/);
    const reset = new DatabaseSync(file);
    reset.exec(`PRAGMA user_version = ${SCHEMA_VERSION}`);
    reset.close();
    store = openSqliteStore(file);
  });
});

describe("WAL checkpoints", () => {
  /** Frames in the WAL and frames already copied into the database, from the wal-index (the -shm file). */
  function walState(): { frames: number; copied: number } {
    const shm = readFileSync(`${file}-shm`);
    // The wal-index header's mxFrame (byte 16), then the checkpoint info's nBackfill (byte 96), native order.
    return { frames: shm.readUInt32LE(16), copied: shm.readUInt32LE(96) };
  }

  async function writeTurns(target: Store, count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      await target.insertConversation(conversationRecord({ id: `wal-${i}` }));
      await target.commitTurn(textTurn(`wal-${i}`, 0));
    }
  }

  it("a checkpointer copies the WAL into the database from its worker thread, no commit checkpointing", async () => {
    await store.close();
    store = openSqliteStore(file, { checkpointIntervalMs: 20 });
    await writeTurns(store, 50);
    expect(walState().frames).toBeGreaterThan(0);
    // The worker's copy, not a commit's: below the backstop no commit checkpoints (the next test's control).
    const until = Date.now() + 10_000;
    while (walState().copied < walState().frames && Date.now() < until)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(walState().copied).toBe(walState().frames);
  });

  it("close() returns once the checkpointer's connection is closed: the file is left as a stopped server's", async () => {
    await store.close();
    store = openSqliteStore(file, { checkpointIntervalMs: 20 });
    await writeTurns(store, 20);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await store.close();
    // The last connection to close checkpoints and removes the WAL: ours, not a worker still closing later.
    expect(existsSync(`${file}-wal`)).toBe(false);
    const next = new DatabaseSync(file);
    next.exec("BEGIN EXCLUSIVE; COMMIT");
    next.close();
    store = openSqliteStore(file);
  });

  it("without a checkpointer, SQLite leaves a short WAL uncopied until 1,000 pages", async () => {
    await writeTurns(store, 50);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const { frames, copied } = walState();
    expect(frames).toBeGreaterThan(0);
    expect(frames).toBeLessThan(1000);
    expect(copied).toBe(0);
  });
});
