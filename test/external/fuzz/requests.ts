/** Requests. */

import fc from "fast-check";
import { isRecord } from "../../../conformance/json.ts";
import { contentTypeArb, encodeBody, encodingArb, parsedBody } from "./encodings.ts";
import {
  BOUNDARY_NUMBERS,
  encodeSegment,
  HOSTILE_SEGMENTS,
  headerRun,
  nastyString,
  plainWord,
  runString,
} from "./hostile-values.ts";
import { applyMutation, mutationArb } from "./mutations.ts";
import { type GenContext, valueArb } from "./schema-values.ts";
import type { Operation, Param } from "./spec-model.ts";
import type { Arb, FuzzOptions } from "./types.ts";

export interface Plan {
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

export interface Setup {
  protectedIds: string[];
  poolIds: string[];
  models: string[];
}

export type KeyChoice = { owner: string; headers: Record<string, string> };

export function keyArb(op: Operation, options: FuzzOptions): Arb<KeyChoice> {
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

export function segmentArb(name: string, ctx: GenContext): Arb<string> {
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
export function idVariants(ids: string[]): Arb<string> {
  return fc
    .tuple(
      fc.constantFrom(...ids),
      fc.constantFrom("", "/", "%2F", "%00", "%20", "/..", "/.", "%2e", "?x=1", "#frag"),
    )
    .map(([id, suffix]) => `${encodeSegment(id)}${suffix}`);
}

export function queryArb(op: Operation, ctx: GenContext): Arb<{ query: string }> {
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

export function planArb(op: Operation, ctx: GenContext, options: FuzzOptions, setup: Setup): Arb<Plan> {
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
export function enforceOwnerRule(plan: Plan, options: FuzzOptions): Plan {
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
