/**
 * `metadata.attachments`: parsed defensively, capped, written to `<workdir>/.uploads/`.
 *
 * Rules (all drops are silent, as the API says):
 * - an entry is kept only if it is an object with non-empty string `name`, `mediaType`, `dataBase64`,
 *   and `dataBase64` is strict canonical base64 (A–Z a–z 0–9 + / with correct `=` padding, no
 *   whitespace, no `data:` prefix);
 * - entries are taken in request order; at most 10 are kept; an entry whose decoded size would take
 *   the turn's total past 10 MiB is dropped, and later smaller entries may still fit;
 * - names become a safe basename (see sanitizeAttachmentName) de-duplicated against this turn's
 *   files and files already in `.uploads/` as `a.txt`, `a (1).txt`, ... `a (20).txt`, then a random suffix.
 *
 * Every step is linear in the caller's text (hand scans, no backtracking pattern), and de-duplication costs a
 * bounded number of file creations whatever a turn planted in `.uploads/`: `.uploads/` is never listed.
 */
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { at, withBeneath } from "./beneath.ts";
import type { DiskQuota } from "./disk-quota.ts";
import type { HostUser } from "./sandbox-user.ts";

export const UPLOADS_DIR = ".uploads";
export const MAX_ATTACHMENTS = 10;
export const MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024;
const MAX_NAME_BYTES = 200;
/** An extension longer than this is treated as part of the name when shortening. */
const MAX_EXTENSION_BYTES = 16;
const FALLBACK_NAME = "attachment";
/** Numbered names tried before a random suffix: a turn that planted `a (1)` … `a (N)` costs no more than this. */
export const MAX_NUMBERED_TRIES = 20;
/** Random suffixes tried after the numbered names (a collision of 32 random bits is already unlikely). */
const RANDOM_TRIES = 4;
/** Alphabet and padding; a grouped pattern would overflow the regex stack on 10 MiB inputs. */
const BASE64_CHARS = /^[A-Za-z0-9+/]+={0,2}$/;

export interface DecodedAttachment {
  name: string;
  mediaType: string;
  data: Buffer;
}

function nonEmptyString(value: unknown): value is string {
  return typeof value === "string" && value.length > 0;
}

/** Strict base64: alphabet, length a multiple of 4, and re-encoding gives the input back (canonical padding). */
export function decodeStrictBase64(text: string): Buffer | null {
  if (text.length % 4 !== 0 || !BASE64_CHARS.test(text)) return null;
  const data = Buffer.from(text, "base64");
  return data.toString("base64") === text ? data : null;
}

/** Valid entries within the caps, in request order, names not yet sanitized. */
export function acceptAttachments(raw: unknown): DecodedAttachment[] {
  if (!Array.isArray(raw)) return [];
  const accepted: DecodedAttachment[] = [];
  let total = 0;
  for (const entry of raw) {
    if (accepted.length >= MAX_ATTACHMENTS) break;
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) continue;
    const { name, mediaType, dataBase64 } = entry as Record<string, unknown>;
    if (!nonEmptyString(name) || !nonEmptyString(mediaType) || !nonEmptyString(dataBase64)) continue;
    // Cheap size bound before decoding: 4 base64 chars carry at most 3 bytes.
    if ((dataBase64.length / 4) * 3 - 2 > MAX_ATTACHMENT_BYTES - total) continue;
    const data = decodeStrictBase64(dataBase64);
    if (data === null) continue;
    if (total + data.length > MAX_ATTACHMENT_BYTES) continue;
    total += data.length;
    accepted.push({ name, mediaType, data });
  }
  return accepted;
}

/** Cuts `text` to at most `maxBytes` UTF-8 bytes without splitting a character. */
function cutToBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  let out = "";
  let used = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char);
    if (used + size > maxBytes) break;
    out += char;
    used += size;
  }
  return out;
}

function splitExtension(name: string): { stem: string; extension: string } {
  const dot = name.lastIndexOf(".");
  if (dot <= 0) return { stem: name, extension: "" };
  const extension = name.slice(dot);
  if (Buffer.byteLength(extension) > MAX_EXTENSION_BYTES) return { stem: name, extension: "" };
  return { stem: name.slice(0, dot), extension };
}

/** Joins stem, optional ` (n)` suffix and extension within the byte limit, shortening the stem. */
function composeName(stem: string, suffix: string, extension: string): string {
  const room = MAX_NAME_BYTES - Buffer.byteLength(suffix) - Buffer.byteLength(extension);
  const cut = cutToBytes(stem, Math.max(room, 1)).trimEnd();
  return `${cut || FALLBACK_NAME}${suffix}${extension}`;
}

