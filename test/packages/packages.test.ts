/**
 * The packages as others install them: `npm pack` (which compiles each to .js + .d.ts), the tarballs
 * installed into an empty directory with `--omit=dev`; there the client is imported from plain JavaScript
 * for a real turn, and `npx agent-api check` judges a reference server on loopback. Node strips types only
 * outside node_modules, so this fails when a package ships .ts, reaches a devDependency, or imports a file
 * outside what it packs.
 */
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Ajv2020 } from "ajv/dist/2020.js";
// ajv-formats is CommonJS: Node's default import is its module.exports, the plugin itself, which the package
// also names `.default` (the name its types give it), so `.default` is right at run time and for tsc.
import ajvFormats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { KEYS, startTestServer, type TestServer } from "../../reference-server/test/helpers.ts";
import { SANDBOX_ENV } from "../../scripts/sandbox-probe.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");
// npm from the repository's node_modules/.bin runs on the repository's Node 24, whatever the machine has.
const env = { ...process.env, PATH: `${join(root, "node_modules", ".bin")}:${process.env.PATH}` };

let dir: string;
let server: TestServer;

/** Node 22 exactly, so every run installs the same binary (from npm's cache after the first). */
const NODE_22 = "22.23.3";
let node22: string;
let env22: NodeJS.ProcessEnv;

/** Installs Node 22 (once per checkout) and puts it first on the PATH the Node 22 tests use. */
async function ensureNode22(): Promise<void> {
  // Under node_modules: `npm ci` starts CI from scratch, and a repeated local run reuses it.
  const prefix = join(root, "node_modules", ".cache", `node-${NODE_22}`);
  const bin = join(prefix, "node_modules", ".bin");
  node22 = join(bin, "node");
  if (!existsSync(node22)) {
    await run(
      "npm",
      [
        "install",
        "--no-save",
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        "--prefix",
        prefix,
        `node@${NODE_22}`,
      ],
      { env },
    );
  }
  // First on PATH: the installed `agent-api` starts with `#!/usr/bin/env node`.
  env22 = { ...env, PATH: `${bin}:${env.PATH}` };
  const { stdout } = await run("node", ["--version"], { env: env22 });
  expect(stdout.trim()).toBe(`v${NODE_22}`);
}

