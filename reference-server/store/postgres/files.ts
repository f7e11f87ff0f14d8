/**
 * The FileStore in PostgreSQL, on the store's own pool (tables of migrations 4 and 6 in migrations.ts: every
 * blob, chunk, set and entry row carries its workspace, and an entry refers to its own workspace's blob).
 * Blobs are rows of at most CHUNK_BYTES each, written in one transaction and verified against their hash,
 * so neither side ever holds a whole file in memory. A commit checks the writer's turn lease (the same
 * fencing token the transcript's commit checks) and the set's generation, then writes only the changed rows.
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import {
  FileSetConflictError,
  FileSetLeaseLostError,
  type FileStore,
  type SetChange,
  SMALL_BLOB_BYTES,
  type StoredEntry,
  type StoredSet,
} from "../file-store.ts";
import { inTransaction } from "./transaction.ts";

/** Bytes per chunk row: large enough that a chunk's round trip is cheap, small enough to hold in memory. */
const CHUNK_BYTES = SMALL_BLOB_BYTES;
/** Rows per statement when a manifest is written or blobs are looked up (bounds one message's size). */
const BATCH = 2000;

const hex = (value: Buffer) => value.toString("hex");
const unhex = (value: string) => Buffer.from(value, "hex");

function batches<T>(items: T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += BATCH) out.push(items.slice(i, i + BATCH));
  return out;
}

/** Cuts a stream of buffers of any sizes into CHUNK_BYTES pieces (the last one shorter). */
async function* rechunk(bytes: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let length = 0;
  for await (const piece of bytes) {
    let rest = piece;
    while (length + rest.length >= CHUNK_BYTES) {
      const take = CHUNK_BYTES - length;
      pending.push(rest.subarray(0, take));
      yield Buffer.concat(pending);
      rest = rest.subarray(take);
      pending = [];
      length = 0;
    }
    if (rest.length > 0) {
      pending.push(rest);
      length += rest.length;
    }
  }
  if (length > 0) yield Buffer.concat(pending);
}

function toEntry(row: Record<string, unknown>): StoredEntry {
  return {
    path: (row.path as Buffer).toString("utf8"),
    kind: row.kind as StoredEntry["kind"],
    mode: row.mode as number,
    size: Number(row.size),
    sha256: row.sha256 === null ? null : hex(row.sha256 as Buffer),
    target: row.target === null ? null : (row.target as Buffer).toString("utf8"),
  };
}

