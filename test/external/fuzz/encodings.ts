/** Serialisation: JSON, bad JSON, bytes that are not UTF-8; and content types. */

import fc from "fast-check";
import { headerRun } from "./hostile-values.ts";
import { DEEP_TOKEN } from "./mutations.ts";
import type { Arb } from "./types.ts";

export type Encoding =
  | "json"
  | "truncated"
  | "trailing-garbage"
  | "single-quotes"
  | "nan"
  | "comment"
  | "empty"
  | "whitespace"
  | "bom"
  | "invalid-utf8"
  | "duplicate-keys"
  | "huge-number"
  | "deep-array";

export const encodingArb: Arb<Encoding> = fc.oneof(
  { arbitrary: fc.constant<Encoding>("json"), weight: 12 },
  fc.constantFrom<Encoding>(
    "truncated",
    "trailing-garbage",
    "single-quotes",
    "nan",
    "comment",
    "empty",
    "whitespace",
    "bom",
    "invalid-utf8",
    "duplicate-keys",
    "huge-number",
    "deep-array",
  ),
);

export function encodeBody(value: unknown, encoding: Encoding, cut: number, deep?: number): Buffer {
  let json = JSON.stringify(value) ?? "null";
  if (deep !== undefined) json = json.replace(`"${DEEP_TOKEN}"`, `${"[".repeat(deep)}${"]".repeat(deep)}`);
  switch (encoding) {
    case "json":
      return Buffer.from(json);
    case "truncated":
      return Buffer.from(json.slice(0, json.length > 1 ? cut % (json.length - 1) : 0));
    case "trailing-garbage":
      return Buffer.from(`${json}}garbage`);
    case "single-quotes":
      return Buffer.from(json.replaceAll('"', "'"));
    case "nan":
      return Buffer.from(json.startsWith("{") ? `{"x":NaN,${json.slice(1)}` : "NaN");
    case "comment":
      return Buffer.from(`/* c */${json}`);
    case "empty":
      return Buffer.alloc(0);
    case "whitespace":
      return Buffer.from(" \n\t ");
    case "bom":
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]);
    case "invalid-utf8":
      return Buffer.concat([
        Buffer.from(json.slice(0, -1)),
        Buffer.from([0xff, 0xfe, 0xc0, 0x80]),
        Buffer.from(json.slice(-1)),
      ]);
    case "duplicate-keys":
      return Buffer.from(
        json.startsWith("{") && json.length > 2 ? `{"shared":true,"messages":1,${json.slice(1)}` : json,
      );
    case "huge-number":
      return Buffer.from(json.startsWith("{") ? `{"at_turn":1e999999,${json.slice(1)}` : "1e999999");
    case "deep-array":
      return Buffer.from(`${"[".repeat(200_000)}${"]".repeat(200_000)}`);
  }
}

export const CONTENT_TYPES: (string | null)[] = [
  "application/json",
  "application/json; charset=utf-8",
  "application/json; charset=utf-16",
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/octet-stream",
  "application/problem+json",
  "text/event-stream",
  "}{",
  "",
  null,
];

export const contentTypeArb: Arb<string | null> = fc.oneof(
  { arbitrary: fc.constant<string | null>("application/json"), weight: 12 },
  fc.constantFrom(...CONTENT_TYPES),
  // Long runs where a media-type parser looks: the type, the subtype, the parameters.
  headerRun.chain((run) =>
    fc.constantFrom(
      `application/json;${run}`,
      `${run}/json`,
      `application/${run}`,
      `application/json; a=${run}`,
    ),
  ),
);

/**
 * What the server reads from the bytes: any content type (or none) is read as JSON; an empty body is no
 * body. (A content type that is not a media type at all gets 415 before this, which is not a 2xx either.)
 */
export function parsedBody(bytes: Buffer): { ok: true; value: unknown } | { ok: false } {
  const text = bytes.toString("utf8");
  if (text.trim() === "") return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}
