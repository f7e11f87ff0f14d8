/**
 * The packages as others install them: `npm pack` (which compiles each to .js + .d.ts), the tarballs
 * installed into an empty directory with `--omit=dev`; there the client is imported from plain JavaScript
 * for a real turn, and `npx agent-api check` judges a reference server on loopback. Node strips types only
 * outside node_modules, so this fails when a package ships .ts, reaches a devDependency, or imports a file
 * outside what it packs.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { KEYS, startTestServer, type TestServer } from "../../reference-server/test/helpers.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");
// npm from the repository's node_modules/.bin runs on the repository's Node 24, whatever the machine has.
const env = { ...process.env, PATH: `${join(root, "node_modules", ".bin")}:${process.env.PATH}` };

let dir: string;
let server: TestServer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agent-api-pack-"));
  server = await startTestServer();
  const tarballs: string[] = [];
  for (const folder of ["client", "conformance", "reference-server", "spec"]) {
    const packed = await run("npm", ["pack", "--json", "--pack-destination", dir], {
      cwd: join(root, folder),
      env,
    });
    tarballs.push(join(dir, (JSON.parse(packed.stdout) as Array<{ filename: string }>)[0].filename));
  }
  await writeFile(join(dir, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  // --prefer-offline: the dependencies are in npm's cache after the repository's own `npm ci`.
  await run("npm", ["install", "--omit=dev", "--prefer-offline", "--no-audit", "--no-fund", ...tarballs], {
    cwd: dir,
    env,
  });
}, 180_000);

afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

it("installs, imports from plain JavaScript and runs a turn", async () => {
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

it("runs `npx agent-api check` against a deployment", async () => {
  const help = await run("npx", ["agent-api", "check", "--help"], { cwd: dir, env });
  expect(help.stdout).toContain("--base-url");
  const args = ["agent-api", "check", "--base-url", server.url, "--agent", "demo-agent", "--key", KEYS.admin];
  const { stdout } = await run("npx", [...args, "--only", "AUTH-401-*,SSE-*", "--no-color"], {
    cwd: dir,
    env,
  });
  expect(stdout).toMatch(/PASS/);
  expect(stdout).not.toMatch(/^FAIL/m);
}, 120_000);

it("runs `npx agent-api serve` from the server package, and check judges it", async () => {
  const envFile = join(dir, "agent-api.env");
  // Detached: its own process group, so the npx wrapper and the server it starts stop together.
  const child = spawn(
    "npx",
    ["agent-api", "serve", "--port", "0", "--data", join(dir, "data"), "--write-env-file", envFile],
    { cwd: dir, env, detached: true, stdio: "ignore" },
  );
  try {
    const vars = await waitForEnvFile(envFile, 60_000);
    const { stdout } = await run("npx", ["agent-api", "check", "--only", "AUTH-401-*,SSE-*", "--no-color"], {
      cwd: dir,
      env: { ...env, ...vars },
    });
    expect(stdout).toMatch(/all MUST checks that ran passed/);
  } finally {
    if (child.pid) process.kill(-child.pid, "SIGTERM");
  }
}, 120_000);

it("says which commands an installation lacks", async () => {
  const failed = await run("npx", ["agent-api", "mock"], { cwd: dir, env }).catch((error) => error);
  expect(failed.code).toBe(2);
  expect(failed.stderr).toContain("run it from a checkout");
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
