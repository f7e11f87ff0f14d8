/** Mutations that make a valid value invalid (ajv decides afterwards whether it really is). */

import fc from "fast-check";
import { isRecord } from "../../../conformance/json.ts";
import { anyJson, BOUNDARY_NUMBERS, hugeString, nastyString } from "./hostile-values.ts";
import type { SpecModel } from "./spec-model.ts";
import type { Arb, Json } from "./types.ts";

export interface Slot {
  path: (string | number)[];
  schema: Json;
}

export function slotsOf(
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

export function setOwn(target: Json | unknown[], key: string | number, value: unknown): void {
  // defineProperty so that "__proto__" becomes an own, serialised property rather than the prototype.
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

export function setAt(root: unknown, path: (string | number)[], value: unknown): unknown {
  if (path.length === 0) return value;
  const copy = structuredClone(root) as Json;
  let node: unknown = copy;
  for (const segment of path.slice(0, -1)) node = (node as Json)[segment as string];
  if (typeof node === "object" && node !== null) setOwn(node as Json, path[path.length - 1], value);
  return copy;
}

export function deleteAt(root: unknown, path: (string | number)[], key: string): unknown {
  const copy = structuredClone(root) as Json;
  let node: unknown = copy;
  for (const segment of path) node = (node as Json)[segment as string];
  if (isRecord(node)) delete node[key];
  return copy;
}

export const DEEP_TOKEN = "@@fuzz-deep-nesting@@";
export const EXTRA_KEYS = [
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

export type Mutation =
  | { kind: "wrong-type"; slot: number; value: unknown }
  | { kind: "drop-required"; slot: number; which: number }
  | { kind: "extra-field"; slot: number; key: string; value: unknown }
  | { kind: "boundary"; slot: number; value: number }
  | { kind: "huge"; slot: number; value: string }
  | { kind: "unicode"; slot: number; value: string }
  | { kind: "root"; value: unknown }
  | { kind: "deep"; slot: number; depth: number };

export const mutationArb: Arb<Mutation> = fc.oneof(
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

export function applyMutation(
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

export function atPath(root: unknown, path: (string | number)[]): unknown {
  let node = root;
  for (const segment of path) node = (node as Json)?.[segment as string];
  return node;
}
