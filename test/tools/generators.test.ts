/**
 * Client generators on the published spec: each generates from the form spec/README.md's table gives it,
 * its output compiles with `tsc` (strict), and the generated client lists the demo agent's models from a
 * running demo server. Each also reads the other form, and what it does with it is checked against what the
 * table records, so a form that stops loading in a tool that accepted it fails here.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoServer, startDemoServer } from "../../cli/demo.ts";
import { projectRoot } from "../../scripts/tool-bin.ts";
import { publishedForm, type Ran, run, runTs, typecheck, workDir } from "./matrix.ts";
import { toolBin, toolsUnavailable } from "./tools-dir.ts";

type Form = "openapi.json" | "openapi-3.1.json";
const OTHER: Record<Form, Form> = { "openapi.json": "openapi-3.1.json", "openapi-3.1.json": "openapi.json" };

interface Generator {
  name: string;
  /** The published form the tool takes (spec/README.md). */
  form: Form;
  /** What the tool does with the other form, as spec/README.md records it. */
  otherForm: "generates" | "refuses";
  /** Generates a client for `spec` into `dir`. */
  generate(spec: string, dir: string): Promise<Ran>;
  /** A program using the generated client: prints the ids of the models of AGENT as JSON. */
  call: string;
  /** Compiler options beside strict mode, for a defect of the tool's output that `check` asserts is still there. */
  compilerOptions?: Record<string, unknown>;
  /** What else the output must hold (checked on the form the tool takes). */
  check?(dir: string): Promise<void>;
}

const ENV_TYPES = `declare const process: { env: Record<string, string> };\n`;

const GENERATORS: Generator[] = [
  {
    name: "openapi-typescript + openapi-fetch",
    form: "openapi.json",
    otherForm: "generates",
    generate: (spec, dir) =>
      run(join(projectRoot, "node_modules", ".bin", "openapi-typescript"), [spec, "-o", "schema.ts"], {
        cwd: dir,
      }),
    call: `import createClient from "openapi-fetch";
import type { paths } from "./schema";
${ENV_TYPES}
const client = createClient<paths>({ baseUrl: process.env.BASE_URL });
const { data, error } = await client.GET("/api/agents/{agent}/v1/models", {
  params: { path: { agent: process.env.AGENT } },
  headers: { "X-Api-Key": process.env.API_KEY },
});
if (!data) throw new Error(JSON.stringify(error));
console.log(JSON.stringify(data.data.map((model) => model.id)));
`,
  },
  {
    name: "@hey-api/openapi-ts",
    form: "openapi.json",
    otherForm: "generates",
    generate: (spec, dir) =>
      run(join(projectRoot, "node_modules", ".bin", "openapi-ts"), ["--input", spec, "--output", "client"], {
        cwd: dir,
      }),
    call: `import { client } from "./client/client.gen";
import { listModels } from "./client/sdk.gen";
${ENV_TYPES}
client.setConfig({ baseUrl: process.env.BASE_URL, headers: { "X-Api-Key": process.env.API_KEY } });
const { data, error } = await listModels({ path: { agent: process.env.AGENT } });
if (!data) throw new Error(JSON.stringify(error));
console.log(JSON.stringify(data.data.map((model) => model.id)));
`,
  },
  {
    name: "orval (fetch client)",
    form: "openapi-3.1.json",
    otherForm: "generates",
    generate: async (spec, dir) => {
      await writeFile(
        join(dir, "orval.config.ts"),
        `export default { api: { input: { target: ${JSON.stringify(spec)} }, output: { target: "./out/api.ts", client: "fetch" } } };\n`,
      );
      return run(toolBin("orval"), ["--config", "orval.config.ts"], { cwd: dir });
    },
    // Orval's fetch client calls relative URLs: the base URL is the caller's fetch's business.
    call: `import { listModels } from "./out/api";
${ENV_TYPES}
const realFetch = globalThis.fetch;
globalThis.fetch = (input, init) => realFetch(new URL(String(input), process.env.BASE_URL), init);
const response = await listModels(process.env.AGENT, { headers: { "X-Api-Key": process.env.API_KEY } });
if (response.status !== 200) throw new Error(JSON.stringify(response.data));
console.log(JSON.stringify(response.data.data.map((model) => model.id)));
`,
  },
  {
    name: "kubb (plugin-ts + plugin-client, fetch)",
    form: "openapi-3.1.json",
    otherForm: "generates",
    generate: async (spec, dir) => {
      await writeFile(
        join(dir, "kubb.config.ts"),
        `import { defineConfig } from "@kubb/core";
import { pluginClient } from "@kubb/plugin-client";
import { pluginOas } from "@kubb/plugin-oas";
import { pluginTs } from "@kubb/plugin-ts";
export default defineConfig({
  root: ".",
  input: { path: ${JSON.stringify(spec)} },
  output: { path: "./gen", clean: true },
  plugins: [pluginOas(), pluginTs(), pluginClient({ client: "fetch" })],
});
`,
      );
      return run(toolBin("kubb"), ["generate", "--config", "kubb.config.ts"], { cwd: dir });
    },
    call: `import { listModels } from "./gen/clients/listModels";
${ENV_TYPES}
// kubb's call returns the body itself.
const models = await listModels(process.env.AGENT, {
  baseURL: process.env.BASE_URL,
  headers: { "X-Api-Key": process.env.API_KEY },
});
console.log(JSON.stringify(models.data.map((model) => model.id)));
`,
    // kubb writes a `const: ""` property (TextContentBlock.text, ThinkingContentBlock.thinking) with no type,
    // an implicit any: its output compiles only without noImplicitAny (spec/README.md records it).
    compilerOptions: { noImplicitAny: false },
    // Under 3.2 kubb drops every `const` (the event types' `type` becomes string); from the 3.1.1 form it keeps them.
    check: async (dir) => {
      const event = await readFile(join(dir, "gen", "types", "MessageStartEvent.ts"), "utf8");
      expect(event).toMatch(/type: "message_start";/);
      const block = await readFile(join(dir, "gen", "types", "TextContentBlock.ts"), "utf8");
      expect(block, "kubb now types an empty-string const: drop noImplicitAny: false").toMatch(/^\s+text;$/m);
    },
  },
  {
    name: "typed-openapi",
    form: "openapi-3.1.json",
    otherForm: "refuses",
    generate: (spec, dir) =>
      run(toolBin("typed-openapi"), [spec, "-o", "api.ts", "-r", "none"], { cwd: dir }),
    call: `import { createApiClient } from "./api";
${ENV_TYPES}
const api = createApiClient({ fetch: ({ method, url, overrides }) => fetch(url, { ...overrides, method }) }, process.env.BASE_URL);
const models = await api.get("/api/agents/{agent}/v1/models", {
  path: { agent: process.env.AGENT },
  overrides: { headers: { "X-Api-Key": process.env.API_KEY } },
});
console.log(JSON.stringify(models.data.map((model) => model.id)));
`,
  },
  {
    name: "oazapfts",
    form: "openapi-3.1.json",
    otherForm: "refuses",
    generate: (spec, dir) => run(toolBin("oazapfts"), [spec, "api.ts"], { cwd: dir }),
    call: `import { defaults, listModels } from "./api";
${ENV_TYPES}
defaults.baseUrl = process.env.BASE_URL;
defaults.headers = { "X-Api-Key": process.env.API_KEY };
const response = await listModels(process.env.AGENT);
if (response.status !== 200) throw new Error(JSON.stringify(response.data));
console.log(JSON.stringify(response.data.data.map((model) => model.id)));
`,
  },
  {
    name: "swagger-typescript-api",
    form: "openapi-3.1.json",
    otherForm: "generates",
    generate: (spec, dir) =>
      run(
        toolBin("swagger-typescript-api"),
        ["generate", "--path", spec, "--output", "out", "--name", "api.ts"],
        {
          cwd: dir,
        },
      ),
    call: `import { Api } from "./out/api";
${ENV_TYPES}
const api = new Api({ baseUrl: process.env.BASE_URL, baseApiParams: { headers: { "X-Api-Key": process.env.API_KEY } } });
const response = await api.api.listModels(process.env.AGENT);
console.log(JSON.stringify(response.data.data.map((model) => model.id)));
`,
  },
];

