/**
 * Spec-driven fuzzing of a running deployment with fast-check. For every operation of the bundled spec
 * (generated/openapi.json) it derives arbitraries from the operation's parameters, request schema and
 * security scheme: valid requests, and invalid ones (wrong types, missing required fields, extra fields,
 * huge strings up to 1 MiB, unicode with lone surrogates/NUL/RTL marks, boundary integers, bad JSON, wrong
 * content types, hostile path segments). Each request goes to the server for real, and its response is
 * judged:
 *
 * - never a 5xx, never a dropped connection or a hang, and the server still answers afterwards;
 * - the status is one the spec documents for the operation, and the body matches the spec for it
 *   (conformance/spec-validator.ts); a 200 event stream follows the turn grammar and each event's data
 *   matches its event schema;
 * - a request the spec refuses (by the same schemas) is never answered 2xx;
 * - data created before fuzzing (conversations with transcripts, one shared, one in another workspace)
 *   is byte-identical afterwards. Its owner's key is only ever used for reads and for requests the spec
 *   refuses, so any change to it is a fault.
 *
 * `runFuzz` returns figures and findings; it asserts nothing itself (fuzz.test.ts and bench/fuzz.ts do).
 */
import { readFileSync } from "node:fs";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import fc from "fast-check";
import { Pool } from "undici";
import { isRecord } from "../../conformance/json.ts";
import { SpecValidator } from "../../conformance/spec-validator.ts";
import { checkTurnStream } from "../../conformance/sse/grammar.ts";

// ajv-formats is CommonJS; under Node's ESM loader its default export is the function itself or wraps it.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv2020) => void;

type Json = Record<string, unknown>;
type Arb<T> = fc.Arbitrary<T>;

export const SPEC_URL = new URL("../../generated/openapi.json", import.meta.url);

export interface FuzzKeys {
  /** Admin of the main workspace: the key most requests carry. */
  admin: string;
  /** Owner of the protected conversations (an Operator): only reads and spec-refused requests. */
  member: string;
  viewer?: string;
  revoked?: string;
  /** Admin of another workspace (owns one protected conversation there). */
  foreign?: string;
  /** Key of the deployed flow. */
  flow?: string;
}

export interface FuzzAgents {
  main: string;
  storage?: string;
  repo?: string;
  /** An agent of the other workspace. */
  foreign?: string;
}

export interface FuzzOptions {
  baseUrl: string;
  /** Where flows are served (the `{flow_url}` server); default baseUrl. */
  flowUrl?: string;
  keys: FuzzKeys;
  agents?: Partial<FuzzAgents>;
  flowId?: string;
  /** Name of the flow's input variable. */
  flowInput?: string;
  routingPrefix?: string;
  /** Number of fuzzed requests (set-up, snapshots and liveness probes come on top). */
  numRuns: number;
  seed: number;
  concurrency?: number;
  /** Bound of one request; past it the request counts as a hang. */
  timeoutMs?: number;
  /** A liveness probe (models list) after every this many requests. */
  probeEvery?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface Finding {
  kind:
    | "5xx"
    | "no-response"
    | "hang"
    | "undocumented-status"
    | "spec-violation"
    | "accepted-invalid"
    | "crash";
  operation: string;
  /** Position of the request in this seed's sequence. */
  index: number;
  message: string;
  request: { method: string; path: string; headers: Record<string, string>; body: string; bodyBytes: number };
  status?: number;
  response?: string;
  /** The response body's `message`, with echoed paths and numbers elided (for grouping). */
  serverMessage?: string;
}

export interface FuzzReport {
  seed: number;
  requests: number;
  ms: number;
  requestsPerSecond: number;
  statusHistogram: Record<string, number>;
  operations: Record<string, { requests: number; statuses: Record<string, number>; invalidSent: number }>;
  findings: Finding[];
  /** Counts per finding kind. */
  counts: Record<Finding["kind"], number>;
  /**
   * Findings grouped by kind, status, operation and the response's message (ids and paths elided), with
   * one example each: the distinct faults, however often each was hit.
   */
  classes: Record<string, { count: number; example: Finding }>;
  /** Differences in the data created before fuzzing (empty when byte-identical). */
  integrity: string[];
  /** Liveness probes that succeeded / were made. */
  probes: { ok: number; made: number };
  /** What was sent: body mutations, encodings, content types, wrong methods, and requests aimed at the protected data. */
  coverage: Record<string, number>;
}

// ---------------------------------------------------------------------------------------------------------
// The spec: operations, their parameters, request schemas, statuses and security.

interface Param {
  name: string;
  in: "path" | "query" | "header";
  required: boolean;
  schema: Json;
  pointer: string;
}

interface Operation {
  id: string;
  method: string;
  path: string;
  /** "base" or "flow" (per-operation `servers` with a `{flow_url}` variable). */
  server: "base" | "flow";
  params: Param[];
  body?: { required: boolean; schema: Json; validate: ValidateFunction };
  statuses: string[];
  securityHeader?: { name: string; scheme: string };
}

function pointerEscape(segment: string): string {
  return segment.replaceAll("~", "~0").replaceAll("/", "~1");
}

export class SpecModel {
  readonly doc: Json;
  readonly ajv: Ajv2020;
  readonly operations: Operation[] = [];
  readonly queryValidators = new Map<string, ValidateFunction>();

