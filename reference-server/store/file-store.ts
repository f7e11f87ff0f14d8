/**
 * Files as shared state: a store every instance reaches, holding named sets of files (a conversation's working
 * directory, a conversation's published outputs) as manifests over content-addressed blobs. Each set has a
 * generation that changes with every write, so an instance holding a local copy knows, from one read, whether
 * its copy is current. With one instance (SQLite) there is no FileStore: the local disk is the store.
 */

/** One entry of a set: a regular file, a directory or a symbolic link, by its path relative to the set's root. */
export interface StoredEntry {
  /** `/`-separated, no `.` or `..`, UTF-8. */
  path: string;
  kind: "file" | "dir" | "link";
  /** Permission bits (0o777 at most: no setuid, setgid or sticky bit is ever restored). */
  mode: number;
  /** Bytes of a file; 0 for the others. */
  size: number;
  /** Lowercase hex SHA-256 of a file's bytes; null for the others. */
  sha256: string | null;
  /** A link's target, as read; null for the others. */
  target: string | null;
}

export interface StoredSet {
  /** 0: the set was never written (or was removed). Any other value names one version, never reused. */
  generation: number;
  entries: StoredEntry[];
}

/** Proof that the writer still holds the conversation's turn lease (see the store's TurnLeases). */
export interface WriteFence {
  conversationId: string;
  token: number;
}

export interface SetChange {
  /** The generation the writer's copy was based on: the write is refused if the set moved since. */
  expected: number;
  /** Entries new or changed since `expected`; their blobs must be stored already. */
  upserts: StoredEntry[];
  /** Paths gone since `expected`. */
  deletes: string[];
  fence?: WriteFence;
}

/**
 * Blobs are de-duplicated only within a workspace: each workspace stores its own copy of a content, so the time
 * or the outcome of one tenant's save tells nothing of what another tenant holds or held. Every call that
 * names a blob names the workspace whose blobs it means, and a set's entries refer to its own workspace's.
 */
export interface FileStore {
  /** The set's current generation (0 when it holds nothing): the cheap staleness check. */
  generation(set: string): Promise<number>;
  /** The set's entries with the generation they make up (read together). */
  read(set: string): Promise<StoredSet>;
  /**
   * Which of these hashes have no blob stored yet in the workspace. Those stored count as new again for the
   * sweep: a writer about to refer to them has `sweepAfterMs` to commit.
   */
  missing(workspaceId: string, hashes: string[]): Promise<Set<string>>;
  /** Stores a blob from its bytes in order (whatever the chunking); the bytes must hash to `sha256`. */
  putBlob(workspaceId: string, sha256: string, size: number, bytes: AsyncIterable<Buffer>): Promise<void>;
  /** A stored blob's bytes, in chunks of bounded size. */
  getBlob(workspaceId: string, sha256: string): AsyncIterable<Buffer>;
  /**
   * Small blobs (each at most SMALL_BLOB_BYTES) in one round trip: many small files are most turns' files, and
   * one query each is what a save or restore of them would cost. Each must hash to its key.
   */
  putBlobs(workspaceId: string, blobs: Array<{ sha256: string; bytes: Buffer }>): Promise<void>;
  /** Small blobs' bytes by hash (each at most SMALL_BLOB_BYTES), in one round trip. */
  getBlobs(workspaceId: string, hashes: string[]): Promise<Map<string, Buffer>>;
  /**
   * Applies a change to a set of the workspace in one transaction; the set's new generation. Throws
   * FileSetConflictError (also when the set is another workspace's).
   */
  commit(workspaceId: string, set: string, change: SetChange): Promise<number>;
  /** Makes `to` hold what `from` holds (a fork, within the workspace): manifest rows only, the blobs are shared. */
  copy(workspaceId: string, from: string, to: string): Promise<void>;
  /** Forgets the set (a delete). Its blobs stay until a sweep finds no set of their workspace refers to them. */
  remove(set: string): Promise<void>;
  /**
   * Deletes blobs no set of their workspace refers to that were stored (or last asked for by `missing`) more
   * than `olderThanMs` ago, at most `limit` of them; how many went. Several instances may sweep at once.
   */
  sweep(olderThanMs: number, limit?: number): Promise<number>;
}

/** The blob calls of a FileStore for one workspace. */
export interface WorkspaceBlobs {
  missing(hashes: string[]): Promise<Set<string>>;
  putBlob(sha256: string, size: number, bytes: AsyncIterable<Buffer>): Promise<void>;
  getBlob(sha256: string): AsyncIterable<Buffer>;
  putBlobs(blobs: Array<{ sha256: string; bytes: Buffer }>): Promise<void>;
  getBlobs(hashes: string[]): Promise<Map<string, Buffer>>;
}

export function workspaceBlobs(store: FileStore, workspaceId: string): WorkspaceBlobs {
  return {
    missing: (hashes) => store.missing(workspaceId, hashes),
    putBlob: (sha256, size, bytes) => store.putBlob(workspaceId, sha256, size, bytes),
    getBlob: (sha256) => store.getBlob(workspaceId, sha256),
    putBlobs: (blobs) => store.putBlobs(workspaceId, blobs),
    getBlobs: (hashes) => store.getBlobs(workspaceId, hashes),
  };
}

/** Blobs up to this size move in batches (putBlobs/getBlobs); larger ones stream in chunks of this size. */
export const SMALL_BLOB_BYTES = 1024 * 1024;
/** What one batch of small blobs holds at most, in bytes and in blobs. */
export const BATCH_BYTES = 8 * 1024 * 1024;
export const BATCH_BLOBS = 500;

/** The set moved since the writer's copy was read, or the writer lost its turn lease: nothing was written. */
export class FileSetConflictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FileSetConflictError";
  }
}

/** The writer no longer holds the conversation's turn lease (its fencing token is stale): nothing was written. */
export class FileSetLeaseLostError extends FileSetConflictError {
  constructor() {
    super("the turn lost its lease on the conversation: files not saved");
    this.name = "FileSetLeaseLostError";
  }
}

/** A conversation's working directory. */
export function workingFilesSet(conversationId: string): string {
  return JSON.stringify(["work", conversationId]);
}

/** A conversation's outputs published to its workspace's store (one folder per agent and conversation). */
export function outputsSet(workspaceId: string, agent: string, conversationId: string): string {
  return JSON.stringify(["outputs", workspaceId, agent, conversationId]);
}