beforeAll(async () => {
  // Beside the packing: Node 22's own install.
  const node22Ready = ensureNode22();
  node22Ready.catch(() => undefined);
  dir = await mkdtemp(join(tmpdir(), "agent-api-pack-"));
  // The data directory of `serve` is in here: sandbox users must be able to pass through (mkdtemp gives 0700).
  await chmod(dir, 0o711);
  server = await startTestServer();
  // The build each compiled package's prepack runs, for the three at once (one compiler process), then
  // `npm pack` without scripts; the spec's prepack (the bundle and the docs page) runs as it would.
  await run(join(root, "node_modules", ".bin", "node"), [join(root, "scripts", "build-packages.ts")], {
    env,
  });
  const tarballs = await Promise.all(
    ["client", "conformance", "reference-server", "spec"].map(async (folder) => {
      const scripts = folder === "spec" ? [] : ["--ignore-scripts"];
      const packed = await run("npm", ["pack", "--json", ...scripts, "--pack-destination", dir], {
        cwd: join(root, folder),
        env,
      });
      return join(dir, (JSON.parse(packed.stdout) as Array<{ filename: string }>)[0].filename);
    }),
  );
  await writeFile(join(dir, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  // A client author's script: a turn through the installed client, from plain JavaScript.
  await writeFile(
    join(dir, "turn.js"),
    `import { collectText, createAgentClient } from "@agent-api/client";
import { streamEventNames } from "@agent-api/client/protocol";
const client = createAgentClient({ baseUrl: process.argv[2], apiKey: process.argv[3], agent: "demo-agent" });
const turn = await client.sendMessage({ messages: [{ role: "user", content: "Say hello." }] });
const text = await collectText(turn);
console.log(JSON.stringify({ id: turn.conversationId, text, names: streamEventNames.length }));
`,
  );
  // --prefer-offline: the dependencies are in npm's cache after the repository's own `npm ci`.
  await run("npm", ["install", "--omit=dev", "--prefer-offline", "--no-audit", "--no-fund", ...tarballs], {
    cwd: dir,
    env,
  });
  await node22Ready;
}, 300_000);

afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

it("installs, imports from plain JavaScript and runs a turn", async () => {
  const { stdout } = await run(
    join(root, "node_modules", ".bin", "node"),
    ["turn.js", server.url, KEYS.admin],
    {
      cwd: dir,
      env,
    },
  );
  const result = JSON.parse(stdout);
  expect(result.id).toEqual(expect.any(String));
  expect(result.text.length).toBeGreaterThan(0);
  expect(result.names).toBe(7);
});

it("runs the README's client example as pasted (turn.js, with the AGENT_API_* variables set)", async () => {
  const readme = await readFile(join(root, "README.md"), "utf8");
  const example = /```js\n(\/\/ turn\.js[\s\S]*?)```/.exec(readme)?.[1];
  expect(example, "the README's turn.js block").toBeDefined();
  await writeFile(join(dir, "readme-turn.js"), example as string);
  const { stdout } = await run(join(root, "node_modules", ".bin", "node"), ["readme-turn.js"], {
    cwd: dir,
    env: { ...env, AGENT_API_BASE_URL: server.url, AGENT_API_KEY: KEYS.admin, AGENT_API_AGENT: "demo-agent" },
  });
  // The conversation id, then the reply's text.
  expect(stdout).toMatch(/^\S+ \S/);
});

it("ships the bundled spec (exactly what the kit validates with), as YAML too, and the docs page", async () => {
  const script = `for (const f of ["openapi.json", "openapi.yaml", "index.html"]) console.log(import.meta.resolve("@agent-api/spec/" + f));`;
  await writeFile(join(dir, "spec.js"), script);
  const { stdout } = await run(join(root, "node_modules", ".bin", "node"), ["spec.js"], { cwd: dir, env });
  const [json, yaml, html] = stdout
    .trim()
    .split("\n")
    .map((url) => new URL(url));
  expect(await readFile(json, "utf8")).toBe(await readFile(join(root, "generated", "openapi.json"), "utf8"));
  expect(await readFile(yaml, "utf8")).toMatch(/^openapi: 3\./m);
  expect(await readFile(html, "utf8")).toContain("<html");
});

it("ships the 3.1.1 and docs forms of the spec, each exactly generated/'s, as YAML too", async () => {
  const names = ["openapi-3.1.json", "openapi-3.1.yaml", "openapi-docs.json", "openapi-docs.yaml"];
  const script = `for (const f of ${JSON.stringify(names)}) console.log(import.meta.resolve("@agent-api/spec/" + f));`;
  await writeFile(join(dir, "spec-forms.js"), script);
  const { stdout } = await run(join(root, "node_modules", ".bin", "node"), ["spec-forms.js"], {
    cwd: dir,
    env,
  });
  const [json31, yaml31, jsonDocs, yamlDocs] = stdout
    .trim()
    .split("\n")
    .map((url) => new URL(url));
  expect(await readFile(json31, "utf8")).toBe(
    await readFile(join(root, "generated", "openapi-3.1.json"), "utf8"),
  );
  expect(await readFile(jsonDocs, "utf8")).toBe(
    await readFile(join(root, "generated", "openapi-docs.json"), "utf8"),
  );
  for (const yaml of [yaml31, yamlDocs]) expect(await readFile(yaml, "utf8")).toMatch(/^openapi: 3\.1\.1$/m);
});

/** The installed command itself: what `npx agent-api` runs, without npm's own start-up each time. */
const agentApi = () => join(dir, "node_modules", ".bin", "agent-api");

it("runs `npx agent-api check` against a deployment", async () => {
  const help = await run(agentApi(), ["check", "--help"], { cwd: dir, env });
  expect(help.stdout).toContain("--base-url");
  const args = ["agent-api", "check", "--base-url", server.url, "--agent", "demo-agent", "--key", KEYS.admin];
  const { stdout } = await run("npx", [...args, "--only", "AUTH-401-*,SSE-*", "--no-color"], {
    cwd: dir,
    env,
  });
  expect(stdout).toMatch(/PASS/);
  expect(stdout).not.toMatch(/^FAIL/m);
}, 120_000);

it("runs the installed `agent-api check` without a base URL against the demo of the installed server package", async () => {
  // The suite's package does not carry the server: the command loads the demo by its package name.
  const { stdout } = await run(agentApi(), ["check", "--only", "AUTH-401-*", "--no-color"], {
    cwd: dir,
    env,
  });
  expect(stdout).toContain("starting the reference server's demo in-process");
  expect(stdout).toMatch(/all MUST checks that ran passed/);
}, 120_000);

/**
 * Starts the installed `agent-api serve` (on whatever `node` heads PATH in `runEnv`), runs check against it,
 * tools included, and stops it. `name` keeps each run's data and env file apart.
 */
async function serveAndCheck(
  name: string,
  runEnv: NodeJS.ProcessEnv,
  serveArgs = ["--port", "0", "--data", join(dir, `${name}-data`)],
): Promise<string> {
  const envFile = join(dir, `${name}.env`);
  // Where bubblewrap does not work the server refuses tools; unisolated they still go through its spawner.
  const isolation = process.env[SANDBOX_ENV] ? ["--unsafe-no-isolation"] : [];
  // Detached: its own process group, so the server and what it starts stop together.
  const child = spawn(agentApi(), ["serve", ...serveArgs, "--write-env-file", envFile, ...isolation], {
    cwd: dir,
    env: runEnv,
    detached: true,
    stdio: "ignore",
  });
  try {
    const vars = await waitForEnvFile(envFile, 60_000);
    // STATE-RESUME-KEEPS-FILES runs commands in the sandbox: the installed spawner (a .js beside the server).
    // The list filters need the seeded conversations' channel and notebook, which the env file must name.
    const only = "AUTH-401-*,SSE-*,STATE-RESUME-KEEPS-FILES,LIST-CHANNEL-ID-FILTER,LIST-NOTEBOOK-PATH-FILTER";
    const { stdout } = await run(agentApi(), ["check", "--only", only, "--no-color"], {
      cwd: dir,
      env: { ...runEnv, ...vars },
    });
    return stdout;
  } finally {
    if (child.pid) process.kill(-child.pid, "SIGTERM");
  }
}

it("`agent-api docs` copies the page @agent-api/spec ships, with no Redocly installed", async () => {
  const { stdout } = await run(agentApi(), ["docs", "--output", "site/api.html"], { cwd: dir, env });
  expect(stdout).toContain(join(dir, "site", "api.html"));
  const shipped = await readFile(
    join(dir, "node_modules", "@agent-api", "spec", "dist", "index.html"),
    "utf8",
  );
  expect(await readFile(join(dir, "site", "api.html"), "utf8")).toBe(shipped);
});

it("`agent-api mock`, `lint` and `docs --spec` name the dev tool they need when it is not installed", async () => {
  const cases = [
    { args: ["mock"], pkg: "@stoplight/prism-cli" },
    { args: ["lint"], pkg: "@redocly/cli" },
    { args: ["docs", "--spec", "node_modules/@agent-api/spec/dist/openapi.yaml"], pkg: "@redocly/cli" },
  ];
  for (const { args, pkg } of cases) {
    const failed = await run(agentApi(), args, { cwd: dir, env }).catch((error) => error);
    expect(failed.code, args.join(" ")).toBe(2);
    expect(failed.stderr, args.join(" ")).toContain(`npm install --save-dev ${pkg}`);
  }
});

it("holds one copy of the protocol: the suite and the server import it from @agent-api/client", async () => {
  const copies: string[] = [];
  for (const pkg of ["conformance", "reference-server"]) {
    const dist = join(dir, "node_modules", "@agent-api", pkg, "dist");
    // The spec document stays (the validators read it); compiled protocol or client modules must not.
    for (const file of await readdir(dist, { recursive: true })) {
      if (/^(client|generated)\/.*\.js$/.test(file)) copies.push(`${pkg}/dist/${file}`);
    }
  }
  expect(copies).toEqual([]);
  const client = join(dir, "node_modules", "@agent-api", "client", "dist");
  expect(existsSync(join(client, "generated", "protocol.js"))).toBe(true);
  expect(existsSync(join(client, "client", "sse.js"))).toBe(true);
});

/** The step of examples/agent-api-check.yml that runs the suite: its shell command and its env block. */
async function recipeStep(): Promise<{ run: string; env: Record<string, string> }> {
  const workflow = parseYaml(await readFile(join(root, "examples", "agent-api-check.yml"), "utf8")) as {
    jobs: Record<string, { steps: Array<{ run?: string; env?: Record<string, string> }> }>;
  };
  const steps = Object.values(workflow.jobs).flatMap((job) => job.steps);
  const step = steps.find((s) => s.run?.includes("agent-api check"));
  if (!step?.run) throw new Error("no step of the recipe runs agent-api check");
  return { run: step.run, env: step.env ?? {} };
}

/**
 * Runs the recipe's check step the way GitHub Actions does: `${{ vars.X }}` and `${{ secrets.X }}` replaced
 * by their value, or by "" when the repository does not define them, and the command run by bash -e.
 */
async function runRecipe(defined: Record<string, string>, extra: Record<string, string> = {}) {
  const step = await recipeStep();
  const stepEnv = Object.fromEntries(
    Object.entries(step.env).map(([name, value]) => [
      name,
      value.replace(
        /\$\{\{\s*(?:vars|secrets)\.([A-Z0-9_]+)\s*\}\}/g,
        (_, key: string) => defined[key] ?? "",
      ),
    ]),
  );
  const workspace = await mkdtemp(join(dir, "workspace-"));
  const outcome = await run("bash", ["--noprofile", "--norc", "-eo", "pipefail", "-c", step.run], {
    cwd: workspace,
    env: { ...env, ...stepEnv, ...extra },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  );
  return { ...outcome, workspace };
}

describe("the CI recipe, examples/agent-api-check.yml", () => {
  it("runs as written against a deployment: a pass, the three reports, and a skip for each secret not defined", async () => {
    const result = await runRecipe(
      { AGENT_API_BASE_URL: server.url, AGENT_API_AGENT: "demo-agent", AGENT_API_KEY: KEYS.admin },
      // Fewer checks than the recipe's whole suite (AGENT_API_ONLY is --only), among them ones that need the
      // member and viewer keys the repository did not define.
      { AGENT_API_ONLY: "AUTH-*,SSE-FIRST-MESSAGE-START" },
    );
    expect(result.code, result.stderr).toBe(0);
    for (const file of ["conformance.xml", "conformance.html", "conformance.json"])
      expect(existsSync(join(result.workspace, "reports", file)), file).toBe(true);
    const report = JSON.parse(await readFile(join(result.workspace, "reports", "conformance.json"), "utf8"));
    const skipped = JSON.stringify(report).match(/--member-key|--viewer-key/g) ?? [];
    expect(skipped.length).toBeGreaterThan(0);
    // The report matches the schema the installed package publishes (its "exports" entry).
    const schemaFile = createRequire(join(dir, "app.js")).resolve(
      "@agent-api/conformance/report.schema.json",
    );
    const ajv = new Ajv2020({ allErrors: true });
    ajvFormats.default(ajv);
    const validate = ajv.compile(JSON.parse(await readFile(schemaFile, "utf8")));
    expect(validate(report), JSON.stringify(validate.errors)).toBe(true);
  }, 120_000);

  it("fails the job, naming the variable, when the repository did not define the deployment's address", async () => {
    const result = await runRecipe({ AGENT_API_AGENT: "demo-agent", AGENT_API_KEY: KEYS.admin });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("AGENT_API_BASE_URL");
  }, 60_000);
});

describe("the Dockerfile", () => {
  it("its command runs `agent-api serve` from the installed server package, tools included, and check judges it", async () => {
    const dockerfile = await readFile(join(root, "Dockerfile"), "utf8");
    const last = (instruction: string) =>
      JSON.parse(
        [...dockerfile.matchAll(new RegExp(`^${instruction} (\\[.*\\])$`, "gm"))].at(-1)?.[1] ?? "[]",
      ) as string[];
    expect(last("ENTRYPOINT")).toEqual(["agent-api"]);
    const command = last("CMD");
    expect(command.slice(0, 1)).toEqual(["serve"]);
    // The image's port and volume (and the variables file in it), swapped for a free port and a directory of
    // this test.
    const args = command.map((arg, i) =>
      command[i - 1] === "--port"
        ? "0"
        : command[i - 1] === "--data"
          ? join(dir, "image-data")
          : command[i - 1] === "--write-env-file"
            ? join(dir, "image-data", "agent-api.env")
            : arg,
    );
    expect(args).toContain("0");
    const stdout = await serveAndCheck("serve", env, args.slice(1));
    expect(stdout).toMatch(/^PASS MUST +LIST-CHANNEL-ID-FILTER /m);
    expect(stdout).toMatch(/^PASS MUST +LIST-NOTEBOOK-PATH-FILTER /m);
    expect(stdout).toMatch(/STATE-RESUME-KEEPS-FILES/);
    expect(stdout).toMatch(/all MUST checks that ran passed/);
  }, 120_000);
});

describe(`on Node ${NODE_22}`, () => {
  it("imports the client from plain JavaScript and runs a turn", async () => {
    const { stdout } = await run(node22, ["turn.js", server.url, KEYS.admin], { cwd: dir, env: env22 });
    const result = JSON.parse(stdout);
    expect(result.text.length).toBeGreaterThan(0);
    expect(result.names).toBe(7);
  });

  it("runs the installed server, tools included (its spawner), and check judges it", async () => {
    const stdout = await serveAndCheck("serve22", env22);
    expect(stdout).toMatch(/STATE-RESUME-KEEPS-FILES/);
    expect(stdout).toMatch(/all MUST checks that ran passed/);
  }, 120_000);

  it("runs the installed `agent-api check` against a deployment", async () => {
    const args = ["check", "--base-url", server.url, "--agent", "demo-agent", "--key", KEYS.admin];
    const { stdout } = await run(
      join(dir, "node_modules", ".bin", "agent-api"),
      [...args, "--only", "AUTH-401-*,SSE-*", "--no-color"],
      { cwd: dir, env: env22 },
    );
    expect(stdout).toMatch(/all MUST checks that ran passed/);
  }, 120_000);
});

/** The `AGENT_API_*` variables `serve --write-env-file` writes once the server listens. */
async function waitForEnvFile(file: string, ms: number): Promise<Record<string, string>> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const text = await readFile(file, "utf8").catch(() => "");
    if (text.includes("AGENT_API_BASE_URL")) {
      return Object.fromEntries(
        text
          .split("\n")
          .map((line) => /^(?:export )?([A-Z_]+)=['"]?(.*?)['"]?$/.exec(line.trim()))
          .filter((m): m is RegExpExecArray => m !== null)
          .map((m) => [m[1], m[2]]),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${file} was not written within ${ms} ms`);
}