export function createPostgresFileStore(pool: pg.Pool): FileStore {
  const transaction = <T>(work: (client: pg.PoolClient) => Promise<T>) => inTransaction(pool, work);

  async function generationOf(db: pg.Pool | pg.PoolClient, set: string, lock = ""): Promise<number> {
    return (await setOf(db, set, lock)).generation;
  }

  /** The set's generation and workspace (0 and null when it holds nothing). */
  async function setOf(
    db: pg.Pool | pg.PoolClient,
    set: string,
    lock = "",
  ): Promise<{ generation: number; workspaceId: string | null }> {
    const { rows } = await db.query<{ generation: string; workspace_id: string }>(
      `SELECT generation, workspace_id FROM file_sets WHERE set_key = $1 ${lock}`,
      [set],
    );
    return rows.length === 0
      ? { generation: 0, workspaceId: null }
      : { generation: Number(rows[0].generation), workspaceId: rows[0].workspace_id };
  }

  return {
    generation: (set) => generationOf(pool, set),

    async read(set): Promise<StoredSet> {
      return transaction(async (db) => {
        // Locked for share: a commit in flight finishes first, so the entries are those of the generation.
        const generation = await generationOf(db, set, "FOR SHARE");
        if (generation === 0) return { generation, entries: [] };
        const { rows } = await db.query(
          "SELECT path, kind, mode, size, sha256, target FROM file_entries WHERE set_key = $1 ORDER BY path",
          [set],
        );
        return { generation, entries: rows.map(toEntry) };
      });
    },

    async missing(workspaceId, hashes) {
      const missing = new Set(hashes);
      for (const batch of batches([...missing])) {
        // Touched, so a sweep running before the writer's commit leaves them (see sweep).
        const { rows } = await pool.query<{ sha256: Buffer }>(
          "UPDATE file_blobs SET created_at = clock_timestamp() WHERE workspace_id = $1 AND sha256 = ANY($2::bytea[]) RETURNING sha256",
          [workspaceId, batch.map(unhex)],
        );
        for (const row of rows) missing.delete(hex(row.sha256));
      }
      return missing;
    },

    async putBlob(workspaceId, sha256, size, bytes) {
      await transaction(async (db) => {
        // Another writer storing the same blob holds this row until it commits; then there is nothing to do.
        const claimed = await db.query(
          "INSERT INTO file_blobs (workspace_id, sha256, size) VALUES ($1, $2, $3) ON CONFLICT (workspace_id, sha256) DO NOTHING",
          [workspaceId, unhex(sha256), size],
        );
        if (claimed.rowCount === 0) return;
        const hash = createHash("sha256");
        let seq = 0;
        let written = 0;
        for await (const chunk of rechunk(bytes)) {
          hash.update(chunk);
          written += chunk.length;
          if (written > size) break;
          await db.query(
            "INSERT INTO file_chunks (workspace_id, sha256, seq, bytes) VALUES ($1, $2, $3, $4)",
            [workspaceId, unhex(sha256), seq++, chunk],
          );
        }
        // A file that changed while it was read is not what was hashed: nothing of it is stored.
        if (written !== size || hash.digest("hex") !== sha256)
          throw new Error(
            `the file changed while it was stored (expected ${size} bytes hashing to ${sha256})`,
          );
      });
    },

    async putBlobs(workspaceId, blobs) {
      if (blobs.length === 0) return;
      for (const blob of blobs)
        if (
          blob.bytes.length > SMALL_BLOB_BYTES ||
          createHash("sha256").update(blob.bytes).digest("hex") !== blob.sha256
        )
          throw new Error(`a small blob does not match its hash ${blob.sha256}`);
      await transaction(async (db) => {
        // Blobs another writer stored meanwhile are left as they are (ON CONFLICT): only new ones get a chunk.
        // In hash order: a writer waits on a row another holds uncommitted, and two writers claiming the same
        // new blobs in opposite orders (two conversations writing the same files) would wait on each other.
        const { rows } = await db.query<{ sha256: Buffer }>(
          `INSERT INTO file_blobs (workspace_id, sha256, size)
           SELECT $1, * FROM unnest($2::bytea[], $3::bigint[]) AS t (sha256, size) ORDER BY sha256
           ON CONFLICT (workspace_id, sha256) DO NOTHING RETURNING sha256`,
          [workspaceId, blobs.map((blob) => unhex(blob.sha256)), blobs.map((blob) => blob.bytes.length)],
        );
        const claimed = new Set(rows.map((row) => hex(row.sha256)));
        const mine = blobs.filter((blob) => claimed.delete(blob.sha256) && blob.bytes.length > 0);
        if (mine.length === 0) return;
        await db.query(
          "INSERT INTO file_chunks (workspace_id, sha256, seq, bytes) SELECT $1, sha256, 0, bytes FROM unnest($2::bytea[], $3::bytea[]) AS t (sha256, bytes)",
          [workspaceId, mine.map((blob) => unhex(blob.sha256)), mine.map((blob) => blob.bytes)],
        );
      });
    },

    async getBlobs(workspaceId, hashes) {
      const found = new Map<string, Buffer>();
      if (hashes.length === 0) return found;
      const { rows } = await pool.query<{ sha256: Buffer; size: string; bytes: Buffer | null }>(
        `SELECT b.sha256, b.size, c.bytes FROM file_blobs b
         LEFT JOIN file_chunks c ON c.workspace_id = b.workspace_id AND c.sha256 = b.sha256 AND c.seq = 0
         WHERE b.workspace_id = $1 AND b.sha256 = ANY($2::bytea[]) AND b.size <= $3`,
        [workspaceId, hashes.map(unhex), SMALL_BLOB_BYTES],
      );
      for (const row of rows) found.set(hex(row.sha256), row.bytes ?? Buffer.alloc(0));
      for (const sha256 of hashes)
        if (!found.has(sha256)) throw new Error(`no small blob ${sha256} in the file store`);
      return found;
    },

    async *getBlob(workspaceId, sha256) {
      const key = unhex(sha256);
      const { rows } = await pool.query<{ size: string }>(
        "SELECT size FROM file_blobs WHERE workspace_id = $1 AND sha256 = $2",
        [workspaceId, key],
      );
      if (rows.length === 0) throw new Error(`no blob ${sha256} in the file store`);
      const size = Number(rows[0].size);
      let read = 0;
      // One chunk per query: at most CHUNK_BYTES of it in memory at a time.
      for (let seq = 0; read < size; seq++) {
        const chunk = await pool.query<{ bytes: Buffer }>(
          "SELECT bytes FROM file_chunks WHERE workspace_id = $1 AND sha256 = $2 AND seq = $3",
          [workspaceId, key, seq],
        );
        if (chunk.rows.length === 0) throw new Error(`blob ${sha256} is missing chunk ${seq}`);
        read += chunk.rows[0].bytes.length;
        yield chunk.rows[0].bytes;
      }
    },

    async commit(workspaceId, set, change: SetChange) {
      return transaction(async (db) => {
        if (change.fence) {
          const { rows } = await db.query<{ token: string }>(
            "SELECT token FROM turn_leases WHERE conversation_id = $1 FOR UPDATE",
            [change.fence.conversationId],
          );
          if (rows.length === 0 || Number(rows[0].token) !== change.fence.token)
            throw new FileSetLeaseLostError();
        }
        const { generation: current, workspaceId: owner } = await setOf(db, set, "FOR UPDATE");
        if (owner !== null && owner !== workspaceId)
          throw new FileSetConflictError("the files belong to another workspace: files not saved");
        if (current !== change.expected)
          throw new FileSetConflictError(
            `the files changed elsewhere since this copy was read (generation ${current}, copy of ${change.expected}): files not saved`,
          );
        const { rows } = await db.query<{ generation: string }>(
          current === 0
            ? "INSERT INTO file_sets (set_key, workspace_id, generation) VALUES ($1, $2, nextval('file_set_generations')) RETURNING generation"
            : "UPDATE file_sets SET generation = nextval('file_set_generations') WHERE set_key = $1 AND workspace_id = $2 RETURNING generation",
          [set, workspaceId],
        );
        for (const batch of batches(change.deletes))
          await db.query("DELETE FROM file_entries WHERE set_key = $1 AND path = ANY($2::bytea[])", [
            set,
            batch.map((path) => Buffer.from(path, "utf8")),
          ]);
        for (const batch of batches(change.upserts))
          await db.query(
            `INSERT INTO file_entries (set_key, workspace_id, path, kind, mode, size, sha256, target)
             SELECT $1, $8, * FROM unnest($2::bytea[], $3::text[], $4::integer[], $5::bigint[], $6::bytea[], $7::bytea[])
             ON CONFLICT (set_key, path) DO UPDATE SET kind = EXCLUDED.kind, mode = EXCLUDED.mode,
               size = EXCLUDED.size, sha256 = EXCLUDED.sha256, target = EXCLUDED.target`,
            [
              set,
              batch.map((e) => Buffer.from(e.path, "utf8")),
              batch.map((e) => e.kind),
              batch.map((e) => e.mode),
              batch.map((e) => e.size),
              batch.map((e) => (e.sha256 === null ? null : unhex(e.sha256))),
              batch.map((e) => (e.target === null ? null : Buffer.from(e.target, "utf8"))),
              workspaceId,
            ],
          );
        return Number(rows[0].generation);
      }).catch((error: unknown) => {
        // 23505: another writer created the set at the same moment.
        if ((error as { code?: unknown }).code === "23505")
          throw new FileSetConflictError("the files changed elsewhere at the same time: files not saved");
        throw error;
      });
    },

    async copy(workspaceId, from, to) {
      await transaction(async (db) => {
        await db.query("DELETE FROM file_sets WHERE set_key = $1", [to]);
        // Locked for share: no commit of the source lands between the two statements. Only a set of the
        // workspace is copied: its entries name that workspace's blobs.
        const source = await setOf(db, from, "FOR SHARE");
        if (source.generation === 0 || source.workspaceId !== workspaceId) return;
        await db.query(
          "INSERT INTO file_sets (set_key, workspace_id, generation) VALUES ($1, $2, nextval('file_set_generations'))",
          [to, workspaceId],
        );
        await db.query(
          `INSERT INTO file_entries (set_key, workspace_id, path, kind, mode, size, sha256, target)
           SELECT $1, workspace_id, path, kind, mode, size, sha256, target FROM file_entries WHERE set_key = $2`,
          [to, from],
        );
      });
    },

    async remove(set) {
      await pool.query("DELETE FROM file_sets WHERE set_key = $1", [set]);
    },

    async sweep(olderThanMs, limit = 1000) {
      // SKIP LOCKED: a blob a commit is referring to right now (its foreign key check holds the row) is left
      // for a later sweep, and sweeping instances take different rows.
      const { rowCount } = await pool.query(
        `DELETE FROM file_blobs WHERE (workspace_id, sha256) IN (
           SELECT b.workspace_id, b.sha256 FROM file_blobs b
           WHERE b.created_at < clock_timestamp() - $1 * interval '1 millisecond'
             AND NOT EXISTS (SELECT 1 FROM file_entries e WHERE e.workspace_id = b.workspace_id AND e.sha256 = b.sha256)
           LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [Math.max(0, Math.trunc(olderThanMs)), limit],
      );
      return rowCount ?? 0;
    },
  };
}
