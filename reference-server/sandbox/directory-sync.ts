/**
 * A local directory kept in step with a set of the file store. The local directory is a cache: `pull` makes
 * it hold exactly the set's current generation (writing only files whose content differs, removing what the
 * set does not hold), `push` stores what the directory holds as the set's next generation (uploading only
 * blobs the store lacks, writing only the manifest rows that changed). What this instance knows of each set
 * (the generation its copy holds, each entry's hash with the local file's change stamp when it matched) is
 * kept in a small JSON file per set under `stateDir`, so a warm copy costs one query to confirm and an
 * unchanged file is never read again; a missing or stale state only costs re-reading the local files.
 *
 * The server writes into directories a turn shaped: every path is opened relative to its opened parent
 * without following links (beneath.ts), and files are only ever written, never followed.
 */
import { createHash } from "node:crypto";
import { constants } from "node:fs";
import {
  type FileHandle,
  lchown,
  mkdir,
  open,
  opendir,
  readFile,
  rename,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import path from "node:path";
import {
  BATCH_BLOBS,
  BATCH_BYTES,
  type FileStore,
  SMALL_BLOB_BYTES,
  type StoredEntry,
  type WorkspaceBlobs,
  type WriteFence,
  workspaceBlobs,
} from "../store/file-store.ts";
import { at, resolveBeneath, withBeneath } from "./beneath.ts";
import { SandboxPathError } from "./safe-paths.ts";
import type { HostUser } from "./sandbox-user.ts";
import { type ListedEntry, listTree, UnlistableTreeError } from "./tree-listing.ts";
import { removeTree } from "./tree-ops.ts";

export interface SyncLimits {
  /** Bytes of files the set may hold (apparent sizes: what a restore writes). */
  bytes: number;
  /** Files, directories and links the set may hold. */
  entries: number;
}

/** What this instance knows of its copy of a set. */
interface KnownState {
  generation: number;
  /** The set's entries at `generation`, each with the stamp of the local copy ("" when not known). */
  entries: Array<StoredEntry & { stamp: string }>;
}

export interface PushReport {
  /** Blobs stored by this push (files whose content the store did not hold). */
  uploaded: number;
  /** Manifest rows written and removed. */
  upserts: number;
  deletes: number;
  /** The set's generation after the push. */
  generation: number;
}

export interface PullReport {
  /** Blobs read from the store and written here. */
  downloaded: number;
  /** Local entries removed because the set no longer holds them. */
  removed: number;
  /** Whether the directory changed at all. */
  changed: boolean;
}

/** The set is larger than this instance lets a directory hold: nothing is restored. */
export class OverQuotaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OverQuotaError";
  }
}

/** 256: the race-free path walk (beneath.ts) opens at most that many components. */
const MAX_DEPTH = 256;
const LIST_TIMEOUT_MS = 60_000;
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

const PERMISSION_BITS = 0o777;

const partsOf = (rel: string) => rel.split("/");

