/** Values from schemas. */

import fc from "fast-check";
import { isRecord } from "../../../conformance/json.ts";
import { anyJson, fuzzString, plainWord } from "./hostile-values.ts";
import type { SpecModel } from "./spec-model.ts";
import type { Arb, Json } from "./types.ts";

export interface GenContext {
  spec: SpecModel;
  /** Interesting values per property or parameter name (ids that exist, keys, model ids...). */
  hints: Record<string, Arb<unknown>>;
}

export function valueArb(schema: unknown, ctx: GenContext, name = "", depth = 0): Arb<unknown> {
  const hint = ctx.hints[name];
  const s = ctx.spec.resolve(schema);
  const own = ownValueArb(s, ctx, depth);
  return hint ? fc.oneof({ arbitrary: hint, weight: 3 }, { arbitrary: own, weight: 1 }) : own;
}

export function ownValueArb(s: Json, ctx: GenContext, depth: number): Arb<unknown> {
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

export function objectArb(s: Json, ctx: GenContext, depth: number): Arb<unknown> {
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
