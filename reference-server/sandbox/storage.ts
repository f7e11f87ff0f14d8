/**
 * Storage-backed agents: the agent's own files (its `filesDir`) are restored fresh into the working
 * directory every turn, and what a turn writes to `outputs/` is published to the workspace store.
 */
import { constants } from "node:fs";
import { copyFile, lchown, lstat, mkdir, open, readdir, readFile, rm } from "node:fs/promises";
import path from "node:path";
import { at, withBeneath } from "./beneath.ts";
import {
  clearPathForServerWrite,
  listRegularFiles,
  relativeComponents,
  resolveInside,
  SandboxPathError,
} from "./safe-paths.ts";
import type { HostUser } from "./sandbox-user.ts";
import { removeTree } from "./tree-ops.ts";

export const OUTPUTS_DIR = "outputs";

interface FileStamp {
  size: number;
  ctimeMs: number;
  ino: number;
}

/**
 * Source and copy of each file at the last restore: lets a warm turn copy only what changed since.
 * ctime (not mtime) because a tool cannot set it back.
 */
export type RestoreManifest = Map<string, { source: FileStamp; copy: FileStamp }>;

async function fileStamp(file: string): Promise<FileStamp | null> {
  try {
    const stats = await lstat(file);
    return stats.isFile() ? { size: stats.size, ctimeMs: stats.ctimeMs, ino: stats.ino } : null;
  } catch {
    return null;
  }
}

function sameStamp(a: FileStamp | null, b: FileStamp): boolean {
  return a !== null && a.size === b.size && a.ctimeMs === b.ctimeMs && a.ino === b.ino;
}

/**
 * Copies every file of `filesDir` (but its own `outputs/`) into `workdir`. With the manifest of the
 * previous restore (warm), a file neither side changed is not copied again; without it (cold),
 * everything is. Files the conversation created itself are left alone. Returns the new manifest.
 */
export async function restoreAgentFiles(
  filesDir: string,
  workdir: string,
  previous: RestoreManifest | null,
  user: HostUser | null = null,
): Promise<RestoreManifest> {
  const files = await listRegularFiles(filesDir, (rel) => rel === OUTPUTS_DIR);
  const manifest: RestoreManifest = new Map();
  for (const rel of files) {
    const parts = rel.split("/");
    const sourcePath = path.join(filesDir, ...parts);
    const dest = path.join(workdir, ...parts);
    const source = await fileStamp(sourcePath);
    if (source === null) continue;
    const known = previous?.get(rel);
    if (known && sameStamp(source, known.source) && sameStamp(await fileStamp(dest), known.copy)) {
      manifest.set(rel, known);
      continue;
    }
    // Written relative to its opened parent: a link or file a turn left on the way is replaced, never followed.
    const resolve = { create: true, followLast: false, owner: user, replaceOnTheWay: true };
    await withBeneath(workdir, parts, resolve, async ({ dir, name }) => {
      await rm(at(dir, name), { recursive: true, force: true });
      await copyFile(sourcePath, at(dir, name), constants.COPYFILE_EXCL);
      if (user) await lchown(at(dir, name), user.uid, user.gid);
    });
    const copy = await fileStamp(dest);
    if (copy) manifest.set(rel, { source, copy });
  }
  return manifest;
}

/**
 * `outputs/` is the turn's outbox: it starts empty each turn (earlier turns' files are in the store).
 * Resolves whether anything was there to remove (the disk quota's last measurement is then out of date).
 */
export async function resetOutputs(workdir: string, user: HostUser | null = null): Promise<boolean> {
  const outputs = path.join(workdir, OUTPUTS_DIR);
  const stats = await lstat(outputs).catch(() => null);
  const held = stats === null ? false : !stats.isDirectory() || (await readdir(outputs)).length > 0;
  // Node's rm costs no process; GNU rm only for what it cannot do (a tree nested past PATH_MAX).
  await rm(outputs, { recursive: true, force: true }).catch(() => removeTree(outputs));
  await mkdir(outputs, { mode: 0o755 });
  if (user) await lchown(outputs, user.uid, user.gid);
  return held;
}

