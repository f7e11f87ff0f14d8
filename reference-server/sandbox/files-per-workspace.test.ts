/**
 * No shared-storage side channel (issue 30): the file store de-duplicates only within a workspace. A workspace
 * saving a content another workspace holds, or held and deleted within the sweep's hour, uploads its own bytes
 * like any new content (what it writes and how much are the same as if nobody held it), and one workspace's
 * delete and sweep never touch another's copy. The migration that brought in the workspace scope carries a
 * database's files over: each blob copied to every workspace whose sets refer to it. Runs on the test run's
 * cluster (scripts/postgres-cluster.ts); skipped without one.
 */
import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { outputsSet, workingFilesSet } from "../store/file-store.ts";
import { openPostgresStore } from "../store/postgres/index.ts";
import { migratePostgres } from "../store/postgres/migrations.ts";
import { createTestDatabase, postgresSkipReason } from "../store/testing.ts";
import type { SharedStore } from "../store/types.ts";
import { DirectorySync } from "./directory-sync.ts";
import { TestBed } from "./testing.ts";

const skip = postgresSkipReason();
const titled = (title: string) => (skip === undefined ? title : `${title} (skipped: ${skip})`);
const LIMITS = { bytes: 16 * 1024 * 1024, entries: 1000 };
const sha = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest("hex");

describe.skipIf(skip !== undefined)(titled("stored files are de-duplicated only within a workspace"), () => {
  const bed = new TestBed();
  let database: { url: string; drop(): Promise<void> };
  let store: SharedStore;
  let admin: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase();
    store = await openPostgresStore(database.url);
    admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
  });
  afterEach(() => bed.cleanup());
  afterAll(async () => {
    await admin?.end();
    await store?.close();
    await database?.drop();
  });

  /** Chunk rows and bytes stored per workspace for this content. */
  async function storedFor(content: Buffer): Promise<Record<string, { chunks: number; bytes: number }>> {
    const { rows } = await admin.query<{ workspace_id: string; chunks: number; bytes: number }>(
      `SELECT workspace_id, count(*)::integer AS chunks, sum(length(bytes))::integer AS bytes
       FROM file_chunks WHERE sha256 = $1 GROUP BY workspace_id ORDER BY workspace_id`,
      [Buffer.from(sha(content), "hex")],
    );
    return Object.fromEntries(
      rows.map((row) => [row.workspace_id, { chunks: row.chunks, bytes: row.bytes }]),
    );
  }

  /** A directory holding `files`, saved as the workspace's set by an instance of its own. */
  async function save(workspaceId: string, set: string, files: Record<string, Buffer>) {
    const dir = await bed.dir(`dir-${workspaceId}`);
    for (const [name, bytes] of Object.entries(files)) await writeFile(path.join(dir, name), bytes);
    const sync = new DirectorySync(store.fileStore, await bed.dir(`state-${workspaceId}`));
    return sync.push(workspaceId, set, dir, LIMITS);
  }

  it("a workspace saving what another holds, or held and deleted, writes its own bytes; a delete and sweep of one leaves the other's", async () => {
    // A small file (batched) and one past SMALL_BLOB_BYTES (streamed in chunks), random so no test shares them.
    const small = Buffer.from(`guessed secret ${Math.random()}`);
    const large = Buffer.alloc(1024 * 1024 + 4096, `${Math.random()}`);
    const files = { "secret.txt": small, "large.bin": large };

    const first = await save("ws-holder", workingFilesSet("conv-holder"), files);
    expect(first.uploaded).toBe(2);
    // The guesser's save is the same work as the first one's: every content uploaded, every byte written.
    const guess = await save("ws-guesser", workingFilesSet("conv-guesser"), files);
    expect(guess.uploaded).toBe(first.uploaded);
    expect(await storedFor(small)).toEqual({
      "ws-guesser": { chunks: 1, bytes: small.length },
      "ws-holder": { chunks: 1, bytes: small.length },
    });
    expect(await storedFor(large)).toEqual({
      "ws-guesser": { chunks: 2, bytes: large.length },
      "ws-holder": { chunks: 2, bytes: large.length },
    });

    // Held and deleted: the holder's blobs wait for the sweep an hour, and still answer nobody else.
    await store.fileStore.remove(workingFilesSet("conv-holder"));
    const late = await save("ws-late", workingFilesSet("conv-late"), files);
    expect(late.uploaded).toBe(2);
    expect(Object.keys(await storedFor(small))).toEqual(["ws-guesser", "ws-holder", "ws-late"]);

    // The holder's blobs are swept; the others' stay whole and restore.
    await admin.query("UPDATE file_blobs SET created_at = created_at - interval '2 hours'");
    expect(await store.fileStore.sweep(60_000)).toBe(2);
    expect(Object.keys(await storedFor(large))).toEqual(["ws-guesser", "ws-late"]);
    const copy = await bed.dir("guesser-copy");
    const reader = new DirectorySync(store.fileStore, await bed.dir("state-reader"));
    await reader.pull("ws-guesser", workingFilesSet("conv-guesser"), copy, null, LIMITS);
    expect((await readFile(path.join(copy, "large.bin"))).equals(large)).toBe(true);
    expect((await readFile(path.join(copy, "secret.txt"))).equals(small)).toBe(true);
  });

  it("a blob is asked for, read and referred to only within its workspace", async () => {
    const bytes = Buffer.from(`only ws-one's ${Math.random()}`);
    const hash = sha(bytes);
    await store.fileStore.putBlobs("ws-one", [{ sha256: hash, bytes }]);
    expect(await store.fileStore.missing("ws-two", [hash])).toEqual(new Set([hash]));
    expect(await store.fileStore.missing("ws-one", [hash])).toEqual(new Set());
    await expect(store.fileStore.getBlobs("ws-two", [hash])).rejects.toThrow(/no small blob/);
    // A manifest of ws-two naming ws-one's blob is refused by the database (the entry's foreign key).
    await expect(
      store.fileStore.commit("ws-two", workingFilesSet("conv-two"), {
        expected: 0,
        upserts: [{ path: "f", kind: "file", mode: 0o644, size: bytes.length, sha256: hash, target: null }],
        deletes: [],
      }),
    ).rejects.toThrow(/foreign key/);
  });
});

