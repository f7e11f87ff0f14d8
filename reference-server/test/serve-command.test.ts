/**
 * `agent-api serve` as users run it: the real command in a child process, with a YAML --config of its own
 * (not the demo), and the pino request log it prints: one JSON line per request, never a key or a prompt.
 */
import { spawnSync } from "node:child_process";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bareGit, type ServeCommand, sleep, startServeCommand } from "./sandbox-server.ts";

const BIN = fileURLToPath(new URL("../../bin/agent-api", import.meta.url));
const ADMIN_KEY = "acme-ann-admin-key-1";
const VIEWER_KEY = "acme-ben-viewer-key-1";
const REVOKED_KEY = "acme-cy-revoked-key-1";
const SECRET_PROMPT = "Say the word zebra-prompt-7.";

const CONFIG = `
workspaces:
  - id: acme
    members: [{ id: ann, name: Ann }, { id: ben }, { id: cy }]
keys:
  - { key: ${ADMIN_KEY}, label: ann-admin, workspace: acme, member: ann, role: Admin }
  - { key: ${VIEWER_KEY}, workspace: acme, member: ben, role: Viewer }
  - { key: ${REVOKED_KEY}, workspace: acme, member: cy, role: Operator, revoked: true }
agents:
  - name: helper
    workspace: acme
    kind: storage
    default_model: big
    models: [{ id: small }]
    instructions: You are the helper.
`;

/** The real command (bin/agent-api: Node 24 from node_modules/.bin heads PATH under npm test). */
const serve = (args: string[]) => startServeCommand([BIN, "serve", ...args]);

let dir: string;
let server: ServeCommand;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "serve-command-"));
  // Tool users pass through to the data directory below (the tool time-out test runs a command).
  await chmod(dir, 0o711);
  await writeFile(join(dir, "server.yaml"), CONFIG);
  server = await serve([
    "--config",
    join(dir, "server.yaml"),
    "--data",
    join(dir, "data"),
    "--port",
    "0",
    "--session-delay-ms",
    "100",
    "--tool-timeout-seconds",
    "1",
    "--unsafe-no-isolation",
  ]);
}, 30_000);