/**
 * Copies the regular files under `<workdir>/outputs/` into `storeDir` (links are not followed). The
 * conversation's store folder holds at most `maxBytes` of apparent size, counted over every turn's outputs
 * (a file published again replaces its older copy) and at most `maxEntries` files and directories (empty
 * files cost no bytes but an inode each), and a file hard-linked several times is published
 * once: sparse files and hard links cost little in the working directory but full size in a copy, and a
 * bound per turn alone would let many turns fill the host's disk. What does not fit is not published.
 */
export async function publishOutputs(
  workdir: string,
  storeDir: string,
  maxBytes = Number.POSITIVE_INFINITY,
  maxEntries = Number.POSITIVE_INFINITY,
): Promise<string[]> {
  const outputs = path.join(workdir, OUTPUTS_DIR);
  const stats = await lstat(outputs).catch(() => null);
  if (!stats?.isDirectory()) return [];
  const files = await listRegularFiles(outputs);
  // Most turns publish nothing: the store folder is walked only when there is something to add to it.
  if (files.length === 0) return [];
  const published: string[] = [];
  const seen = new Set<number>();
  const stored = await storedSizes(storeDir);
  let total = [...stored.values()].reduce((sum, size) => sum + size, 0);
  // Files and directories of the folder, like the working directory's file quota: empty files in a
  // directory each cost the host an inode and a block however little their size adds up to.
  const dirsInStore = new Set([...stored.keys()].flatMap(parentDirs));
  let entries = stored.size + dirsInStore.size;
  for (const rel of files) {
    const parts = rel.split("/");
    await mkdir(storeDir, { recursive: true });
    // Read relative to opened directories, the file itself opened without following a link.
    const resolve = { create: false, followLast: false, owner: null };
    const copied = await withBeneath(workdir, [OUTPUTS_DIR, ...parts], resolve, async ({ dir, name }) => {
      const source = await open(
        at(dir, name),
        constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
      );
      try {
        const stats = await source.stat();
        if (!stats.isFile()) return false;
        if (stats.nlink > 1 && seen.has(stats.ino)) return false;
        const replaced = stored.get(rel) ?? 0;
        if (total - replaced + stats.size > maxBytes) return false;
        const newDirs = parentDirs(rel).filter((dir) => !dirsInStore.has(dir));
        const added = newDirs.length + (stored.has(rel) ? 0 : 1);
        if (entries + added > maxEntries) return false;
        entries += added;
        for (const dir of newDirs) dirsInStore.add(dir);
        seen.add(stats.ino);
        total += stats.size - replaced;
        stored.set(rel, stats.size);
        const dest = await clearPathForServerWrite(storeDir, parts);
        await copyFile(`/proc/self/fd/${source.fd}`, dest);
        return true;
      } finally {
        await source.close();
      }
    }).catch(() => false);
    if (copied) published.push(rel);
  }
  return published;
}

/** `a/b/c` → `a`, `a/b`: the directories holding a relative path. */
function parentDirs(rel: string): string[] {
  const parts = rel.split("/");
  return parts.slice(1).map((_, i) => parts.slice(0, i + 1).join("/"));
}

/** Apparent size of each file already in the store folder, by relative path. */
async function storedSizes(storeDir: string): Promise<Map<string, number>> {
  const sizes = new Map<string, number>();
  for (const rel of await listRegularFiles(storeDir)) {
    const stats = await lstat(path.join(storeDir, ...rel.split("/"))).catch(() => null);
    if (stats?.isFile()) sizes.set(rel, stats.size);
  }
  return sizes;
}

export function listStoreFiles(storeDir: string): Promise<string[]> {
  return listRegularFiles(storeDir);
}

/** Reads one published file; a path outside the store or a missing file is a SandboxPathError. */
export async function readStoreFile(storeDir: string, relPath: string): Promise<Buffer> {
  const parts = relativeComponents(relPath);
  if (parts.length === 0) throw new SandboxPathError("path must name a file");
  const stats = await lstat(storeDir).catch(() => null);
  if (!stats?.isDirectory()) throw new SandboxPathError(`no such file: ${relPath}`);
  const file = await resolveInside(storeDir, parts, false);
  if (!(await lstat(file)).isFile()) throw new SandboxPathError(`not a file: ${relPath}`);
  return readFile(file);
}
