/**
 * The turn stream's events, as tools we did not write read them (spec/README.md has the measurements behind
 * the choice of OpenAPI 3.2 `itemSchema`): Redocly's page, rendered in a browser, shows every event name,
 * every event's schema, the order of the events and the reference server's choice about it on the stream
 * response; @hey-api/openapi-ts, a second generator beside
 * openapi-typescript, generates a client from the bundled spec that type-checks, knows the operation streams
 * server-sent events, and names the events' union.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildDocs, REFERENCE_LABEL } from "../../conformance/cli/docs.ts";
import { resolveBin, runTool } from "../../conformance/cli/tool-bin.ts";
import { streamEventNames, streamEventSchemas } from "../../generated/protocol.ts";
import { projectRoot } from "../../scripts/project-root.ts";
import { chromium, renderedText } from "../spec/browser.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agent-api-stream-schema-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const eventSchemaNames = Object.values(streamEventSchemas);

describe("the docs page", () => {
  it.skipIf(!chromium)(
    "shows every event name and every event's schema on the stream response (skipped without a system chromium: .ci/run installs it)",
    async () => {
      const page = await buildDocs(join(dir, "docs", "index.html"));
      const text = await renderedText(await readFile(page, "utf8"), "#operation/sendMessage");
      // The 200 response's body, up to the sample panel beside it.
      const start = text.indexOf("Body text/event-stream");
      expect(start, "the stream response has a body schema").toBeGreaterThan(-1);
      const end = text.indexOf("Response 200", start);
      const body = text.slice(start, end === -1 ? undefined : end);
      for (const name of streamEventNames) expect(body, name).toContain(`"${name}"`);
      // The data's union lists each event's schema (each one's fields one click away, under "One of").
      for (const schema of eventSchemaNames) expect(body, schema).toContain(`${schema} (object)`);
      expect(body).toContain("One of");
      // The order of the events and the reference server's choice about it, beside the event names.
      expect(body).toContain("Grammar of a turn: message_start , then per block");
      expect(body).toContain(`${REFERENCE_LABEL} The reference server sends a tool_result whole`);
    },
    180_000,
  );
});

describe("@hey-api/openapi-ts", () => {
  it("generates a client that type-checks, streams the turn as SSE and names the event union", async () => {
    const out = join(dir, "hey-api");
    const generated = await runTool(resolveBin("@hey-api/openapi-ts", "openapi-ts"), [
      "--input",
      join(projectRoot, "generated", "openapi.json"),
      "--output",
      out,
    ]);
    expect(generated.code, generated.stderr + generated.stdout).toBe(0);
    const types = await readFile(join(out, "types.gen.ts"), "utf8");
    const union = types.match(/^export type StreamEvent = (.+);$/m)?.[1]?.split(" | ");
    expect(union?.sort()).toEqual([...eventSchemaNames].sort());
    // The stream's media type makes it an SSE operation: its generated call reads events, not one body.
    const sdk = await readFile(join(out, "sdk.gen.ts"), "utf8");
    expect(sdk).toMatch(/export const sendMessage = [^\n]*\.sse\.post</);
    await writeFile(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2022",
          module: "nodenext",
          moduleResolution: "nodenext",
          lib: ["es2022", "dom"],
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: [],
        },
        include: ["hey-api/**/*.ts"],
      }),
    );
    const checked = await runTool(resolveBin("typescript", "tsc"), ["-p", join(dir, "tsconfig.json")]);
    expect(checked.code, checked.stdout + checked.stderr).toBe(0);
  }, 120_000);
});
