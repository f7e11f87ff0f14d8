/**
 * The published forms of the one bundled document, for tools that do not read OpenAPI 3.2 (spec/README.md
 * says which tool takes which form):
 * - the 3.1.1 form: the same document with `openapi: 3.1.1` and each media type's `itemSchema` (the only 3.2
 *   construct the spec uses) renamed to the extension `x-itemSchema`; nothing else changes.
 * - the docs form: the 3.1.1 form where each event-stream response also has a `schema` that renderers show:
 *   `oneOf` the event schemas, each described as one SSE `data:` payload.
 */

type Json = Record<string, unknown>;

export const ITEM_SCHEMA_EXTENSION = "x-itemSchema";

/** Media type objects of every response and request body, wherever they are in the document. */
function* mediaTypes(doc: Json): Generator<Json> {
  const visit = function* (node: unknown): Generator<Json> {
    if (Array.isArray(node)) {
      for (const item of node) yield* visit(item);
      return;
    }
    if (node === null || typeof node !== "object") return;
    for (const [key, value] of Object.entries(node as Json)) {
      if (key === "content" && value !== null && typeof value === "object" && !Array.isArray(value)) {
        for (const media of Object.values(value as Json))
          if (media !== null && typeof media === "object") yield media as Json;
      }
      yield* visit(value);
    }
  };
  yield* visit(doc.paths);
  yield* visit(doc.components);
}

/** Descriptions that point at `itemSchema` by name point at the extension in the 3.1 form. */
function renamedInText(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(renamedInText);
  if (node === null || typeof node !== "object") return node;
  const out: Json = {};
  for (const [key, value] of Object.entries(node as Json))
    out[key] =
      key === "description" && typeof value === "string"
        ? value.replaceAll("`itemSchema`", `\`${ITEM_SCHEMA_EXTENSION}\``)
        : renamedInText(value);
  return out;
}

/** The 3.1.1 form of a 3.2 bundle (a new object; the bundle is not changed). */
export function openapi31(bundle: Json): Json {
  const doc = renamedInText(structuredClone(bundle)) as Json;
  for (const media of mediaTypes(doc)) {
    if (!("itemSchema" in media)) continue;
    // Rebuilt so the extension keeps the key's place (a reader of the file finds it where it was).
    const entries = Object.entries(media).map(([key, value]) =>
      key === "itemSchema" ? [ITEM_SCHEMA_EXTENSION, value] : [key, value],
    );
    for (const key of Object.keys(media)) delete media[key];
    Object.assign(media, Object.fromEntries(entries));
  }
  // `openapi` first, as in the bundle.
  return { ...doc, openapi: "3.1.1" };
}

/** The event schemas a stream's `data` may hold: the `oneOf` of the schema its `contentSchema` names. */
function eventSchemaRefs(doc: Json, itemSchema: Json): string[] {
  const data = (itemSchema.properties as Json | undefined)?.data as Json | undefined;
  const ref = (data?.contentSchema as Json | undefined)?.$ref;
  if (typeof ref !== "string" || !ref.startsWith("#/components/schemas/"))
    throw new Error("the stream's data has no contentSchema $ref to a component schema");
  const union = ((doc.components as Json).schemas as Json)[ref.slice("#/components/schemas/".length)] as Json;
  const branches = (union.oneOf ?? []) as Json[];
  if (branches.length === 0) throw new Error(`${ref} is not a oneOf of the event schemas`);
  return branches.map((branch) => String(branch.$ref));
}

/** The event name of an event schema: its `type` property's `const`. */
function eventName(doc: Json, ref: string): string {
  const schema = ((doc.components as Json).schemas as Json)[ref.split("/").pop() ?? ""] as Json;
  const type = ((schema.properties as Json | undefined)?.type as Json | undefined)?.const;
  if (typeof type !== "string") throw new Error(`${ref} has no type const`);
  return type;
}

/** The docs form: the 3.1.1 form with the stream's events as the event-stream responses' `schema`. */
export function openapiDocs(bundle: Json): Json {
  const doc = openapi31(bundle);
  for (const media of mediaTypes(doc)) {
    const itemSchema = media[ITEM_SCHEMA_EXTENSION] as Json | undefined;
    if (!itemSchema || "schema" in media) continue;
    const refs = eventSchemaRefs(doc, itemSchema);
    const schema = {
      title: "Server-sent events",
      description:
        "The body is a stream of server-sent events, not one JSON object: each event is a line " +
        "`event: <name>` and a line `data: <JSON>`, and the JSON is one of the schemas below (its `type` " +
        "equals the event name). The stream ends at `message_stop`. (This document shows the events as the " +
        `body's schema for documentation renderers; the exact description of one event is \`${ITEM_SCHEMA_EXTENSION}\`.)`,
      oneOf: refs.map((ref) => {
        const name = eventName(doc, ref);
        return {
          title: name,
          description: `One SSE \`data:\` payload: the JSON on the \`data:\` line of an \`event: ${name}\` event.`,
          allOf: [{ $ref: ref }],
        };
      }),
    };
    const entries = Object.entries(media);
    for (const key of Object.keys(media)) delete media[key];
    Object.assign(media, { schema }, Object.fromEntries(entries));
  }
  return doc;
}
