/**
 * The packages as others install them: `npm pack` (which compiles each to .js + .d.ts), the tarballs
 * installed into an empty directory with `--omit=dev`; there the client is imported from plain JavaScript
 * for a real turn, and `npx agent-api check` judges a reference server on loopback. Node strips types only
 * outside node_modules, so this fails when a package ships .ts, reaches a devDependency, or imports a file
 * outside what it packs.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
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
  for (const folder of ["client", "conformance"]) {
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

it("says which commands an installed package lacks", async () => {
  const failed = await run("npx", ["agent-api", "serve"], { cwd: dir, env }).catch((error) => error);
  expect(failed.code).toBe(2);
  expect(failed.stderr).toContain("only check is");
});
