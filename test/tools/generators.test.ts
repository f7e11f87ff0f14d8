/**
 * Client generators on the published spec: each generates from the form spec/README.md's table gives it,
 * its output compiles with `tsc` (strict), and the generated client lists the demo agent's models from a
 * running demo server. Each also reads the other form, and what it does with it is checked against what the
 * table records, so a form that stops loading in a tool that accepted it fails here. The commands (and config
 * files) are the guide's, read from docs/generators.md ("Generating a client") and run as written in a project
 * holding the spec package (test/tools/readme.ts): a README command that stops working fails here.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";
import { runTs, typecheck } from "./matrix.ts";
import { guideSteps, runStep, type Step, userProject } from "./readme.ts";
import { toolsUnavailable } from "./tools-dir.ts";

type Form = "openapi.json" | "openapi-3.1.json";
const OTHER: Record<Form, Form> = { "openapi.json": "openapi-3.1.json", "openapi-3.1.json": "openapi.json" };

interface Generator {
  name: string;
  /** The published form the tool takes (spec/README.md). */
  form: Form;
  /** What the tool does with the other form, as spec/README.md records it. */
  otherForm: "generates" | "refuses";
  /** The package README.md's command runs with `npx` (its step of "Generating a client"). */
  npx: string;
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
    npx: "openapi-typescript",
    form: "openapi.json",
    otherForm: "generates",
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
    npx: "@hey-api/openapi-ts",
    form: "openapi.json",
    otherForm: "generates",
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
    npx: "orval",
    form: "openapi-3.1.json",
    otherForm: "generates",
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
    npx: "kubb",
    form: "openapi-3.1.json",
    otherForm: "generates",
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
    npx: "typed-openapi",
    form: "openapi-3.1.json",
    otherForm: "refuses",
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
    npx: "oazapfts",
    form: "openapi-3.1.json",
    otherForm: "refuses",
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
    npx: "swagger-typescript-api",
    form: "openapi-3.1.json",
    otherForm: "generates",
    call: `import { Api } from "./out/api";
${ENV_TYPES}
const api = new Api({ baseUrl: process.env.BASE_URL, baseApiParams: { headers: { "X-Api-Key": process.env.API_KEY } } });
const response = await api.api.listModels(process.env.AGENT);
console.log(JSON.stringify(response.data.data.map((model) => model.id)));
`,
  },
];

const STEPS = guideSteps("generators.md");

/** The README's step running the generator, which must name the form the table gives it. */
function readmeStep(generator: Generator): Step {
  const steps = STEPS.filter((step) => step.command.startsWith(`npx ${generator.npx} `));
  expect(steps, `docs/generators.md runs npx ${generator.npx} once`).toHaveLength(1);
  const step = steps[0] as Step;
  const files = [step.command, ...step.files.map((file) => file.code)].join("\n");
  expect(files, "the README's command reads the form spec/README.md's table gives the tool").toContain(
    `node_modules/@agent-api/spec/dist/${generator.form}`,
  );
  return step;
}

const skip = toolsUnavailable();
let demo: DemoServer;

beforeAll(async () => {
  if (!skip) demo = await startDemoServer(300);
});
afterAll(async () => {
  await demo?.close();
});

describe.skipIf(skip !== null)(`client generators${skip ? ` (skipped: ${skip})` : ""}`, () => {
  it('runs every command of the README\'s "Generating a client"', () => {
    const unrun = STEPS.filter((step) => !GENERATORS.some((g) => step.command.startsWith(`npx ${g.npx} `)));
    expect(unrun.map((step) => step.command)).toEqual([]);
  });

  describe.each(GENERATORS.map((g) => [g.name, g] as const))("%s", (_name, generator) => {
    it(`generates from ${generator.form}, compiles with tsc and lists the demo's models`, async () => {
      const dir = userProject(generator.name.replace(/\W+/g, "-"), { [generator.form]: generator.form });
      const generated = await runStep(readmeStep(generator), dir);
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
      // The other form under the file name the README gives: the command runs as written.
      const dir = userProject(`${generator.name.replace(/\W+/g, "-")}-other`, {
        [generator.form]: OTHER[generator.form],
      });
      const generated = await runStep(readmeStep(generator), dir);
      if (generator.otherForm === "generates")
        expect(generated.code, generated.stderr + generated.stdout).toBe(0);
      else expect(generated.code, "it now accepts the other form: update spec/README.md's table").not.toBe(0);
    });
  });
});
