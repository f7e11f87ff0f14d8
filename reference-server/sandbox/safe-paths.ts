/**
 * Path handling for files the server touches inside a working directory that a tool may have shaped.
 * A tool can leave symlinks or files where directories are expected; the server must never follow
 * such a link out of the working directory when it reads, writes or restores files there.
 */
import { createHash } from "node:crypto";
import type { Dirent } from "node:fs";
import { lstat, mkdir, readdir, realpath, rm } from "node:fs/promises";
import path from "node:path";

export class SandboxPathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SandboxPathError";
  }
}

/** A directory name for any string id: readable ids stay readable, anything else becomes a hash. */
export function safeSegment(id: string): string {
  if (/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$/.test(id) && id !== "." && id !== "..") return id;
  return `h-${createHash("sha256").update(id).digest("hex")}`;
}

/** Conversation ids are arbitrary caller strings: always hashed, so no id can shape the path. */
export function conversationDirName(conversationId: string): string {
  return createHash("sha256").update(conversationId).digest("hex");
}

/**
 * Splits a caller-given relative path into its components. Absolute paths, `..`, NUL and empty paths
 * are refused. `/workspace/...` (the path a sandboxed command sees) is accepted as relative.
 */
export function relativeComponents(input: unknown): string[] {
  if (typeof input !== "string" || input.length === 0)
    throw new SandboxPathError("path must be a non-empty string");
  if (input.includes("\0")) throw new SandboxPathError("path must not contain NUL");
  let p = input.replaceAll("\\", "/");
  if (p === "/workspace") p = ".";
  else if (p.startsWith("/workspace/")) p = p.slice("/workspace/".length);
  if (p.startsWith("/")) throw new SandboxPathError(`absolute path refused: ${input}`);
  const parts = p.split("/").filter((part) => part !== "" && part !== ".");
  if (parts.includes("..")) throw new SandboxPathError(`path escapes the working directory: ${input}`);
  return parts;
}

function isInside(root: string, candidate: string): boolean {
  const rel = path.relative(root, candidate);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
}

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException).code;
}

/**
 * Resolves `parts` below `root` for the file tools. Symlinks are followed only while their target
 * stays inside root. With `createDirs`, missing intermediate directories are created (for writes);
 * a missing final component is allowed then.
 */
export async function resolveInside(root: string, parts: string[], createDirs: boolean): Promise<string> {
  const realRoot = await realpath(root);
  let current = realRoot;
  for (const [i, part] of parts.entries()) {
    const isLast = i === parts.length - 1;
    const next = path.join(current, part);
    let stats: Awaited<ReturnType<typeof lstat>>;
    try {
      stats = await lstat(next);
    } catch (error) {
      if (errorCode(error) !== "ENOENT") throw error;
      if (!createDirs)
        throw new SandboxPathError(`no such file or directory: ${parts.slice(0, i + 1).join("/")}`);
      if (!isLast) await mkdir(next);
      current = next;
      continue;
    }
    if (stats.isSymbolicLink()) {
      let target: string;
      try {
        target = await realpath(next);
      } catch {
        throw new SandboxPathError(`dangling symlink refused: ${parts.slice(0, i + 1).join("/")}`);
      }
      if (!isInside(realRoot, target)) {
        throw new SandboxPathError(
          `symlink leads outside the working directory: ${parts.slice(0, i + 1).join("/")}`,
        );
      }
      current = target;
      continue;
    }
    if (!isLast && !stats.isDirectory()) {
      throw new SandboxPathError(`not a directory: ${parts.slice(0, i + 1).join("/")}`);
    }
    current = next;
  }
  return current;
}

/**
 * Makes `root/parts...` writable by the server as a plain path: any symlink or non-directory on the
 * way is removed and replaced by a real directory, and whatever is at the final name is removed.
 * Used where the server itself writes into a working directory (restore, attachments), so a link
 * left by a tool can never redirect the write outside.
 */
export async function clearPathForServerWrite(root: string, parts: string[]): Promise<string> {
  let current = root;
  for (const [i, part] of parts.entries()) {
    const next = path.join(current, part);
    const isLast = i === parts.length - 1;
    let stats: Awaited<ReturnType<typeof lstat>> | undefined;
    try {
      stats = await lstat(next);
    } catch (error) {
      if (errorCode(error) !== "ENOENT") throw error;
    }
    if (isLast) {
      if (stats) await rm(next, { recursive: true, force: true });
    } else if (!stats || stats.isSymbolicLink() || !stats.isDirectory()) {
      if (stats) await rm(next, { recursive: true, force: true });
      await mkdir(next);
    }
    current = next;
  }
  return current;
}

/** Regular files below dir (relative paths, `/`-separated, sorted); symlinks and specials are skipped. */
export async function listRegularFiles(
  dir: string,
  skip: (rel: string) => boolean = () => false,
): Promise<string[]> {
  const found: string[] = [];
  async function walk(abs: string, rel: string): Promise<void> {
    let entries: Dirent[];
    try {
      entries = await readdir(abs, { withFileTypes: true });
    } catch (error) {
      if (errorCode(error) === "ENOENT" || errorCode(error) === "ENOTDIR") return;
      throw error;
    }
    for (const entry of entries) {
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      if (skip(childRel)) continue;
      if (entry.isDirectory()) await walk(path.join(abs, entry.name), childRel);
      else if (entry.isFile()) found.push(childRel);
    }
  }
  try {
    const stats = await lstat(dir);
    if (!stats.isDirectory()) return [];
  } catch (error) {
    if (errorCode(error) === "ENOENT") return [];
    throw error;
  }
  await walk(dir, "");
  return found.sort();
}
