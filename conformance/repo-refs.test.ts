/**
 * REPO-READ-ONLY-DEFAULT watches every branch and tag, not only HEAD: a read-only turn that pushes to
 * another branch fails it, and the failure names who authored the new commit. A push by someone else that
 * lands once during the read-only turn is told apart by a second read-only turn. A small proxy in front of
 * the reference demo makes the pushes when a read-only turn goes through.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { DemoServer } from "../reference-server/demo/index.ts";
import { startDemoServer } from "../reference-server/demo/index.ts";
import { catalogue } from "./catalogue.ts";
import { resolveInputs } from "./inputs.ts";
import { runSuite } from "./runner.ts";
import { SpecValidator } from "./spec-validator.ts";
import type { CheckResult } from "./types.ts";

const git = promisify(execFile);
const AGENT_IDENTITY = { name: "Agent", email: "agent@agent-api.local" };

let demo: DemoServer;
let validator: SpecValidator;
let work: string;

beforeAll(async () => {
  demo = await startDemoServer(300);
  validator = await SpecValidator.load();
  work = await mkdtemp(join(tmpdir(), "acc-refs-test-"));
  await git("git", ["clone", "--quiet", demo.envVars.AGENT_API_REPO_URL, work]);
}, 60_000);

afterAll(async () => {
  await demo?.close();
  await rm(work, { recursive: true, force: true });
});

/** A commit by `who` on `branch` of the demo's repository (as another clone would push it). */
async function pushCommit(branch: string, who: { name: string; email: string }): Promise<void> {
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: who.name,
    GIT_AUTHOR_EMAIL: who.email,
    GIT_COMMITTER_NAME: who.name,
    GIT_COMMITTER_EMAIL: who.email,
  };
  await git("git", ["-C", work, "commit", "--quiet", "--allow-empty", "-m", `push to ${branch}`], { env });
  await git("git", ["-C", work, "push", "--quiet", "--force", "origin", `HEAD:refs/heads/${branch}`], {
    env,
  });
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (chunk) => {
      text += chunk;
    });
    req.on("end", () => resolve(text));
  });
}

/** Runs REPO-READ-ONLY-DEFAULT through a proxy calling `onReadOnlyTurn(n)` as the n-th read-only turn runs. */
async function runThrough(onReadOnlyTurn: (n: number) => Promise<void>): Promise<CheckResult> {
  let readOnlyTurns = 0;
  const proxy: Server = createServer(async (req, res) => {
    const body = await readBody(req);
    const path = req.url ?? "/";
    if (req.method === "POST" && path.endsWith(`/${demo.envVars.AGENT_API_REPO_AGENT}/v1/messages`)) {
      const json = JSON.parse(body);
      if (json.metadata?.read_only === undefined) await onReadOnlyTurn(++readOnlyTurns);
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (typeof v === "string" && k !== "host" && k !== "content-length") headers[k] = v;
    const upstream = await fetch(`${demo.url}${path}`, {
      method: req.method,
      headers,
      body: req.method === "GET" || req.method === "DELETE" ? undefined : body,
    });
    const out: Record<string, string> = {};
    upstream.headers.forEach((v, k) => {
      if (!["content-length", "transfer-encoding", "connection", "content-encoding"].includes(k)) out[k] = v;
    });
    res.writeHead(upstream.status, out).end(Buffer.from(await upstream.arrayBuffer()));
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  try {
    const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    const report = await runSuite({
      checks: catalogue,
      only: ["REPO-READ-ONLY-DEFAULT"],
      inputs: resolveInputs(
        {},
        { ...demo.envVars, AGENT_API_BASE_URL: url, AGENT_API_SESSION_WAIT_MS: "3000" },
      ),
      validator,
    });
    return report.results[0];
  } finally {
    await new Promise((resolve) => proxy.close(resolve));
  }
}

it("fails when a read-only turn pushes to another branch under the agent's identity", async () => {
  const result = await runThrough(() => pushCommit("acc-scratch", AGENT_IDENTITY));
  expect(result.outcome, result.reason).toBe("fail");
  expect(result.reason).toContain("Agent <agent@agent-api.local>");
  expect(JSON.stringify(result.details)).toContain("refs/heads/acc-scratch");
}, 60_000);

it("fails, naming the author, when every read-only turn moves a ref under another identity", async () => {
  const result = await runThrough(() =>
    pushCommit("acc-caller", { name: "Caller", email: "caller@example.com" }),
  );
  expect(result.outcome, result.reason).toBe("fail");
  expect(result.reason).toContain("Caller <caller@example.com>");
}, 60_000);

it("passes, with a note, when someone else's push lands once during the read-only turn", async () => {
  const result = await runThrough(async (n) => {
    if (n === 1) await pushCommit("acc-unrelated", { name: "Someone Else", email: "else@example.com" });
  });
  expect(result.outcome, result.reason).toBe("pass");
  expect(result.notes.join("\n")).toContain("Someone Else <else@example.com>");
}, 60_000);