const skip = toolsUnavailable();
let demo: DemoServer;

beforeAll(async () => {
  if (!skip) demo = await startDemoServer(300);
});
afterAll(async () => {
  await demo?.close();
});

describe.skipIf(skip !== null)(`client generators${skip ? ` (skipped: ${skip})` : ""}`, () => {
  describe.each(GENERATORS.map((g) => [g.name, g] as const))("%s", (_name, generator) => {
    it(`generates from ${generator.form}, compiles with tsc and lists the demo's models`, async () => {
      const dir = workDir(generator.name.replace(/\W+/g, "-"));
      const generated = await generator.generate(publishedForm(generator.form), dir);
      expect(generated.code, generated.stderr + generated.stdout).toBe(0);
      await generator.check?.(dir);
      await writeFile(join(dir, "call.ts"), generator.call);
      const checked = await typecheck(dir, generator.compilerOptions);
      expect(checked.code, checked.stdout + checked.stderr).toBe(0);
      const called = await runTs(dir, "call.ts", {
        BASE_URL: demo.url,
        API_KEY: "demo-admin-key",
        AGENT: "demo-agent",
      });
      expect(called.code, called.stderr).toBe(0);
      expect(JSON.parse(called.stdout)).toEqual(["demo-large", "demo-small"]);
    });

    it(`${generator.otherForm === "generates" ? "also generates from" : "refuses"} ${OTHER[generator.form]} (as spec/README.md records)`, async () => {
      const dir = workDir(`${generator.name.replace(/\W+/g, "-")}-other`);
      const generated = await generator.generate(publishedForm(OTHER[generator.form]), dir);
      if (generator.otherForm === "generates")
        expect(generated.code, generated.stderr + generated.stdout).toBe(0);
      else expect(generated.code, "it now accepts the other form: update spec/README.md's table").not.toBe(0);
    });
  });
});
