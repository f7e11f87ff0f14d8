/** Hostile values. */

import fc from "fast-check";
import type { Arb } from "./types.ts";

/** Characters that break naive handling: NUL, lone surrogates, RTL/bidi marks, BOM, separators, quotes. */
export const NASTY_CHARS = [
  "\u0000",
  "\ud800",
  "\udfff",
  "\udc00\ud800",
  "\u202e",
  "\u200f",
  "\u2066",
  "\ufeff",
  "\uffff",
  "\u0085",
  "\u2028",
  "\u2029",
  "\r\n",
  "\t",
  "\u001b[31m",
  "😀",
  "👩‍👩‍👧",
  "é",
  "ß",
  "İ",
  "\\",
  '"',
  "'",
  "%",
  "%00",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal template placeholder is the point
  "${x}",
  "{{x}}",
  "<script>",
  "../",
  "..\\",
  "/",
  "NaN",
  "null",
  " ",
];

export const nastyString: Arb<string> = fc
  .array(fc.oneof(fc.constantFrom(...NASTY_CHARS), fc.string({ unit: "binary", maxLength: 6 })), {
    minLength: 1,
    maxLength: 8,
  })
  .map((parts) => parts.join(""));

export const plainWord: Arb<string> = fc.string({
  unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789-_".split("")),
  minLength: 1,
  maxLength: 16,
});

/** A huge string (64 KiB to 1 MiB) of a repeated unit, with a nasty tail. */
export const hugeString: Arb<string> = fc
  .tuple(
    fc.constantFrom(65_536, 262_144, 1_048_576),
    fc.oneof(plainWord, nastyString),
    fc.constantFrom("", "\u0000", "\ud800", "😀"),
  )
  .map(([size, unit, tail]) => unit.repeat(Math.ceil(size / Math.max(1, unit.length))).slice(0, size) + tail);

/**
 * Characters whose long runs made backtracking patterns quadratic: a run of one class, then a character that
 * makes the match fail at the end (spaces then a letter; `!` then a letter; unclosed quotes repeated).
 */
export const RUN_UNITS = [
  " ",
  ".",
  ". ",
  "\t",
  "!",
  ")",
  "/",
  "-",
  "a",
  "“",
  "‘",
  ":",
  ",",
  "\n",
  "%",
  "=",
  "read the file named “",
];
export const RUN_TAILS = ["", "x", "\u0001", "”", "/"];

/** A long run of one unit with a tail that ends it, sized for where it goes (a body field or a head). */
export function runString(sizes: number[], units = RUN_UNITS, tails = RUN_TAILS): Arb<string> {
  return fc
    .tuple(fc.constantFrom(...sizes), fc.constantFrom(...units), fc.constantFrom(...tails))
    .map(([size, unit, tail]) => `a${unit.repeat(Math.ceil(size / unit.length))}${tail}`);
}

/** Runs in a body field: the 100,000 characters that held the event loop for seconds, and ten times that. */
export const bodyRun = runString([100_000, 1_000_000]);
/** Runs in the request head (path segments, query values), which is capped at 16 KiB. */
export const headRun = runString([2_000, 12_000]);
/** Runs in header values: only what a header may carry (an HTTP client refuses the rest before sending). */
export const headerRun = runString(
  [2_000, 12_000],
  [" ", ".", "\t", "!", ")", "/", "-", "a", ":", ",", ";", "="],
  ["", "x", "/"],
);

/** Strings for free-text fields: mostly short and cheap, sometimes nasty, rarely huge. */
export const fuzzString: Arb<string> = fc.oneof(
  { arbitrary: plainWord, weight: 5 },
  { arbitrary: fc.string({ unit: "binary", maxLength: 40 }), weight: 3 },
  { arbitrary: nastyString, weight: 3 },
  { arbitrary: fc.constant(""), weight: 1 },
  { arbitrary: fc.string({ minLength: 300, maxLength: 3000 }), weight: 1 },
  { arbitrary: hugeString, weight: 1 },
  { arbitrary: bodyRun, weight: 1 },
);

export const BOUNDARY_NUMBERS = [
  0,
  1,
  200,
  201,
  -1,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 53),
  1e308,
  0.5,
  -0,
  49,
  50,
  51,
];

export const anyJson: Arb<unknown> = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, 0, -1, 1.5, 2 ** 53, "", "x", [], {}, [null], { a: 1 }),
  fc.jsonValue({ maxDepth: 3 }),
);

/** Percent-encodes a string as UTF-8 bytes, lone surrogates included (as the invalid bytes ED A0 80...). */
export function encodeSegment(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    const isHigh = code >= 0xd800 && code <= 0xdbff;
    const next = text.charCodeAt(i + 1);
    if (isHigh && next >= 0xdc00 && next <= 0xdfff) {
      out += encodeURIComponent(text.slice(i, i + 2));
      i++;
    } else if (code >= 0xd800 && code <= 0xdfff) {
      out += `%${(0xe0 | (code >> 12)).toString(16).toUpperCase()}%${(0x80 | ((code >> 6) & 0x3f)).toString(16).toUpperCase()}%${(0x80 | (code & 0x3f)).toString(16).toUpperCase()}`;
    } else {
      out += encodeURIComponent(text[i]);
    }
  }
  return out;
}

/** Path segments sent verbatim: dot segments, encoded slashes and NULs, bad escapes, very long ones. */
export const HOSTILE_SEGMENTS = [
  "..",
  ".",
  "",
  "%2e%2e",
  "%2E%2E%2F",
  "a%2Fb",
  "%2F",
  "..%2F..%2Fetc%2Fpasswd",
  "../../etc/passwd",
  "%00",
  "a%00b",
  "%ff",
  "%C0%AE%C0%AE",
  "%",
  "%zz",
  "%E2%80%AE",
  "%F0%9F%98%80",
  "%ED%A0%80",
  "~",
  "%20",
  "%09",
  ";x=1",
  "%3B",
  "%3F",
  "%23",
  "*",
  "'",
  "%22",
  "%3Cscript%3E",
  "a".repeat(2049),
  "b".repeat(8000),
  "%41".repeat(700),
  "conversations",
  "v1",
];
