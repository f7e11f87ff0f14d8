/**
 * The published forms of the spec (scripts/published-forms.ts): the 3.1.1 form is the 3.2 bundle with only
 * the version and the stream's `itemSchema` key changed; the docs form adds, on the stream response, the
 * events as a `schema` renderers show; Redocly lints each with zero problems.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runTool, tools } from "../../conformance/cli/tool-bin.ts";
import { streamEventSchemas as eventSchemas } from "../../generated/protocol.ts";
import { projectRoot } from "../../scripts/project-root.ts";
import { ITEM_SCHEMA_EXTENSION } from "../../scripts/published-forms.ts";

type Json = Record<string, unknown>;

const load = (name: string) => JSON.parse(readFileSync(join(projectRoot, "generated", name), "utf8")) as Json;
const bundle = load("openapi.json");
const v31 = load("openapi-3.1.json");
const docs = load("openapi-docs.json");

const streamMedia = (doc: Json) =>
  ((((doc.components as Json).responses as Json).TurnStream as Json).content as Json)[
    "text/event-stream"
  ] as Json;

/** The 3.1 form read back as 3.2: the key renamed back, the descriptions' mention of it too. */
function backTo32(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(backTo32);
  if (node === null || typeof node !== "object") return node;
  return Object.fromEntries(
    Object.entries(node as Json).map(([key, value]) => [
      key === ITEM_SCHEMA_EXTENSION ? "itemSchema" : key,
      key === "description" && typeof value === "string"
        ? value.replaceAll(`\`${ITEM_SCHEMA_EXTENSION}\``, "`itemSchema`")
        : backTo32(value),
    ]),
  );
}

describe("published forms", () => {
  it("the 3.1.1 form is the bundle with only the version and the stream items' key changed", () => {
    expect(v31.openapi).toBe("3.1.1");
    expect(JSON.stringify(v31)).not.toContain('"itemSchema"');
    expect(streamMedia(v31)[ITEM_SCHEMA_EXTENSION]).toEqual(streamMedia(bundle).itemSchema);
    expect({ ...(backTo32(v31) as Json), openapi: bundle.openapi }).toEqual(bundle);
  });

  it("the docs form shows the seven events as the stream response's schema, each one SSE data: payload", () => {
    const media = streamMedia(docs);
    const schema = media.schema as { oneOf: Array<{ title: string; description: string; allOf: Json[] }> };
    expect(schema.oneOf.map((branch) => branch.title).sort()).toEqual(Object.keys(eventSchemas).sort());
    for (const branch of schema.oneOf) {
      expect(branch.description).toContain("One SSE `data:` payload");
      expect(branch.allOf).toEqual([
        { $ref: `#/components/schemas/${eventSchemas[branch.title as keyof typeof eventSchemas]}` },
      ]);
    }
    // Nothing else lost: without that schema it is the 3.1.1 form.
    const { schema: _shown, ...rest } = media;
    expect(rest).toEqual(streamMedia(v31));
  });

  it.each(["source", "v3.1", "docs"])(
    "Redocly lints %s (redocly.yaml's apis: the 3.2 source, the 3.1.1 form, the docs form) with zero problems",
    async (api) => {
      const result = await runTool(tools.redocly(), ["lint", api, "--format", "json"]);
      const report = JSON.parse(result.stdout) as { problems: Json[] };
      const problems = report.problems.filter((p) => !p.ignored);
      expect(problems.map((p) => `${p.ruleId}: ${p.message}`)).toEqual([]);
      expect(result.code).toBe(0);
    },
  );
});