/** Small files in batches of at most BATCH_BYTES and BATCH_BLOBS (each file is at most SMALL_BLOB_BYTES). */
function smallBatches(entries: StoredEntry[]): StoredEntry[][] {
  const batches: StoredEntry[][] = [];
  let batch: StoredEntry[] = [];
  let bytes = 0;
  for (const entry of entries) {
    if (batch.length >= BATCH_BLOBS || bytes + entry.size > BATCH_BYTES) {
      batches.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(entry);
    bytes += entry.size;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

/** Whether the record says the copy holds entries while its directory is missing or empty. */
async function copyLost(dir: string, known: KnownState): Promise<boolean> {
  if (known.entries.length === 0) return false;
  const listing = await opendir(dir).catch(() => null);
  if (listing === null) return true;
  try {
    return (await listing.read()) === null;
  } finally {
    await listing.close();
  }
}

/** Whether two entries describe the same content (stamps aside). */
function sameEntry(a: StoredEntry, b: StoredEntry): boolean {
  return (
    a.kind === b.kind &&
    a.mode === b.mode &&
    a.size === b.size &&
    a.sha256 === b.sha256 &&
    a.target === b.target
  );
}

export class DirectorySync {
  readonly #store: FileStore;
  readonly #stateDir: string;
  /** One pull or push of a set at a time in this process. */
  readonly #queues = new Map<string, Promise<unknown>>();

  constructor(store: FileStore, stateDir: string) {
    this.#store = store;
    this.#stateDir = stateDir;
  }

  #serial<T>(set: string, work: () => Promise<T>): Promise<T> {
    const previous = this.#queues.get(set) ?? Promise.resolve();
    const next = previous.then(work, work);
    const tail = next.catch(() => undefined);
    this.#queues.set(set, tail);
    void tail.then(() => {
      if (this.#queues.get(set) === tail) this.#queues.delete(set);
    });
    return next;
  }

  #stateFile(set: string): string {
    return path.join(this.#stateDir, `${createHash("sha256").update(set).digest("hex")}.json`);
  }

  async #loadState(set: string): Promise<KnownState | null> {
    try {
      return JSON.parse(await readFile(this.#stateFile(set), "utf8")) as KnownState;
    } catch {
      return null;
    }
  }

  async #saveState(set: string, state: KnownState): Promise<void> {
    const file = this.#stateFile(set);
    const scratch = `${file}.${process.pid}.tmp`;
    await writeFile(scratch, JSON.stringify(state), { mode: 0o600 });
    await rename(scratch, file);
  }

  /** Forgets this instance's knowledge of the set (its local copy is being removed). */
  forget(set: string): Promise<void> {
    return this.#serial(set, () => rm(this.#stateFile(set), { force: true }));
  }

  /**
   * Makes `dir` hold the current generation of the workspace's set; entries it creates are given to `owner`.
   * Its blobs are read from the workspace's own (de-duplication holds only within a workspace).
   */
  pull(
    workspaceId: string,
    set: string,
    dir: string,
    owner: HostUser | null,
    limits: SyncLimits,
  ): Promise<PullReport> {
    return this.#serial(set, () =>
      this.#pull(workspaceBlobs(this.#store, workspaceId), set, dir, owner, limits),
    );
  }

  /**
   * Stores what `dir` holds (but `exclude`d paths) as the next generation of the workspace's set, uploading
   * every content the workspace does not hold yet, whatever other workspaces hold.
   */
  push(
    workspaceId: string,
    set: string,
    dir: string,
    limits: SyncLimits,
    options: { exclude?: (rel: string) => boolean; fence?: WriteFence } = {},
  ): Promise<PushReport> {
    return this.#serial(set, () =>
      this.#push(workspaceId, workspaceBlobs(this.#store, workspaceId), set, dir, limits, options),
    );
  }

  async #pull(
    blobs: WorkspaceBlobs,
    set: string,
    dir: string,
    owner: HostUser | null,
    limits: SyncLimits,
  ): Promise<PullReport> {
    const unchanged = { downloaded: 0, removed: 0, changed: false };
    const known = await this.#loadState(set);
    const current = await this.#store.generation(set);
    // Current, unless the copy itself is gone (its directory removed, a cache cleared): saved as it is at the
    // turn's end, the empty directory would delete every stored file.
    if (known !== null && known.generation === current && !(await copyLost(dir, known))) return unchanged;
    // Never stored, and nothing known of the local copy: it predates sharing, and the next push stores it.
    if (known === null && current === 0) return unchanged;
    const stored = await this.#store.read(set);
    // Permission bits only, whoever wrote the rows: a setuid, setgid or sticky bit is never restored.
    const remote = {
      generation: stored.generation,
      entries: stored.entries.map((entry) => ({ ...entry, mode: entry.mode & PERMISSION_BITS })),
    };
    const bytes = remote.entries.reduce((sum, entry) => sum + entry.size, 0);
    if (bytes > limits.bytes || remote.entries.length > limits.entries)
      throw new OverQuotaError(
        `the conversation's stored files (${bytes} bytes, ${remote.entries.length} entries) exceed this server's quota (${limits.bytes} bytes, ${limits.entries} files): not restored`,
      );
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const listingLimits = { depth: MAX_DEPTH, entries: limits.entries * 2 + 16, timeoutMs: LIST_TIMEOUT_MS };
    const listing = await listTree(dir, listingLimits).catch(async (error: unknown) => {
      if (!(error instanceof UnlistableTreeError)) throw error;
      // A local copy too deep or too large to list (what a turn left past the bounds) is only a cache:
      // emptied, it is restored whole (GNU rm removes any depth).
      await removeTree(dir);
      await mkdir(dir, { mode: 0o700 });
      if (owner) await lchown(dir, owner.uid, owner.gid);
      return { entries: [], skippedNames: 0, fileBytes: 0 };
    });
    const local = new Map(listing.entries.map((entry) => [entry.path, entry]));
    const knownByPath = new Map((known?.entries ?? []).map((entry) => [entry.path, entry]));
    const wanted = new Map(remote.entries.map((entry) => [entry.path, entry]));
    const report: PullReport = { downloaded: 0, removed: 0, changed: false };

    // What the set does not hold (or holds as another kind) goes, each subtree once.
    // find lists a directory's whole subtree right after it (pre-order), so one prefix at a time suffices.
    let removedPrefix: string | null = null;
    for (const entry of listing.entries) {
      if (removedPrefix !== null && entry.path.startsWith(`${removedPrefix}/`)) {
        local.delete(entry.path);
        continue;
      }
      const want = wanted.get(entry.path);
      if (want !== undefined && want.kind === entry.kind) continue;
      await this.#removeEntry(dir, entry.path);
      report.removed++;
      removedPrefix = entry.path;
      local.delete(entry.path);
    }

    /** A local path holding each content known to be here. */
    const sources = new Map<string, string>();
    /** Files whose content must be written, in the set's order. */
    const toWrite: StoredEntry[] = [];
    // Parents before children (sorted paths); modes last, so a read-only directory is filled first.
    for (const entry of remote.entries) {
      const have = local.get(entry.path);
      if (entry.kind === "dir" && have?.kind !== "dir") {
        await this.#makeDir(dir, entry.path, owner);
        report.changed = true;
      }
      if (entry.kind === "link" && (have?.kind !== "link" || have.target !== entry.target)) {
        await this.#writeLink(dir, entry, owner);
        report.changed = true;
      }
      if (entry.kind !== "file") continue;
      const before = knownByPath.get(entry.path);
      const same =
        have?.kind === "file" &&
        have.size === entry.size &&
        (before !== undefined && before.stamp === have.stamp && before.sha256 === entry.sha256
          ? true
          : (await this.#hashLocal(dir, entry.path))?.sha256 === entry.sha256);
      if (same) {
        if (have.mode !== entry.mode) {
          await this.#chmod(dir, entry.path, entry.mode);
          report.changed = true;
        }
        sources.set(entry.sha256 as string, entry.path);
      } else toWrite.push(entry);
    }
    report.downloaded = await this.#writeContents(blobs, dir, toWrite, sources, owner);
    for (const entry of remote.entries)
      if (entry.kind === "dir" && local.get(entry.path)?.mode !== entry.mode) {
        await this.#chmod(dir, entry.path, entry.mode);
        report.changed = true;
      }
    // Files copied from a local file holding their content count too: they are written, though not downloaded.
    report.changed ||= toWrite.length > 0 || report.removed > 0;

    // The stamps of what is now on disk, for the next turn's push and pull to trust.
    const after = report.changed
      ? new Map((await listTree(dir, listingLimits)).entries.map((entry) => [entry.path, entry]))
      : local;
    await this.#saveState(set, {
      generation: remote.generation,
      entries: remote.entries.map((entry) => ({ ...entry, stamp: after.get(entry.path)?.stamp ?? "" })),
    });
    return report;
  }

  async #push(
    workspaceId: string,
    files: WorkspaceBlobs,
    set: string,
    dir: string,
    limits: SyncLimits,
    options: { exclude?: (rel: string) => boolean; fence?: WriteFence },
  ): Promise<PushReport> {
    // Without a state (the copy was never pulled here), the store's current set is the base, re-hashed.
    const known: KnownState =
      (await this.#loadState(set)) ??
      (await this.#store.read(set).then((stored) => ({
        generation: stored.generation,
        entries: stored.entries.map((entry) => ({ ...entry, stamp: "" })),
      })));
    const listing = await listTree(dir, {
      depth: MAX_DEPTH,
      entries: limits.entries + 1,
      timeoutMs: LIST_TIMEOUT_MS,
    });
    const exclude = options.exclude ?? (() => false);
    const listed = listing.entries.filter((entry) => entry.kind !== "other" && !exclude(entry.path));
    const bytes = listed.reduce((sum, entry) => sum + entry.size, 0);
    if (bytes > limits.bytes || listed.length > limits.entries)
      throw new OverQuotaError(
        `the working directory holds ${bytes} bytes in ${listed.length} entries, past the quota (${limits.bytes} bytes, ${limits.entries} files): its files were not saved`,
      );
    const knownByPath = new Map(known.entries.map((entry) => [entry.path, entry]));

    const entries: Array<StoredEntry & { stamp: string }> = [];
    for (const item of listed) {
      const entry = await this.#describe(dir, item, knownByPath.get(item.path));
      if (entry !== null) entries.push(entry);
    }
    const present = new Set(entries.map((entry) => entry.path));
    const upserts = entries.filter((entry) => {
      const before = knownByPath.get(entry.path);
      return before === undefined || !sameEntry(before, entry);
    });
    // Every content a new or changed entry names is asked for (not only hashes unknown here): asking marks
    // a stored blob as new for the sweep until this commit refers to it.
    const named = [...new Set(upserts.flatMap((entry) => (entry.sha256 ? [entry.sha256] : [])))];
    const missing = named.length > 0 ? await files.missing(named) : new Set<string>();
    const toUpload = new Map<string, StoredEntry>();
    for (const entry of upserts)
      if (entry.sha256 !== null && missing.has(entry.sha256)) toUpload.set(entry.sha256, entry);
    for (const entry of toUpload.values())
      if (entry.size > SMALL_BLOB_BYTES) await this.#upload(files, dir, entry);
    for (const batch of smallBatches(
      [...toUpload.values()].filter((entry) => entry.size <= SMALL_BLOB_BYTES),
    )) {
      const blobs = [];
      for (const entry of batch)
        blobs.push({ sha256: entry.sha256 as string, bytes: await this.#readSmall(dir, entry) });
      await files.putBlobs(blobs);
    }
    const uploaded = toUpload.size;
    const deletes = known.entries.filter((entry) => !present.has(entry.path)).map((entry) => entry.path);
    let generation = known.generation;
    if (upserts.length > 0 || deletes.length > 0)
      generation = await this.#store.commit(workspaceId, set, {
        expected: known.generation,
        upserts: upserts.map(({ stamp: _, ...entry }) => entry),
        deletes,
        fence: options.fence,
      });
    // Most turns change nothing: the state on disk is then still exact, and is not written again.
    const unchanged =
      generation === known.generation &&
      entries.length === known.entries.length &&
      entries.every((entry) => knownByPath.get(entry.path)?.stamp === entry.stamp);
    if (!unchanged) await this.#saveState(set, { generation, entries });
    return { uploaded, upserts: upserts.length, deletes: deletes.length, generation };
  }

  /** The stored form of a listed entry: a file's hash is re-read only when its stamp changed. */
  async #describe(
    dir: string,
    item: ListedEntry,
    before: (StoredEntry & { stamp: string }) | undefined,
  ): Promise<(StoredEntry & { stamp: string }) | null> {
    const base = { path: item.path, mode: item.mode, stamp: item.stamp, size: 0, sha256: null, target: null };
    if (item.kind === "dir") return { ...base, kind: "dir" };
    if (item.kind === "link") return { ...base, kind: "link", target: item.target };
    if (before?.kind === "file" && before.stamp === item.stamp && before.stamp !== "")
      return { ...base, kind: "file", size: before.size, sha256: before.sha256 };
    const hashed = await this.#hashLocal(dir, item.path);
    // Gone or no longer a file since the walk: not part of this generation.
    if (hashed === null) return null;
    return { ...base, kind: "file", size: hashed.size, sha256: hashed.sha256 };
  }

  /**
   * Opens a regular file of `dir` for reading, never through a link; null when it is not one (any more).
   * Errors of `use` itself (the store's) are thrown, not taken for a missing file.
   */
  async #withLocalFile<T>(
    dir: string,
    rel: string,
    use: (handle: FileHandle, size: number) => Promise<T>,
  ): Promise<T | null> {
    const resolve = { create: false, followLast: false, owner: null };
    const location = await resolveBeneath(dir, partsOf(rel), resolve).catch(() => null);
    if (location === null) return null;
    try {
      const handle = await open(at(location.dir, location.name), READ_FLAGS).catch(() => null);
      if (handle === null) return null;
      try {
        const stats = await handle.stat();
        return stats.isFile() ? await use(handle, stats.size) : null;
      } finally {
        await handle.close();
      }
    } finally {
      await location.close();
    }
  }

  #hashLocal(dir: string, rel: string): Promise<{ sha256: string; size: number } | null> {
    return this.#withLocalFile(dir, rel, async (handle) => {
      const hash = createHash("sha256");
      let size = 0;
      for await (const chunk of handle.createReadStream({ autoClose: false, start: 0 })) {
        hash.update(chunk as Buffer);
        size += (chunk as Buffer).length;
      }
      return { sha256: hash.digest("hex"), size };
    });
  }

  async #upload(files: WorkspaceBlobs, dir: string, entry: StoredEntry): Promise<void> {
    const sha256 = entry.sha256 as string;
    const stored = await this.#withLocalFile(dir, entry.path, async (handle) => {
      await files.putBlob(sha256, entry.size, handle.createReadStream({ autoClose: false, start: 0 }));
      return true;
    });
    if (stored === null) throw new Error(`${entry.path} changed while its files were saved`);
  }

  /** A small file's bytes, which must still be what was hashed. */
  async #readSmall(dir: string, entry: StoredEntry): Promise<Buffer> {
    const bytes = await this.#withLocalFile(dir, entry.path, async (handle, size) =>
      size > SMALL_BLOB_BYTES ? null : handle.readFile(),
    );
    if (bytes === null || createHash("sha256").update(bytes).digest("hex") !== entry.sha256)
      throw new Error(`${entry.path} changed while its files were saved`);
    return bytes;
  }

  async #removeEntry(dir: string, rel: string): Promise<void> {
    const resolve = { create: false, followLast: false, owner: null };
    await withBeneath(dir, partsOf(rel), resolve, ({ dir: parent, name }) =>
      rm(at(parent, name), { recursive: true, force: true }),
    ).catch((error: unknown) => {
      // Gone already (a parent removed before it): what was wanted.
      if (!(error instanceof SandboxPathError) && (error as NodeJS.ErrnoException).code !== "ENOENT")
        throw error;
    });
  }

  /** Resolves the parent of `rel` for the server to write in, replacing anything on the way that is no directory. */
  #forWrite<T>(
    dir: string,
    rel: string,
    owner: HostUser | null,
    use: (parent: string) => Promise<T>,
  ): Promise<T> {
    const resolve = { create: true, followLast: false, owner, replaceOnTheWay: true };
    return withBeneath(dir, partsOf(rel), resolve, async ({ dir: parent, name }) => {
      await rm(at(parent, name), { recursive: true, force: true });
      return use(at(parent, name));
    });
  }

  async #makeDir(dir: string, rel: string, owner: HostUser | null): Promise<void> {
    await this.#forWrite(dir, rel, owner, async (target) => {
      await mkdir(target, { mode: 0o700 });
      if (owner) await lchown(target, owner.uid, owner.gid);
    });
  }

  async #writeLink(dir: string, entry: StoredEntry, owner: HostUser | null): Promise<void> {
    await this.#forWrite(dir, entry.path, owner, async (target) => {
      await symlink(entry.target as string, target);
      if (owner) await lchown(target, owner.uid, owner.gid);
    });
  }

  /**
   * Writes each file's content: copied from a local file holding it (`sources`, which grows as files are
   * written), else from the store, small blobs in batches. Each content is downloaded once; how many were.
   */
  async #writeContents(
    blobs: WorkspaceBlobs,
    dir: string,
    files: StoredEntry[],
    sources: Map<string, string>,
    owner: HostUser | null,
  ): Promise<number> {
    const later: StoredEntry[] = [];
    const fetch = new Map<string, StoredEntry>();
    for (const entry of files) {
      const sha256 = entry.sha256 as string;
      const source = sources.get(sha256);
      if (source !== undefined && (await this.#writeFile(blobs, dir, entry, owner, source))) continue;
      if (fetch.has(sha256)) later.push(entry);
      else fetch.set(sha256, entry);
    }
    const small = [...fetch.values()].filter((entry) => entry.size <= SMALL_BLOB_BYTES);
    for (const batch of smallBatches(small)) {
      const got = await blobs.getBlobs(batch.map((entry) => entry.sha256 as string));
      for (const entry of batch) {
        const bytes = got.get(entry.sha256 as string) as Buffer;
        if (!(await this.#writeFrom(dir, entry, owner, [bytes])))
          throw new Error(`the stored blob of ${entry.path} is corrupt`);
        sources.set(entry.sha256 as string, entry.path);
      }
    }
    for (const entry of fetch.values()) {
      if (entry.size <= SMALL_BLOB_BYTES) continue;
      await this.#writeFile(blobs, dir, entry, owner);
      sources.set(entry.sha256 as string, entry.path);
    }
    for (const entry of later) {
      const source = sources.get(entry.sha256 as string) as string;
      if (!(await this.#writeFile(blobs, dir, entry, owner, source)))
        await this.#writeFile(blobs, dir, entry, owner);
    }
    return fetch.size;
  }

  /**
   * Writes a file's content from the store, or from the local file `source` holding the same content. False
   * (nothing written) when the local source no longer holds it; the stored blob must hash right.
   */
  async #writeFile(
    blobs: WorkspaceBlobs,
    dir: string,
    entry: StoredEntry,
    owner: HostUser | null,
    source?: string,
  ): Promise<boolean> {
    if (source !== undefined) {
      const copied = await this.#withLocalFile(dir, source, (from) =>
        this.#writeFrom(dir, entry, owner, from.createReadStream({ autoClose: false, start: 0 })),
      );
      return copied === true;
    }
    if (!(await this.#writeFrom(dir, entry, owner, blobs.getBlob(entry.sha256 as string))))
      throw new Error(`the stored blob of ${entry.path} is corrupt`);
    return true;
  }

  async #writeFrom(
    dir: string,
    entry: StoredEntry,
    owner: HostUser | null,
    bytes: AsyncIterable<Buffer> | Iterable<Buffer>,
  ): Promise<boolean> {
    return this.#forWrite(dir, entry.path, owner, async (target) => {
      const handle = await open(target, CREATE_FLAGS, 0o600);
      try {
        const hash = createHash("sha256");
        for await (const chunk of bytes) {
          hash.update(chunk);
          await handle.write(chunk);
        }
        if (hash.digest("hex") !== entry.sha256) return false;
        if (owner) await handle.chown(owner.uid, owner.gid);
        await handle.chmod(entry.mode);
        return true;
      } finally {
        await handle.close();
      }
    });
  }

  async #chmod(dir: string, rel: string, mode: number): Promise<void> {
    const resolve = { create: false, followLast: false, owner: null };
    await withBeneath(dir, partsOf(rel), resolve, async ({ dir: parent, name }) => {
      // Through a descriptor opened without following a link: chmod on a path would follow one.
      const handle = await open(at(parent, name), READ_FLAGS);
      try {
        await handle.chmod(mode);
      } finally {
        await handle.close();
      }
    });
  }
}