  constructor(doc: Json) {
    this.doc = doc;
    this.ajv = new Ajv2020({ strict: false, allErrors: false });
    addFormats(this.ajv);
    this.ajv.addSchema(doc, "openapi");
    const schemes = ((doc.components as Json).securitySchemes ?? {}) as Record<string, Json>;
    const globalSecurity = (doc.security ?? []) as Json[];
    for (const [path, rawItem] of Object.entries(doc.paths as Json)) {
      const item = rawItem as Json;
      const itemPointer = `/paths/${pointerEscape(path)}`;
      for (const [method, rawOp] of Object.entries(item)) {
        const op = rawOp as Json;
        if (!isRecord(op) || typeof op.operationId !== "string") continue;
        const opPointer = `${itemPointer}/${method}`;
        const params = [
          ...((item.parameters ?? []) as Json[]).map((p, i) =>
            this.#param(p, `${itemPointer}/parameters/${i}`),
          ),
          ...((op.parameters ?? []) as Json[]).map((p, i) => this.#param(p, `${opPointer}/parameters/${i}`)),
        ];
        const requestBody = op.requestBody as Json | undefined;
        const content = (requestBody?.content ?? {}) as Json;
        const body =
          "application/json" in content
            ? {
                required: requestBody?.required === true,
                schema: (content["application/json"] as Json).schema as Json,
                validate: this.ajv.compile({
                  $ref: `openapi#${opPointer}/requestBody/content/application~1json/schema`,
                }),
              }
            : undefined;
        const security = ((op.security ?? globalSecurity) as Json[])[0];
        const schemeName = security ? Object.keys(security)[0] : undefined;
        const scheme = schemeName ? schemes[schemeName] : undefined;
        const servers = (op.servers ?? []) as Json[];
        const server = servers.some((s) => String(s.url).includes("flow_url")) ? "flow" : "base";
        this.operations.push({
          id: op.operationId,
          method: method.toUpperCase(),
          path,
          server,
          params,
          body,
          statuses: Object.keys(op.responses as Json),
          securityHeader:
            scheme && scheme.in === "header"
              ? { name: String(scheme.name), scheme: schemeName as string }
              : undefined,
        });
        const query = params.filter((p) => p.in === "query");
        if (query.length > 0) {
          this.queryValidators.set(
            op.operationId,
            this.ajv.compile({
              type: "object",
              properties: Object.fromEntries(
                query.map((p) => [p.name, { $ref: `openapi#${p.pointer}/schema` }]),
              ),
            }),
          );
        }
      }
    }
  }

  /**
   * The operation a request addresses, as a router of the spec's paths would see it (static paths before
   * templated ones; a trailing slash ignored; a template parameter is one non-empty raw segment).
   */
  match(method: string, rawPath: string): Operation | undefined {
    let path = rawPath.split(/[?#]/)[0];
    if (path.length > 1 && path.endsWith("/")) path = path.slice(0, -1);
    const segments = path.split("/");
    const candidates = this.operations
      .filter((op) => op.method === method)
      .sort(
        (a, b) =>
          a.params.filter((p) => p.in === "path").length - b.params.filter((p) => p.in === "path").length,
      );
    return candidates.find((op) => {
      const template = op.path.split("/");
      return (
        template.length === segments.length &&
        template.every((t, i) => (t.startsWith("{") ? segments[i] !== "" : t === segments[i]))
      );
    });
  }

  /** The query string as typed values (integers converted when they are whole numbers); undefined if ambiguous. */
  queryValues(op: Operation, rawPath: string): Record<string, unknown> | undefined {
    const at = rawPath.indexOf("?");
    const values: Record<string, unknown> = {};
    if (at < 0 || (rawPath.indexOf("#") >= 0 && rawPath.indexOf("#") < at)) return values;
    for (const pair of rawPath
      .slice(at + 1)
      .split("#")[0]
      .split("&")) {
      if (pair === "") continue;
      const eq = pair.indexOf("=");
      let name: string;
      let value: string;
      try {
        name = decodeURIComponent(eq < 0 ? pair : pair.slice(0, eq));
        value = decodeURIComponent(eq < 0 ? "" : pair.slice(eq + 1));
      } catch {
        return undefined;
      }
      if (name in values) return undefined;
      const param = op.params.find((p) => p.in === "query" && p.name === name);
      values[name] =
        param && this.resolve(param.schema).type === "integer" && /^-?\d{1,15}$/.test(value)
          ? Number(value)
          : value;
    }
    return values;
  }

  static load(url: URL = SPEC_URL): SpecModel {
    return new SpecModel(JSON.parse(readFileSync(url, "utf8")) as Json);
  }

  #param(raw: Json, pointer: string): Param {
    let p = raw;
    let at = pointer;
    if (typeof raw.$ref === "string") {
      at = raw.$ref.slice(1);
      p = this.at(at) ?? raw;
    }
    return {
      name: String(p.name),
      in: p.in as Param["in"],
      required: p.required === true,
      schema: (p.schema ?? {}) as Json,
      pointer: at,
    };
  }

  at(pointer: string): Json | undefined {
    let node: unknown = this.doc;
    for (const raw of pointer.split("/").slice(1)) {
      if (!isRecord(node)) return undefined;
      node = node[raw.replaceAll("~1", "/").replaceAll("~0", "~")];
    }
    return isRecord(node) ? node : undefined;
  }

  /** Follows local `$ref`s and merges `allOf` (enough to generate values; ajv stays the judge). */
  resolve(schema: unknown): Json {
    let s = isRecord(schema) ? schema : {};
    for (let hops = 0; hops < 10 && typeof s.$ref === "string"; hops++) s = this.at(s.$ref.slice(1)) ?? {};
    if (Array.isArray(s.allOf)) {
      const parts = (s.allOf as unknown[]).map((p) => this.resolve(p));
      const merged: Json = { type: "object", properties: {}, required: [] };
      for (const part of parts) {
        Object.assign(merged.properties as Json, part.properties ?? {});
        (merged.required as string[]).push(...((part.required ?? []) as string[]));
        if (part.additionalProperties !== undefined) merged.additionalProperties = part.additionalProperties;
      }
      return merged;
    }
    return s;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Hostile values.

/** Characters that break naive handling: NUL, lone surrogates, RTL/bidi marks, BOM, separators, quotes. */
const NASTY_CHARS = [
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

const nastyString: Arb<string> = fc
  .array(fc.oneof(fc.constantFrom(...NASTY_CHARS), fc.string({ unit: "binary", maxLength: 6 })), {
    minLength: 1,
    maxLength: 8,
  })
  .map((parts) => parts.join(""));

const plainWord: Arb<string> = fc.string({
  unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789-_".split("")),
  minLength: 1,
  maxLength: 16,
});

/** A huge string (64 KiB to 1 MiB) of a repeated unit, with a nasty tail. */
const hugeString: Arb<string> = fc
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
const RUN_UNITS = [
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
const RUN_TAILS = ["", "x", "\u0001", "”", "/"];

/** A long run of one unit with a tail that ends it, sized for where it goes (a body field or a head). */
function runString(sizes: number[], units = RUN_UNITS, tails = RUN_TAILS): Arb<string> {
  return fc
    .tuple(fc.constantFrom(...sizes), fc.constantFrom(...units), fc.constantFrom(...tails))
    .map(([size, unit, tail]) => `a${unit.repeat(Math.ceil(size / unit.length))}${tail}`);
}

/** Runs in a body field: the 100,000 characters that held the event loop for seconds, and ten times that. */
const bodyRun = runString([100_000, 1_000_000]);
/** Runs in the request head (path segments, query values), which is capped at 16 KiB. */
const headRun = runString([2_000, 12_000]);
/** Runs in header values: only what a header may carry (an HTTP client refuses the rest before sending). */
const headerRun = runString(
  [2_000, 12_000],
  [" ", ".", "\t", "!", ")", "/", "-", "a", ":", ",", ";", "="],
  ["", "x", "/"],
);

/** Strings for free-text fields: mostly short and cheap, sometimes nasty, rarely huge. */
const fuzzString: Arb<string> = fc.oneof(
  { arbitrary: plainWord, weight: 5 },
  { arbitrary: fc.string({ unit: "binary", maxLength: 40 }), weight: 3 },
  { arbitrary: nastyString, weight: 3 },
  { arbitrary: fc.constant(""), weight: 1 },
  { arbitrary: fc.string({ minLength: 300, maxLength: 3000 }), weight: 1 },
  { arbitrary: hugeString, weight: 1 },
  { arbitrary: bodyRun, weight: 1 },
);

const BOUNDARY_NUMBERS = [0, 1, 200, 201, -1, 2 ** 53, 2 ** 53 + 2, -(2 ** 53), 1e308, 0.5, -0, 49, 50, 51];

const anyJson: Arb<unknown> = fc.oneof(
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
const HOSTILE_SEGMENTS = [
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

// ---------------------------------------------------------------------------------------------------------
// Values from schemas.

interface GenContext {
  spec: SpecModel;
  /** Interesting values per property or parameter name (ids that exist, keys, model ids...). */
  hints: Record<string, Arb<unknown>>;
}

function valueArb(schema: unknown, ctx: GenContext, name = "", depth = 0): Arb<unknown> {
  const hint = ctx.hints[name];
  const s = ctx.spec.resolve(schema);
  const own = ownValueArb(s, ctx, depth);
  return hint ? fc.oneof({ arbitrary: hint, weight: 3 }, { arbitrary: own, weight: 1 }) : own;
}

function ownValueArb(s: Json, ctx: GenContext, depth: number): Arb<unknown> {
  if ("const" in s) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
  for (const key of ["oneOf", "anyOf"] as const) {
    if (Array.isArray(s[key]))
      return fc.oneof(...(s[key] as unknown[]).map((b) => valueArb(b, ctx, "", depth + 1)));
  }
  const type = s.type;
  if (Array.isArray(type)) return fc.oneof(...type.map((t) => ownValueArb({ ...s, type: t }, ctx, depth)));
  switch (type) {
    case "null":
      return fc.constant(null);
    case "boolean":
      return fc.boolean();
    case "integer": {
      const min = typeof s.minimum === "number" ? s.minimum : -1000;
      const max = typeof s.maximum === "number" ? s.maximum : 1000;
      return fc.oneof(
        fc.constantFrom(min, max, Math.min(max, min + 1), Math.max(min, max - 1)),
        fc.integer({ min, max }),
      );
    }
    case "number":
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case "string": {
      if (s.format === "date-time")
        return fc
          .date({ min: new Date("2000-01-01"), max: new Date("2100-01-01"), noInvalidDate: true })
          .map((d) => d.toISOString());
      if (s.contentEncoding === "base64")
        return fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b).toString("base64"));
      const min = typeof s.minLength === "number" ? s.minLength : 0;
      return fuzzString.filter((v) => v.length >= min);
    }
    case "array": {
      if (depth > 4) return fc.constant([]);
      const minLength = typeof s.minItems === "number" ? s.minItems : 0;
      return fc.array(valueArb(s.items ?? {}, ctx, "", depth + 1), {
        minLength,
        maxLength: Math.max(minLength, 3),
      });
    }
    case "object":
      return objectArb(s, ctx, depth);
    default:
      return s.properties ? objectArb(s, ctx, depth) : anyJson;
  }
}

function objectArb(s: Json, ctx: GenContext, depth: number): Arb<unknown> {
  if (depth > 5) return fc.constant({});
  const properties = (s.properties ?? {}) as Record<string, unknown>;
  const required = new Set((s.required ?? []) as string[]);
  const entries = Object.entries(properties).map(([key, schema]) => {
    const value = valueArb(schema, ctx, key, depth + 1);
    return [
      key,
      required.has(key)
        ? value.map((v) => ({ present: true, v }))
        : fc.record({ present: fc.boolean(), v: value }),
    ] as const;
  });
  const extra =
    isRecord(s.additionalProperties) && Object.keys(properties).length === 0
      ? fc.dictionary(plainWord, valueArb(s.additionalProperties, ctx, "", depth + 1), { maxKeys: 3 })
      : fc.constant({});
  return fc.tuple(fc.record(Object.fromEntries(entries)), extra).map(([fields, more]) => {
    const out: Json = { ...(more as Json) };
    for (const [key, field] of Object.entries(fields as Record<string, { present: boolean; v: unknown }>)) {
      if (field.present) out[key] = field.v;
    }
    return out;
  });
}

// ---------------------------------------------------------------------------------------------------------
// Mutations that make a valid value invalid (ajv decides afterwards whether it really is).

interface Slot {
  path: (string | number)[];
  schema: Json;
}

function slotsOf(
  value: unknown,
  schema: unknown,
  spec: SpecModel,
  path: (string | number)[] = [],
  out: Slot[] = [],
): Slot[] {
  const s = spec.resolve(schema);
  out.push({ path, schema: s });
  if (path.length > 6) return out;
  const branches = ((s.oneOf ?? s.anyOf ?? []) as unknown[]).map((b) => spec.resolve(b));
  const pick = (predicate: (b: Json) => boolean) => branches.find(predicate) ?? s;
  if (Array.isArray(value)) {
    const arraySchema = pick((b) => b.type === "array");
    value.forEach((item, i) => {
      slotsOf(item, arraySchema.items ?? {}, spec, [...path, i], out);
    });
  } else if (isRecord(value)) {
    const objectSchema = pick((b) => b.type === "object" || b.properties !== undefined);
    const props = (objectSchema.properties ?? {}) as Json;
    for (const [key, item] of Object.entries(value)) {
      const additional = isRecord(objectSchema.additionalProperties) ? objectSchema.additionalProperties : {};
      slotsOf(item, props[key] ?? additional, spec, [...path, key], out);
    }
  }
  return out;
}

function setOwn(target: Json | unknown[], key: string | number, value: unknown): void {
  // defineProperty so that "__proto__" becomes an own, serialised property rather than the prototype.
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function setAt(root: unknown, path: (string | number)[], value: unknown): unknown {
  if (path.length === 0) return value;
  const copy = structuredClone(root) as Json;
  let node: unknown = copy;
  for (const segment of path.slice(0, -1)) node = (node as Json)[segment as string];
  if (typeof node === "object" && node !== null) setOwn(node as Json, path[path.length - 1], value);
  return copy;
}

function deleteAt(root: unknown, path: (string | number)[], key: string): unknown {
  const copy = structuredClone(root) as Json;
  let node: unknown = copy;
  for (const segment of path) node = (node as Json)[segment as string];
  if (isRecord(node)) delete node[key];
  return copy;
}

const DEEP_TOKEN = "@@fuzz-deep-nesting@@";
const EXTRA_KEYS = [
  "extra",
  "__proto__",
  "constructor",
  "prototype",
  "",
  "a".repeat(300),
  "\u0000",
  "\ud800",
  "toString",
];

type Mutation =
  | { kind: "wrong-type"; slot: number; value: unknown }
  | { kind: "drop-required"; slot: number; which: number }
  | { kind: "extra-field"; slot: number; key: string; value: unknown }
  | { kind: "boundary"; slot: number; value: number }
  | { kind: "huge"; slot: number; value: string }
  | { kind: "unicode"; slot: number; value: string }
  | { kind: "root"; value: unknown }
  | { kind: "deep"; slot: number; depth: number };

const mutationArb: Arb<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant("wrong-type" as const), slot: fc.nat(), value: anyJson }),
  fc.record({ kind: fc.constant("drop-required" as const), slot: fc.nat(), which: fc.nat() }),
  fc.record({
    kind: fc.constant("extra-field" as const),
    slot: fc.nat(),
    key: fc.constantFrom(...EXTRA_KEYS),
    value: anyJson,
  }),
  fc.record({
    kind: fc.constant("boundary" as const),
    slot: fc.nat(),
    value: fc.constantFrom(...BOUNDARY_NUMBERS),
  }),
  {
    arbitrary: fc.record({ kind: fc.constant("huge" as const), slot: fc.nat(), value: hugeString }),
    weight: 1,
  },
  fc.record({ kind: fc.constant("unicode" as const), slot: fc.nat(), value: nastyString }),
  fc.record({
    kind: fc.constant("root" as const),
    value: fc.constantFrom<unknown>([], "text", 1, null, true, [{}]),
  }),
  fc.record({
    kind: fc.constant("deep" as const),
    slot: fc.nat(),
    depth: fc.constantFrom(100, 5_000, 100_000),
  }),
);

function applyMutation(
  value: unknown,
  schema: unknown,
  spec: SpecModel,
  m: Mutation,
): { value: unknown; deep?: number } {
  if (m.kind === "root") return { value: m.value };
  const slots = slotsOf(value, schema, spec);
  const slot = slots[m.slot % slots.length];
  switch (m.kind) {
    case "wrong-type":
      return { value: setAt(value, slot.path, m.value) };
    case "boundary":
      return { value: setAt(value, slot.path, m.value) };
    case "huge":
    case "unicode":
      return { value: setAt(value, slot.path, m.value) };
    case "deep":
      return { value: setAt(value, slot.path, DEEP_TOKEN), deep: m.depth };
    case "extra-field": {
      const objects = slots.filter((s) => isRecord(atPath(value, s.path)));
      if (objects.length === 0) return { value };
      const target = objects[m.slot % objects.length];
      return { value: setAt(value, [...target.path, m.key], m.value) };
    }
    case "drop-required": {
      const withRequired = slots.filter(
        (s) =>
          isRecord(atPath(value, s.path)) && Array.isArray(s.schema.required) && s.schema.required.length > 0,
      );
      if (withRequired.length === 0) return { value };
      const target = withRequired[m.slot % withRequired.length];
      const required = target.schema.required as string[];
      return { value: deleteAt(value, target.path, required[m.which % required.length]) };
    }
  }
}

function atPath(root: unknown, path: (string | number)[]): unknown {
  let node = root;
  for (const segment of path) node = (node as Json)?.[segment as string];
  return node;
}

// ---------------------------------------------------------------------------------------------------------
// Serialisation: JSON, bad JSON, bytes that are not UTF-8; and content types.

type Encoding =
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

const encodingArb: Arb<Encoding> = fc.oneof(
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

function encodeBody(value: unknown, encoding: Encoding, cut: number, deep?: number): Buffer {
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

const CONTENT_TYPES: (string | null)[] = [
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

const contentTypeArb: Arb<string | null> = fc.oneof(
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
function parsedBody(bytes: Buffer): { ok: true; value: unknown } | { ok: false } {
  const text = bytes.toString("utf8");
  if (text.trim() === "") return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

// ---------------------------------------------------------------------------------------------------------
// Requests.

interface Plan {
  /** The operation the request was generated for. */
  op: Operation;
  /** The operation its method and path actually address (undefined: none of the spec's). */
  target?: Operation;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** The key's owner ("member" for the protected data's owner), for the owner rule. */
  keyOwner: string;
  /** Whether the spec refuses this request to its target (body or query), by the spec's own schemas. */
  specInvalid: boolean;
  streamToolCalls: boolean;
  note: string;
}

interface Setup {
  protectedIds: string[];
  poolIds: string[];
  models: string[];
}

type KeyChoice = { owner: string; headers: Record<string, string> };

function keyArb(op: Operation, options: FuzzOptions): Arb<KeyChoice> {
  const k = options.keys;
  const headerName = op.securityHeader?.name ?? "X-Api-Key";
  const names = fc.constantFrom(headerName, headerName.toLowerCase(), headerName.toUpperCase());
  const asHeader = (owner: string, key: string): Arb<KeyChoice> =>
    names.map((n) => ({ owner, headers: { [n]: key } }));
  const bearer = (owner: string, key: string): Arb<KeyChoice> =>
    fc.constant({ owner, headers: { authorization: `Bearer ${key}` } });
  const garbage = fc
    .string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 300 })
    .map((key) => ({ owner: "nobody", headers: { [headerName]: key } }));
  const choices: { arbitrary: Arb<KeyChoice>; weight: number }[] = [
    { arbitrary: fc.constant({ owner: "nobody", headers: {} }), weight: 4 },
    { arbitrary: garbage, weight: 4 },
    { arbitrary: fc.constant({ owner: "nobody", headers: { [headerName]: "x".repeat(10_000) } }), weight: 1 },
    { arbitrary: headerRun.map((key) => ({ owner: "nobody", headers: { [headerName]: key } })), weight: 1 },
    {
      arbitrary: headerRun.map((run) => ({
        owner: "nobody",
        headers: { authorization: `Bearer ${run}` },
      })),
      weight: 1,
    },
  ];
  if (op.securityHeader?.scheme === "FlowApiKey") {
    if (k.flow)
      choices.push(
        { arbitrary: asHeader("flow", k.flow), weight: 40 },
        { arbitrary: bearer("flow", k.flow), weight: 4 },
      );
    choices.push({ arbitrary: asHeader("admin", k.admin), weight: 8 });
  } else {
    choices.push(
      { arbitrary: asHeader("admin", k.admin), weight: 45 },
      { arbitrary: bearer("admin", k.admin), weight: 5 },
      { arbitrary: asHeader("member", k.member), weight: 15 },
      { arbitrary: bearer("member", k.member), weight: 2 },
      {
        arbitrary: fc.constant({
          owner: "admin",
          headers: { [headerName]: k.admin, authorization: "Bearer nonsense" },
        }),
        weight: 2,
      },
    );
    if (k.viewer) choices.push({ arbitrary: asHeader("viewer", k.viewer), weight: 8 });
    if (k.revoked) choices.push({ arbitrary: asHeader("revoked", k.revoked), weight: 4 });
    if (k.foreign) choices.push({ arbitrary: asHeader("foreign", k.foreign), weight: 6 });
  }
  return fc.oneof(...choices);
}

function segmentArb(name: string, ctx: GenContext): Arb<string> {
  const hint = ctx.hints[`path:${name}`] as Arb<string> | undefined;
  const plain = fc.oneof(plainWord, nastyString).map(encodeSegment);
  const hostile = fc.constantFrom(...HOSTILE_SEGMENTS);
  return hint
    ? fc.oneof(
        { arbitrary: hint.map(encodeSegment), weight: 16 },
        { arbitrary: hostile, weight: 2 },
        { arbitrary: plain, weight: 1 },
      )
    : fc.oneof(hostile, plain);
}

/** Variants of an existing id that may or may not reach it: trailing slash, encoded, with a NUL... */
function idVariants(ids: string[]): Arb<string> {
  return fc
    .tuple(
      fc.constantFrom(...ids),
      fc.constantFrom("", "/", "%2F", "%00", "%20", "/..", "/.", "%2e", "?x=1", "#frag"),
    )
    .map(([id, suffix]) => `${encodeSegment(id)}${suffix}`);
}

function queryArb(op: Operation, ctx: GenContext): Arb<{ query: string }> {
  const params = op.params.filter((p) => p.in === "query");
  if (params.length === 0)
    return fc.oneof(
      { arbitrary: fc.constant({ query: "" }), weight: 9 },
      { arbitrary: fc.constant({ query: "?x=1&%zz=%" }), weight: 1 },
    );
  const one = (p: Param) =>
    fc.oneof(
      { arbitrary: valueArb(p.schema, ctx, p.name).map((v) => String(v)), weight: 4 },
      {
        arbitrary: fc.constantFrom(
          ...BOUNDARY_NUMBERS.map(String),
          "abc",
          "",
          "1.5",
          "01",
          "1e2",
          " 5",
          "0x10",
        ),
        weight: 2,
      },
      { arbitrary: fc.oneof(plainWord, nastyString), weight: 2 },
      // Kept under the head limit with the other parameters (a longer query is a 431 and tests nothing more).
      { arbitrary: runString([1_000, 3_000]), weight: 1 },
      {
        arbitrary: fc.constantFrom(
          "2026-13-45T00:00:00Z",
          "yesterday",
          "2026-01-01",
          "2026-01-01T00:00:00.000Z",
        ),
        weight: 1,
      },
    );
  const entries = params.map((p) => [p.name, fc.option(one(p), { freq: 2 })] as const);
  return fc
    .tuple(
      fc.record(Object.fromEntries(entries)) as Arb<Record<string, string | null>>,
      fc.constantFrom(
        "",
        "",
        "",
        "&unknown=1",
        "&limit=1&limit=2",
        "&%zz=1",
        "&a=%ff",
        "&channel=INTERACTIVE&channel=SLACK",
      ),
    )
    .map(([values, extra]) => {
      const present = Object.entries(values).filter(([, v]) => v !== null) as [string, string][];
      const query = present.map(([k, v]) => `${encodeURIComponent(k)}=${encodeSegment(v)}`).join("&") + extra;
      return { query: query ? `?${query.replace(/^&/, "")}` : "" };
    });
}

function planArb(op: Operation, ctx: GenContext, options: FuzzOptions, setup: Setup): Arb<Plan> {
  const pathParams = op.params.filter((p) => p.in === "path");
  const segments = fc.record(
    Object.fromEntries(pathParams.map((p) => [p.name, segmentArb(p.name, ctx)])),
  ) as Arb<Record<string, string>>;
  const idSegment = fc.oneof(
    { arbitrary: segments, weight: 9 },
    {
      arbitrary: fc
        .tuple(segments, idVariants([...setup.protectedIds, ...setup.poolIds]))
        .map(([s, id]) => ({ ...s, id })),
      weight: 1,
    },
  );
  const bodyArb = op.body
    ? fc.record({
        valid: valueArb(op.body.schema, ctx),
        mutate: fc.option(mutationArb, { freq: 2 }),
        encoding: encodingArb,
        cut: fc.nat(),
        contentType: contentTypeArb,
      })
    : fc.constant(undefined);
  const methodArb = fc.oneof(
    { arbitrary: fc.constant(op.method), weight: 30 },
    fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"),
  );
  return fc
    .record({
      segments: pathParams.some((p) => p.name === "id") ? idSegment : segments,
      query: queryArb(op, ctx),
      key: keyArb(op, options),
      body: bodyArb,
      method: methodArb,
      bodyOnBodyless: fc.oneof(
        { arbitrary: fc.constant(null), weight: 19 },
        { arbitrary: fc.constant('{"shared":true}'), weight: 1 },
      ),
    })
    .map((r) => {
      let path = op.path;
      const values = r.segments as Record<string, string>;
      for (const p of pathParams) path = path.replace(`{${p.name}}`, values[p.name] ?? "x");
      path += r.query.query;
      const headers: Record<string, string> = {
        accept: "application/json, text/event-stream",
        ...r.key.headers,
      };
      let body: Buffer | undefined;
      let contentType: string | null = null;
      let note = "";
      if (r.body && op.body) {
        const { value, deep } = r.body.mutate
          ? applyMutation(r.body.valid, op.body.schema, ctx.spec, r.body.mutate)
          : { value: r.body.valid };
        body = encodeBody(value, r.body.encoding, r.body.cut, deep);
        contentType = r.body.contentType;
        // A content type holding a long run is named by its length (the tag and the note stay readable).
        const type = r.body.contentType;
        const typeNote =
          type === null ? "no content-type" : type.length > 60 ? `long run (${type.length})` : type;
        note = `${r.body.mutate?.kind ?? "valid"}|${r.body.encoding}|${typeNote}`;
      } else if (r.bodyOnBodyless !== null) {
        body = Buffer.from(r.bodyOnBodyless);
        contentType = "application/json";
        note = "body on a bodyless operation";
      }
      if (r.method === "GET" || r.method === "HEAD") body = undefined;
      if (body && contentType !== null) headers["content-type"] = contentType;
      const target = ctx.spec.match(r.method, path);
      let specInvalid = false;
      let streamToolCalls = false;
      if (target?.body) {
        const parsed = body ? parsedBody(body) : ({ ok: true, value: undefined } as const);
        if (!parsed.ok) specInvalid = true;
        else if (parsed.value === undefined) specInvalid = target.body.required;
        else specInvalid = !target.body.validate(parsed.value);
        if (parsed.ok && isRecord(parsed.value) && isRecord(parsed.value.metadata))
          streamToolCalls = parsed.value.metadata.stream_tool_calls === true;
      }
      const queryValidator = target ? ctx.spec.queryValidators.get(target.id) : undefined;
      if (target && queryValidator) {
        const values = ctx.spec.queryValues(target, path);
        if (values && !queryValidator(values)) specInvalid = true;
      }
      return {
        op,
        target,
        method: r.method,
        path,
        headers,
        body,
        keyOwner: r.key.owner,
        specInvalid,
        streamToolCalls,
        note,
      };
    })
    .map((plan) => enforceOwnerRule(plan, options));
}

/**
 * The owners of the protected data (the member, and the other workspace's admin) only read, fork, or send
 * what the spec refuses: any other request of theirs is re-keyed to the admin, who may not change another
 * member's conversation either (no admin override) and cannot see the other workspace's.
 */
function enforceOwnerRule(plan: Plan, options: FuzzOptions): Plan {
  if (plan.keyOwner !== "member" && plan.keyOwner !== "foreign") return plan;
  // Judged on the method alone (not on which route the path reaches), so the rule holds whatever the
  // server's router makes of a hostile path; a fork never changes its parent.
  const mutating = plan.method !== "GET" && plan.method !== "HEAD" && plan.target?.id !== "forkConversation";
  const refused = plan.specInvalid && plan.target?.body !== undefined;
  if (!mutating || (refused && plan.method !== "DELETE")) return plan;
  const headers = { ...plan.headers };
  for (const name of Object.keys(headers)) {
    if (name.toLowerCase() === "x-api-key") headers[name] = options.keys.admin;
    if (name.toLowerCase() === "authorization") headers[name] = `Bearer ${options.keys.admin}`;
  }
  return { ...plan, headers, keyOwner: "admin" };
}

// ---------------------------------------------------------------------------------------------------------
// Running.

interface Sent {
  status: number;
  headers: Record<string, string>;
  bytes: Buffer;
}

/** Node's default limit for a request's head (request line and headers) is 16 KiB. */
const LARGE_HEAD_BYTES = 12_000;

function headSize(path: string, headers: Record<string, string>): number {
  let size = path.length + 32;
  for (const [name, value] of Object.entries(headers)) size += name.length + value.length + 4;
  return size;
}

class Transport {
  readonly #pools = new Map<string, Pool>();
  readonly #connections: number;
  constructor(connections: number) {
    this.#connections = connections;
  }
  async send(
    origin: string,
    method: string,
    path: string,
    headers: Record<string, string>,
    body: Buffer | undefined,
    timeoutMs: number,
  ): Promise<Sent> {
    let pool = this.#pools.get(origin);
    if (!pool) {
      pool = new Pool(origin, { connections: this.#connections, keepAliveTimeout: 5_000 });
      this.#pools.set(origin, pool);
    }
    const res = await pool.request({
      method: method as "GET",
      path,
      headers,
      body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      // A request head past the server's header limit gets 431 and a closed socket: such requests go on a
      // connection that is never reused.
      reset: headSize(path, headers) > LARGE_HEAD_BYTES,
    });
    const bytes = Buffer.from(await res.body.arrayBuffer());
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(res.headers)) {
      if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
    }
    return { status: res.statusCode, headers: out, bytes };
  }
  async close(): Promise<void> {
    await Promise.all([...this.#pools.values()].map((p) => p.close()));
  }
}

function excerpt(text: string, max = 300): string {
  return text.length <= max ? text : `${text.slice(0, max)}…(+${text.length - max})`;
}

function describeRequest(plan: Plan): Finding["request"] {
  const text = plan.body?.toString("utf8") ?? "";
  return {
    method: plan.method,
    path: excerpt(plan.path, 300),
    headers: Object.fromEntries(Object.entries(plan.headers).map(([k, v]) => [k, excerpt(v, 80)])),
    body: excerpt(text, 600),
    bodyBytes: plan.body?.length ?? 0,
  };
}

/** Judges one response; returns the findings (empty when it is fine). */
function judge(plan: Plan, index: number, sent: Sent, validator: SpecValidator): Finding[] {
  const findings: Finding[] = [];
  const op = plan.target;
  const contentType = sent.headers["content-type"];
  const text = sent.bytes.toString("utf8");
  const base = {
    serverMessage: serverMessageOf(text),
    operation: op && op !== plan.op ? `${plan.op.id}→${op.id}` : plan.op.id,
    index,
    request: describeRequest(plan),
    status: sent.status,
    response: excerpt(text, 600),
  };
  const documented = op?.statuses.includes(String(sent.status)) ?? false;
  // A documented 5xx (501 for `delivery: "async"`) is the API's answer, not a fault.
  if (sent.status >= 500 && !documented) {
    findings.push({ ...base, kind: "5xx", message: `status ${sent.status}` });
    return findings;
  }
  // A method and path the spec has no operation for: only "no 5xx, no crash" applies.
  if (!op) return findings;
  if (!documented) {
    const closeNote =
      sent.status === 431 && !/close/i.test(sent.headers.connection ?? "")
        ? "; the socket is then closed without `Connection: close`"
        : "";
    findings.push({
      ...base,
      kind: "undocumented-status",
      message: `status ${sent.status} is not documented for ${op.id} (documented: ${op.statuses.join(", ")})${closeNote}`,
    });
  }
  if (plan.specInvalid && sent.status >= 200 && sent.status < 300) {
    findings.push({
      ...base,
      kind: "accepted-invalid",
      message: `a request the spec refuses was answered ${sent.status} (${plan.note})`,
    });
  }
  for (const v of validator.validateResponse(op.id, sent.status, contentType, text)) {
    findings.push({
      ...base,
      kind: "spec-violation",
      message: `${v.message}${v.evidence ? ` — ${excerpt(v.evidence, 200)}` : ""}`,
    });
  }
  if (sent.status === 200 && (contentType ?? "").startsWith("text/event-stream")) {
    if (!sent.headers["x-conversation-id"]) {
      findings.push({
        ...base,
        kind: "spec-violation",
        message: "200 event stream without X-Conversation-Id",
      });
    }
    const reading = checkTurnStream(sent.bytes, { streamToolCalls: plan.streamToolCalls });
    for (const v of reading.violations.filter((x) => x.severity === "error").slice(0, 5)) {
      findings.push({ ...base, kind: "spec-violation", message: `${v.code}: ${v.message}` });
    }
    for (const event of reading.events) {
      for (const v of validator.validateEvent(event.name, event.data).slice(0, 3)) {
        findings.push({ ...base, kind: "spec-violation", message: v.message });
      }
    }
  }
  return findings;
}

function coverageTags(plan: Plan, setup: Setup): string[] {
  const tags =
    plan.note === ""
      ? []
      : plan.note.split("|").map((part, i) => `${["body", "encoding", "content-type"][i] ?? "x"}:${part}`);
  if (plan.method !== plan.op.method) tags.push(`method:${plan.method}`);
  if (!plan.target) tags.push("no-operation");
  else if (plan.target !== plan.op) tags.push("re-routed");
  const text = `${plan.path} ${plan.body?.subarray(0, 4096).toString("utf8") ?? ""}`;
  if (setup.protectedIds.some((id) => text.includes(id))) tags.push(`protected-data:${plan.keyOwner}`);
  return tags;
}

/** Reads what must not change: each protected conversation and its transcript, as its owner sees them. */
async function snapshot(
  transport: Transport,
  options: FuzzOptions,
  protectedData: { agent: string; id: string; key: string }[],
): Promise<string[]> {
  const out: string[] = [];
  for (const p of protectedData) {
    for (const suffix of ["", "/messages", "/last-compaction"]) {
      const sent = await transport.send(
        options.baseUrl,
        "GET",
        `/api/agents/${p.agent}/conversations/${encodeURIComponent(p.id)}${suffix}`,
        { "X-Api-Key": p.key },
        undefined,
        30_000,
      );
      out.push(`${p.id}${suffix} ${sent.status} ${sent.bytes.toString("utf8")}`);
    }
  }
  return out;
}

async function turn(
  transport: Transport,
  options: FuzzOptions,
  agent: string,
  key: string,
  id: string,
  prompt: string,
): Promise<void> {
  const sent = await transport.send(
    options.baseUrl,
    "POST",
    `/api/agents/${agent}/v1/messages`,
    { "X-Api-Key": key, "content-type": "application/json" },
    Buffer.from(
      JSON.stringify({ messages: [{ role: "user", content: prompt }], metadata: { conversation_id: id } }),
    ),
    60_000,
  );
  if (sent.status !== 200)
    throw new Error(`set-up turn on ${agent}/${id} gave ${sent.status}: ${sent.bytes.toString("utf8")}`);
}

async function waitForSession(
  transport: Transport,
  options: FuzzOptions,
  agent: string,
  key: string,
  id: string,
): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const sent = await transport.send(
      options.baseUrl,
      "GET",
      `/api/agents/${agent}/conversations/${encodeURIComponent(id)}`,
      { "X-Api-Key": key },
      undefined,
      10_000,
    );
    const body = JSON.parse(sent.bytes.toString("utf8")) as {
      conversation?: { agent_session_id?: string | null };
    };
    if (body.conversation?.agent_session_id) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`agent_session_id of ${id} was not recorded within 15 s`);
}

const KINDS: Finding["kind"][] = [
  "5xx",
  "no-response",
  "hang",
  "undocumented-status",
  "spec-violation",
  "accepted-invalid",
  "crash",
];

export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const spec = SpecModel.load();
  const validator = await SpecValidator.load();
  const concurrency = options.concurrency ?? 8;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const probeEvery = options.probeEvery ?? 200;
  const agents: FuzzAgents = {
    main: options.agents?.main ?? "demo-agent",
    storage: options.agents?.storage ?? "notes-agent",
    repo: options.agents?.repo ?? "acme-widgets",
    foreign: options.agents?.foreign ?? "other-agent",
  };
  const prefix = options.routingPrefix ?? "agent-api";
  const transport = new Transport(concurrency);
  const tag = `${options.seed}-${Date.now().toString(36)}`;

  // Data that must survive the run unchanged.
  const k = options.keys;
  const protectedData = [
    {
      agent: agents.main,
      id: `fz-prot-private-${tag}`,
      key: k.member,
      prompts: ["Remember this code word: fz-alpha. Reply with just OK.", "Say hello."],
    },
    {
      agent: agents.main,
      id: `fz-prot-shared-${tag}`,
      key: k.member,
      prompts: ["Think step by step before answering. Name a colour."],
    },
    ...(agents.storage
      ? [{ agent: agents.storage, id: `fz-prot-notes-${tag}`, key: k.member, prompts: ["Say hello."] }]
      : []),
    ...(k.foreign && agents.foreign
      ? [{ agent: agents.foreign, id: `fz-prot-foreign-${tag}`, key: k.foreign, prompts: ["Say hello."] }]
      : []),
  ];
  for (const p of protectedData) {
    for (const prompt of p.prompts) {
      await turn(transport, options, p.agent, p.key, p.id, prompt);
      await waitForSession(transport, options, p.agent, p.key, p.id);
    }
  }
  const shared = protectedData[1];
  const share = await transport.send(
    options.baseUrl,
    "POST",
    `/api/agents/${shared.agent}/conversations/${shared.id}`,
    { "X-Api-Key": shared.key, "content-type": "application/json" },
    Buffer.from('{"shared":true}'),
    30_000,
  );
  if (share.status !== 200) throw new Error(`set-up share gave ${share.status}`);
  const before = await snapshot(transport, options, protectedData);

  const setup: Setup = {
    protectedIds: protectedData.map((p) => p.id),
    poolIds: Array.from({ length: 8 }, (_, i) => `fz-pool-${tag}-${i}`),
    models: ["demo-large", "demo-small"],
  };
  const agentNames = [agents.main, agents.storage, agents.repo, agents.foreign].filter(
    (a): a is string => !!a,
  );
  const idArb = fc.oneof(
    { arbitrary: fc.constantFrom(...setup.poolIds), weight: 10 },
    { arbitrary: fc.constantFrom(...setup.protectedIds), weight: 5 },
    { arbitrary: plainWord.map((w) => `fz-${w}`), weight: 2 },
    {
      arbitrary: fc.oneof(
        nastyString,
        fc.constant("a".repeat(257)),
        fc.constant(" x"),
        fc.constant("x\u0000y"),
      ),
      weight: 2,
    },
    { arbitrary: headRun, weight: 1 },
  );
  const ctx: GenContext = {
    spec,
    hints: {
      "path:agent": fc.oneof(
        { arbitrary: fc.constant(agents.main), weight: 10 },
        { arbitrary: fc.constantFrom(...agentNames), weight: 4 },
        { arbitrary: plainWord, weight: 1 },
        { arbitrary: headRun, weight: 1 },
      ),
      "path:id": idArb,
      "path:app_id": fc.oneof(
        { arbitrary: fc.constant(options.flowId ?? "demo-flow"), weight: 8 },
        { arbitrary: plainWord, weight: 1 },
      ),
      conversation_id: idArb,
      model: fc.oneof(
        fc.constantFrom(...setup.models),
        fc.constantFrom(
          ...agentNames.map((a) => `${prefix}--${a}`),
          ...agentNames,
          `${prefix}--`,
          "--",
          `${prefix}--../x`,
        ),
        // Long runs around the routing prefix's separator.
        bodyRun.chain((run) => fc.constantFrom(run, `${prefix}--${run}`, `${run}--${agents.main}`)),
      ),
      automation: fc.constantFrom("nightly-summary", "no-such-automation"),
      delivery: fc.constantFrom("sync", "sync", "sync", "async"),
      // Cheap prompts: echoed by the scripted engine (no tool phrases).
      content: fc.oneof(
        fuzzString,
        fc.array(fc.record({ type: fc.constantFrom("text", "image", ""), text: fuzzString }), {
          maxLength: 3,
        }),
      ),
      role: fc.constantFrom("user", "user", "assistant"),
      name: fc.oneof(
        { arbitrary: bodyRun, weight: 1 },
        {
          arbitrary: fc.constantFrom(
            "a.txt",
            "../../etc/passwd",
            "",
            ".",
            "..",
            "a/b",
            "a\u0000b",
            "x".repeat(1000),
            "😀.txt",
            "CON",
            ".uploads",
          ),
          weight: 4,
        },
      ),
      mediaType: fc.oneof(fc.constantFrom("text/plain", "", "a/b"), bodyRun),
      dataBase64: fc.constantFrom(
        "aGVsbG8=",
        "",
        "not base64!",
        "data:text/plain;base64,aGk=",
        "=",
        "aGVsbG8",
      ),
      input_vars: fc.record({ [options.flowInput ?? "topic"]: fc.oneof(fuzzString, bodyRun) }),
    },
  };

  const total = options.numRuns;
  const plans = fc.constantFrom(...spec.operations).chain((op) => planArb(op, ctx, options, setup));
  const report: FuzzReport = {
    seed: options.seed,
    requests: 0,
    ms: 0,
    requestsPerSecond: 0,
    statusHistogram: {},
    operations: Object.fromEntries(
      spec.operations.map((op) => [op.id, { requests: 0, statuses: {}, invalidSent: 0 }]),
    ),
    findings: [],
    counts: Object.fromEntries(KINDS.map((kind) => [kind, 0])) as FuzzReport["counts"],
    integrity: [],
    probes: { ok: 0, made: 0 },
    coverage: {},
    classes: {},
  };
  const add = (finding: Finding) => {
    report.counts[finding.kind]++;
    const key = classOf(finding);
    const known = report.classes[key];
    if (known) known.count++;
    else report.classes[key] = { count: 1, example: finding };
    // Keep a bounded sample of each kind; the counts say how many there were.
    if (report.findings.filter((f) => f.kind === finding.kind).length < 25) report.findings.push(finding);
  };

  let crashed = false;
  const probe = async (index: number) => {
    report.probes.made++;
    try {
      const sent = await transport.send(
        options.baseUrl,
        "GET",
        `/api/agents/${agents.main}/v1/models`,
        { "X-Api-Key": k.admin },
        undefined,
        10_000,
      );
      if (sent.status === 200) report.probes.ok++;
      else throw new Error(`status ${sent.status}`);
    } catch (error) {
      crashed = true;
      add({
        kind: "crash",
        operation: "listModels",
        index,
        message: `liveness probe failed: ${error instanceof Error ? error.message : String(error)}`,
        request: {
          method: "GET",
          path: `/api/agents/${agents.main}/v1/models`,
          headers: {},
          body: "",
          bodyBytes: 0,
        },
      });
    }
  };

  const started = performance.now();
  const CHUNK = 100;
  let done = 0;
  for (let chunkStart = 0; chunkStart < total && !crashed; chunkStart += CHUNK) {
    const size = Math.min(CHUNK, total - chunkStart);
    // One sample per chunk with a derived seed: the same seed gives the same requests, without holding
    // every (possibly megabyte-sized) request of a long run in memory at once.
    const batch = fc.sample(plans, {
      seed: (options.seed + Math.imul(chunkStart / CHUNK, 0x9e3779b1)) | 0,
      numRuns: size,
    });
    let next = 0;
    const worker = async () => {
      while (next < batch.length && !crashed) {
        const position = next++;
        const index = chunkStart + position;
        const plan = batch[position];
        const origin = plan.op.server === "flow" ? (options.flowUrl ?? options.baseUrl) : options.baseUrl;
        const stats = report.operations[plan.op.id];
        stats.requests++;
        if (plan.specInvalid) stats.invalidSent++;
        for (const tag of coverageTags(plan, setup)) report.coverage[tag] = (report.coverage[tag] ?? 0) + 1;
        report.requests++;
        let sent: Sent;
        try {
          sent = await transport.send(origin, plan.method, plan.path, plan.headers, plan.body, timeoutMs);
        } catch (error) {
          const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
          if ((error as { code?: string }).code === "UND_ERR_INVALID_ARG") {
            // The HTTP client refused to send it (not a request the server ever saw).
            report.statusHistogram["client-refused"] = (report.statusHistogram["client-refused"] ?? 0) + 1;
            report.requests--;
            stats.requests--;
            continue;
          }
          const code = (error as { code?: string }).code ?? "";
          if (
            headSize(plan.path, plan.headers) > 16_384 &&
            /ECONNRESET|EPIPE|UND_ERR_SOCKET|other side closed/.test(`${code} ${message}`)
          ) {
            // The server refused an oversized request head (431) and closed the socket while the client
            // was still writing it: the refusal is correct, the client just could not read it.
            report.statusHistogram["closed:oversized-head"] =
              (report.statusHistogram["closed:oversized-head"] ?? 0) + 1;
            stats.statuses["closed:oversized-head"] = (stats.statuses["closed:oversized-head"] ?? 0) + 1;
            continue;
          }
          const timedOut = /timeout/i.test(message);
          const key = timedOut ? "hang" : "no-response";
          report.statusHistogram[key] = (report.statusHistogram[key] ?? 0) + 1;
          stats.statuses[key] = (stats.statuses[key] ?? 0) + 1;
          add({
            kind: timedOut ? "hang" : "no-response",
            operation: plan.op.id,
            index,
            message,
            request: describeRequest(plan),
          });
          await probe(index);
          continue;
        }
        const statusKey = String(sent.status);
        report.statusHistogram[statusKey] = (report.statusHistogram[statusKey] ?? 0) + 1;
        stats.statuses[statusKey] = (stats.statuses[statusKey] ?? 0) + 1;
        for (const finding of judge(plan, index, sent, validator)) add(finding);
        done++;
        options.onProgress?.(done, total);
        if (done % probeEvery === 0) await probe(index);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }
  report.ms = Math.round(performance.now() - started);
  report.requestsPerSecond = Math.round((report.requests / report.ms) * 1000);
  await probe(total);

  if (!crashed) {
    const after = await snapshot(transport, options, protectedData);
    for (let i = 0; i < before.length; i++) {
      if (before[i] !== after[i])
        report.integrity.push(
          `changed: ${excerpt(before[i], 400)}\n   now: ${excerpt(after[i] ?? "(missing)", 400)}`,
        );
    }
  } else {
    report.integrity.push("not compared: the server stopped answering");
  }
  await transport.close();
  return report;
}

/** The `message` of a JSON error body, with an echoed URL, quoted values and numbers elided. */
function serverMessageOf(text: string): string | undefined {
  let message: unknown;
  try {
    message = (JSON.parse(text) as { message?: unknown }).message;
  } catch {
    return undefined;
  }
  if (typeof message !== "string") return undefined;
  return message
    .replace(/^'.*'/s, "'<url>'")
    .replace(/"[^"]*"/g, '"…"')
    .replace(/\d+/g, "N")
    .slice(0, 100);
}

/** The class of a finding: kind, status, operation, and the server's message with specifics elided. */
export function classOf(finding: Finding): string {
  const message =
    finding.kind === "undocumented-status" || finding.kind === "5xx"
      ? (finding.serverMessage ?? (finding.response ?? "").slice(0, 60))
      : finding.message.replace(/\d+/g, "N").slice(0, 100);
  return `${finding.kind} ${finding.status ?? "-"} ${finding.operation}: ${message}`;
}

/**
 * Statuses the server sends that the spec does not document for the operation. Each is a known
 * disagreement between the reference server (its HTTP layer, Fastify) and the spec, reported to the lead;
 * anything else undocumented fails fuzz.test.ts.
 */
export const KNOWN_SPEC_GAPS: { id: string; status: number; message: RegExp; why: string }[] = [
  {
    id: "request-head-too-large",
    status: 431,
    message: /^The request head is larger than N KiB$/,
    why: "a request head over Node's 16 KiB limit gets 431 (with Connection: close) before any route runs: HTTP's own limit, stated in the spec's description rather than on each operation",
  },
];

/** The known spec gap an undocumented-status finding belongs to, if any. */
export function knownSpecGap(finding: Finding): (typeof KNOWN_SPEC_GAPS)[number] | undefined {
  if (finding.kind !== "undocumented-status") return undefined;
  return KNOWN_SPEC_GAPS.find(
    (g) => g.status === finding.status && g.message.test(finding.serverMessage ?? ""),
  );
}

/** Options for the reference server's demo, from the AGENT_API_* variables it hands out. */
export function demoFuzzOptions(
  env: Record<string, string>,
  baseUrl: string,
  numRuns: number,
  seed: number,
): FuzzOptions {
  return {
    baseUrl,
    flowUrl: baseUrl,
    keys: {
      admin: env.AGENT_API_KEY,
      member: env.AGENT_API_MEMBER_KEY,
      viewer: env.AGENT_API_VIEWER_KEY,
      revoked: env.AGENT_API_REVOKED_KEY,
      foreign: "other-admin-key",
      flow: env.AGENT_API_FLOW_KEY,
    },
    agents: {
      main: env.AGENT_API_AGENT,
      storage: env.AGENT_API_STORAGE_AGENT,
      repo: env.AGENT_API_REPO_AGENT,
      foreign: env.AGENT_API_FOREIGN_AGENT,
    },
    flowId: env.AGENT_API_FLOW_ID,
    flowInput: env.AGENT_API_FLOW_INPUT?.split("=")[0],
    routingPrefix: env.AGENT_API_ROUTING_PREFIX,
    numRuns,
    seed,
  };
}

/** A human summary of a report (bench output, test failure messages). */
export function formatReport(report: FuzzReport): string {
  const lines = [
    `seed ${report.seed}: ${report.requests} requests in ${(report.ms / 1000).toFixed(1)} s (${report.requestsPerSecond} requests/s)`,
    `statuses: ${Object.entries(report.statusHistogram)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([s, n]) => `${s}×${n}`)
      .join("  ")}`,
    `5xx: ${report.counts["5xx"]}  crashes: ${report.counts.crash}  no response: ${report.counts["no-response"]}  hangs: ${report.counts.hang}`,
    `spec violations: ${report.counts["spec-violation"]}  undocumented statuses: ${report.counts["undocumented-status"]}  invalid requests accepted: ${report.counts["accepted-invalid"]}`,
    `liveness probes: ${report.probes.ok}/${report.probes.made}  protected data: ${report.integrity.length === 0 ? "byte-identical" : `${report.integrity.length} difference(s)`}`,
    `coverage: ${Object.entries(report.coverage)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([tag, n]) => `${tag}×${n}`)
      .join("  ")}`,
    "per operation (requests, of which the spec refuses; statuses):",
    ...Object.entries(report.operations).map(
      ([id, s]) =>
        `  ${id.padEnd(24)} ${String(s.requests).padStart(6)} ${String(s.invalidSent).padStart(6)}  ${Object.entries(
          s.statuses,
        )
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([st, n]) => `${st}×${n}`)
          .join(" ")}`,
    ),
  ];
  const classes = Object.entries(report.classes).sort(([a], [b]) => a.localeCompare(b));
  if (classes.length > 0) lines.push("distinct findings (count, class):");
  for (const [key, { count, example }] of classes) {
    const gap = knownSpecGap(example);
    lines.push(`  ${String(count).padStart(6)}  ${key}${gap ? `  [known spec gap: ${gap.id}]` : ""}`);
  }
  // Examples of what is not a known spec gap (the gaps are described in KNOWN_SPEC_GAPS).
  for (const f of classes.map(([, c]) => c.example).filter((f) => !knownSpecGap(f))) {
    lines.push(
      `FINDING ${f.kind} #${f.index} ${f.operation}: ${f.message}\n    ${f.request.method} ${f.request.path} ${JSON.stringify(f.request.headers)} body(${f.request.bodyBytes} B)=${f.request.body}\n    -> ${f.status ?? "-"} ${f.response ?? ""}`,
    );
  }
  for (const d of report.integrity) lines.push(`INTEGRITY ${d}`);
  return lines.join("\n");
}