/** Cc: controls (NUL included); Cf: format characters (bidi controls, zero-width joiners, BOM, soft hyphen);
 * Zl/Zp: line and paragraph separators. None belongs in a name a person reads. One character, no quantifier:
 * linear whatever the input. */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;
const WHITESPACE = /\s/;

/** A dot or whitespace: what a name may not start or end with. */
function isTrimmed(char: string): boolean {
  return char === "." || WHITESPACE.test(char);
}

/**
 * A safe basename: the part after the last `/` or `\`, control characters (NUL included) and invisible
 * format characters removed (bidi overrides such as U+202E would make `‮txt.exe` read as `exe.txt`),
 * leading dots and spaces removed (never `.`, `..` or hidden), trailing dots and spaces removed,
 * at most 200 UTF-8 bytes keeping the extension; `attachment` when nothing is left.
 */
export function sanitizeAttachmentName(raw: string): string {
  // Hand scans rather than `^[.\s]+` / `[.\s]+$`: the trailing pattern is retried from every position of a long
  // run of spaces, quadratic in the name (a 100,000-character name held the event loop for seconds).
  const base = raw.slice(Math.max(raw.lastIndexOf("/"), raw.lastIndexOf("\\")) + 1);
  const printable = base.replace(UNPRINTABLE, "");
  let start = 0;
  let end = printable.length;
  while (start < end && isTrimmed(printable[start])) start++;
  while (end > start && isTrimmed(printable[end - 1])) end--;
  const trimmed = printable.slice(start, end);
  if (trimmed === "") return FALLBACK_NAME;
  const { stem, extension } = splitExtension(trimmed);
  return composeName(stem, "", extension);
}

/**
 * The names to try for `name`, in order: itself, `a (1).txt` … `a (20).txt`, then a few random suffixes
 * (`a (9f3c01d2).txt`). Bounded, so what a turn planted in `.uploads/` cannot make de-duplication long.
 */
export function* nameCandidates(name: string): Generator<string> {
  yield name;
  const { stem, extension } = splitExtension(name);
  for (let n = 1; n <= MAX_NUMBERED_TRIES; n++) yield composeName(stem, ` (${n})`, extension);
  for (let i = 0; i < RANDOM_TRIES; i++)
    yield composeName(stem, ` (${randomBytes(4).toString("hex")})`, extension);
}

/** The first of `nameCandidates(name)` not in `taken`; null when every one is taken. */
export function deduplicateName(name: string, taken: Set<string>): string | null {
  for (const candidate of nameCandidates(name)) if (!taken.has(candidate)) return candidate;
  return null;
}

/**
 * Creates the first free name of `nameCandidates(name)` in `dir`: the file system says which
 * names are taken (O_EXCL), so `.uploads/` is never listed and a name planted between a check and the
 * creation is never overwritten. No link is followed.
 */
async function createUnique(
  dir: FileHandle,
  name: string,
): Promise<{ name: string; handle: FileHandle } | null> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  for (const candidate of nameCandidates(name)) {
    try {
      return { name: candidate, handle: await open(at(dir, candidate), flags, 0o644) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
  return null;
}

/**
 * Writes the accepted attachments to `<workdir>/.uploads/` and returns their paths relative to workdir
 * (`.uploads/<name>`). `.uploads` is recreated as a real directory if a tool replaced it by a link; each file
 * is created new (O_EXCL, no link followed) relative to the opened directory, and given to the sandbox user.
 */
export async function writeAttachments(
  workdir: string,
  raw: unknown,
  user: HostUser | null = null,
  quota: Pick<DiskQuota, "fits"> | null = null,
): Promise<string[]> {
  const accepted = acceptAttachments(raw);
  if (accepted.length === 0) return [];
  const resolve = { create: true, followLast: false, owner: user, replaceOnTheWay: true };
  return withBeneath(workdir, [UPLOADS_DIR, "-"], resolve, async ({ dir }) => {
    const written: string[] = [];
    for (const attachment of accepted) {
      // Past the conversation's disk quota: dropped silently, like any attachment past the caps.
      if (quota && !(await quota.fits(attachment.data.length))) continue;
      const created = await createUnique(dir, sanitizeAttachmentName(attachment.name));
      // Every candidate taken (a turn planted the numbered names and won four 32-bit draws): dropped silently.
      if (created === null) continue;
      try {
        await created.handle.writeFile(attachment.data);
        if (user) await created.handle.chown(user.uid, user.gid);
      } finally {
        await created.handle.close();
      }
      written.push(`${UPLOADS_DIR}/${created.name}`);
    }
    return written;
  });
}