describe.skipIf(skip !== undefined)(
  titled("the migration to per-workspace blobs carries stored files over"),
  () => {
    let database: { url: string; drop(): Promise<void> };
    afterAll(async () => {
      await database?.drop();
    });

    it("copies each referred blob to every workspace whose sets refer to it, and drops only what a sweep or a delete would", async () => {
      database = await createTestDatabase();
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      const shared = Buffer.alloc(1024 * 1024 + 10, "s");
      const mine = Buffer.from("only in ws-a");
      const orphan = Buffer.from("no set refers to this");
      try {
        await migratePostgres(client, 5);
        const conversation = (id: string, workspace: string) =>
          client.query(
            `INSERT INTO conversations (id, workspace_id, agent, channel, title, created_at, updated_at)
           VALUES ($1, $2, 'helper', 'INTERACTIVE', $3, 'now', 'now')`,
            [id, workspace, Buffer.from(id)],
          );
        await conversation("c-a", "ws-a");
        await conversation("c-b", "ws-b");
        const blob = async (bytes: Buffer, chunkBytes: number) => {
          const key = Buffer.from(sha(bytes), "hex");
          await client.query("INSERT INTO file_blobs (sha256, size) VALUES ($1, $2)", [key, bytes.length]);
          for (let seq = 0; seq * chunkBytes < bytes.length; seq++)
            await client.query("INSERT INTO file_chunks (sha256, seq, bytes) VALUES ($1, $2, $3)", [
              key,
              seq,
              bytes.subarray(seq * chunkBytes, (seq + 1) * chunkBytes),
            ]);
          return key;
        };
        const sharedKey = await blob(shared, 1024 * 1024);
        const mineKey = await blob(mine, 1024 * 1024);
        await blob(orphan, 1024 * 1024);
        const set = async (key: string, entries: Array<[string, Buffer, number]>) => {
          await client.query(
            "INSERT INTO file_sets (set_key, generation) VALUES ($1, nextval('file_set_generations'))",
            [key],
          );
          for (const [name, hash, size] of entries)
            await client.query(
              "INSERT INTO file_entries (set_key, path, kind, mode, size, sha256) VALUES ($1, $2, 'file', 420, $3, $4)",
              [key, Buffer.from(name), size, hash],
            );
        };
        await set(workingFilesSet("c-a"), [
          ["shared.bin", sharedKey, shared.length],
          ["mine.txt", mineKey, mine.length],
        ]);
        await set(workingFilesSet("c-b"), [["shared.bin", sharedKey, shared.length]]);
        await set(outputsSet("ws-c", "helper", "c-gone-too"), [["report.bin", sharedKey, shared.length]]);
        // The files of a conversation deleted while its set stayed behind.
        await set(workingFilesSet("c-gone"), [["shared.bin", sharedKey, shared.length]]);
      } finally {
        await client.end();
      }

      const store = await openPostgresStore(database.url);
      try {
        const admin = new pg.Client({ connectionString: database.url });
        await admin.connect();
        try {
          const { rows } = await admin.query<{
            workspace_id: string;
            sha256: string;
            chunks: number;
            bytes: number;
          }>(
            `SELECT c.workspace_id, encode(c.sha256, 'hex') AS sha256, count(*)::integer AS chunks,
                  sum(length(c.bytes))::integer AS bytes
           FROM file_chunks c GROUP BY 1, 2 ORDER BY 1, 2`,
          );
          expect(rows).toEqual(
            [
              { workspace_id: "ws-a", sha256: sha(shared), chunks: 2, bytes: shared.length },
              { workspace_id: "ws-a", sha256: sha(mine), chunks: 1, bytes: mine.length },
              { workspace_id: "ws-b", sha256: sha(shared), chunks: 2, bytes: shared.length },
              { workspace_id: "ws-c", sha256: sha(shared), chunks: 2, bytes: shared.length },
            ].sort((x, y) => (x.workspace_id + x.sha256).localeCompare(y.workspace_id + y.sha256)),
          );
        } finally {
          await admin.end();
        }
        expect(await store.fileStore.generation(workingFilesSet("c-gone"))).toBe(0);
        expect((await store.fileStore.read(workingFilesSet("c-a"))).entries.map((e) => e.path)).toEqual([
          "mine.txt",
          "shared.bin",
        ]);
        const read = async (workspaceId: string) => {
          const parts: Buffer[] = [];
          for await (const part of store.fileStore.getBlob(workspaceId, sha(shared))) parts.push(part);
          return Buffer.concat(parts);
        };
        expect((await read("ws-b")).equals(shared)).toBe(true);
        // ws-a's delete and a sweep leave ws-b's copy whole.
        await store.fileStore.remove(workingFilesSet("c-a"));
        await store.fileStore.sweep(0);
        expect((await read("ws-b")).equals(shared)).toBe(true);
        expect(await store.fileStore.missing("ws-a", [sha(shared)])).toEqual(new Set([sha(shared)]));
      } finally {
        await store.close();
      }
    });
  },
);