afterAll(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const send = (key: string, content: string) =>
  fetch(`${server.url}/api/agents/helper/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content }] }),
  });

describe("agent-api serve --config", () => {
  it("serves the configured workspace: its keys, roles, revoked flag and agent", async () => {
    const turn = await send(ADMIN_KEY, "Which model are you running as? Reply with just the model id.");
    expect(turn.status).toBe(200);
    expect(await turn.text()).toContain('"text":"big"');
    expect((await send(VIEWER_KEY, "hi")).status).toBe(403);
    const revoked = await send(REVOKED_KEY, "hi");
    expect(revoked.status).toBe(401);
    expect(await revoked.json()).toEqual({ message: "API key has been revoked" });
    const models = await fetch(`${server.url}/api/agents/helper/v1/models`, {
      headers: { "x-api-key": ADMIN_KEY },
    });
    expect(((await models.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id)).toEqual([
      "big",
      "small",
    ]);
    // No demo here: the demo's agent does not exist.
    const demo = await fetch(`${server.url}/api/agents/demo-agent/v1/models`, {
      headers: { "x-api-key": ADMIN_KEY },
    });
    expect(demo.status).toBe(404);
  });

  it("--tool-timeout-seconds bounds a tool command: a 5 s sleep is ended after 1 s", async () => {
    const started = performance.now();
    const turn = await send(
      ADMIN_KEY,
      "Use your tools to run the shell command: sleep 5; echo finished-late",
    );
    const text = await turn.text();
    expect(turn.status).toBe(200);
    expect(text).toContain("message_stop");
    expect(text).not.toContain("finished-late");
    expect(text).toContain("command timed out after 1000 ms");
    // The default limit (30 s) would have let the command finish after 5 s (the text above says it did not);
    // the bound only catches a turn that waited for the command anyway.
    expect(performance.now() - started).toBeLessThan(30_000);
  });

  it("logs one JSON line per request, with the key's label and never a key or a prompt", async () => {
    // Lines of earlier requests may still be in the pipe: let them arrive before counting.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const before = server
      .stdout()
      .split("\n")
      .filter((l) => l.includes('"msg":"request"')).length;
    await (await send(ADMIN_KEY, SECRET_PROMPT)).text();
    await (
      await fetch(`${server.url}/api/agents/helper/conversations`, { headers: { "x-api-key": ADMIN_KEY } })
    ).text();
    await (
      await fetch(`${server.url}/api/agents/helper/conversations`, { headers: { "x-api-key": "wrong-key" } })
    ).text();
    // The three lines reach the pipe after their answers: wait for them (a fixed 200 ms failed under load).
    const requestLines = () =>
      server
        .stdout()
        .split("\n")
        .filter((l) => l.includes('"msg":"request"'));
    const deadline = Date.now() + 10_000;
    while (requestLines().length < before + 3 && Date.now() < deadline) await sleep(50);
    await sleep(200); // a fourth line, if the server wrote one, would arrive within this
    const lines = requestLines();
    const mine = lines.slice(before).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(mine.map((l) => [l.method, l.status])).toEqual([
      ["POST", 200],
      ["GET", 200],
      ["GET", 401],
    ]);
    expect(mine[0].key).toBe("ann-admin");
    const log = server.stdout();
    for (const secret of [ADMIN_KEY, VIEWER_KEY, REVOKED_KEY, "wrong-key", "zebra-prompt-7"])
      expect(log).not.toContain(secret);
  });
});

describe("agent-api serve --demo --env-file", () => {
  it("writes the AGENT_API_* variables the suite reads, though Node claims --env-file for itself", async () => {
    const envFile = join(dir, "demo.env");
    const demo = await serve(["--demo", "--data", join(dir, "demo"), "--port", "0", "--env-file", envFile]);
    try {
      const vars = Object.fromEntries(
        (await readFile(envFile, "utf8"))
          .trim()
          .split("\n")
          .map((line) => line.split(/=(.*)/s).slice(0, 2)),
      );
      expect(vars.AGENT_API_BASE_URL).toBe(demo.url);
      expect(vars.AGENT_API_KEY).toBe("demo-admin-key");
      expect(vars.AGENT_API_REVOKED_KEY).toBe("demo-revoked-key");
    } finally {
      await demo.stop();
    }
  });
});

describe("agent-api serve --demo behind a balancer", () => {
  it("--public-url names the balancer in the variables and the start-up lines; --demo-remote the shared remote", async () => {
    const envFile = join(dir, "balanced.env");
    const remote = join(dir, "shared", "acme-widgets.git");
    const demo = await serve([
      "--demo",
      "--data",
      join(dir, "balanced"),
      "--port",
      "0",
      "--write-env-file",
      envFile,
      "--public-url",
      "http://lb.example:8080/",
      "--demo-remote",
      remote,
    ]);
    try {
      const vars = Object.fromEntries(
        (await readFile(envFile, "utf8"))
          .trim()
          .split("\n")
          .map((line) => line.split(/=(.*)/s).slice(0, 2)),
      );
      expect(vars.AGENT_API_BASE_URL).toBe("http://lb.example:8080");
      expect(vars.AGENT_API_FLOW_URL).toBe("http://lb.example:8080");
      expect(vars.AGENT_API_REPO_URL).toBe(remote);
      expect(bareGit(remote, "rev-list", "--count", "main").trim()).toBe("1");
      // The instance itself still answers on its own address.
      expect(
        (
          await fetch(`${demo.url}/api/agents/demo-agent/conversations`, {
            headers: { "x-api-key": "demo-admin-key" },
          })
        ).status,
      ).toBe(200);
      const deadline = Date.now() + 10_000;
      while (!demo.stdout().includes("curl -N") && Date.now() < deadline) await sleep(50);
      expect(demo.stdout()).toContain("Demo workspace ready at http://lb.example:8080 ");
      expect(demo.stdout()).toContain("curl -N http://lb.example:8080/api/agents/demo-agent/v1/messages");
    } finally {
      await demo.stop();
    }
  });

  it("--shutdown-grace-ms bounds how long SIGTERM waits for a running turn, which then ends with an error event", async () => {
    const short = await serve([
      "--config",
      join(dir, "server.yaml"),
      "--data",
      join(dir, "data-grace"),
      "--port",
      "0",
      "--shutdown-grace-ms",
      "300",
      "--unsafe-no-isolation",
    ]);
    try {
      const turn = await fetch(`${short.url}/api/agents/helper/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": ADMIN_KEY, "content-type": "application/json" },
        body: JSON.stringify({
          messages: [{ role: "user", content: "Use your tools to run the shell command: sleep 60" }],
        }),
      });
      expect(turn.status).toBe(200);
      const body = turn.text();
      await sleep(300); // the tool is running
      // To the server alone, as a balancer's rolling restart does (the whole group would end the tool too).
      const stopped = performance.now();
      process.kill(short.pid, "SIGTERM");
      const alive = () => {
        try {
          process.kill(short.pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      while (alive() && performance.now() - stopped < 30_000) await sleep(50);
      // The default grace (10 s) would hold the exit past this bound; 300 ms and the 1 s close after it do not.
      expect(performance.now() - stopped).toBeLessThan(8_000);
      const text = await body;
      expect(text).toContain("event: error");
      expect(text).toContain("The server is shutting down");
    } finally {
      await short.stop();
    }
  });

  it("refuses a --public-url that is not an http(s) URL, and the demo's flags with --config", () => {
    const run = (args: string[]) => spawnSync(BIN, ["serve", ...args], { encoding: "utf8", timeout: 60_000 });
    const badUrl = run(["--public-url", "ftp://lb.example", "--port", "0"]);
    expect(badUrl.status).toBe(2);
    expect(badUrl.stderr).toContain("--public-url must be an http:// or https:// URL");
    // An empty fragment or query parses to no hash or search, and would still end every address built on it.
    for (const bare of ["http://lb.example:8080/#", "http://lb.example:8080?"]) {
      const refused = run(["--public-url", bare, "--port", "0"]);
      expect(refused.status).toBe(2);
      expect(refused.stderr).toContain("without query or fragment");
    }
    const withConfig = run(["--config", join(dir, "server.yaml"), "--demo-remote", join(dir, "x.git")]);
    expect(withConfig.status).toBe(2);
    expect(withConfig.stderr).toContain("--demo-remote apply to the demo, not to --config");
  });
});
