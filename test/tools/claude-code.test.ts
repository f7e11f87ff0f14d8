/**
 * Claude Code, a stock client of the messages API, unchanged against the demo: its CLI (`claude -p`) with
 * ANTHROPIC_BASE_URL = {base_url}/api/agents/{agent} and the demo's key prints the agent's answer. It sends
 * a `system` element in `messages`, `thinking`, `context_management` and its own tools to
 * `/v1/messages?beta=true`, all of which the send route leaves unread. Its own default model is not a model
 * of the agent: the 400 names the models list (so `--model` or ANTHROPIC_MODEL picks one of its ids).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";
import { run } from "./matrix.ts";
import { toolBin, toolsUnavailable } from "./tools-dir.ts";

const skip = toolsUnavailable();
let demo: DemoServer;
let home: string;

beforeAll(async () => {
  if (skip) return;
  demo = await startDemoServer(300);
  home = await mkdtemp(join(tmpdir(), "claude-home-"));
});
afterAll(async () => {
  await demo?.close();
  if (home) await rm(home, { recursive: true, force: true });
});

/** `claude -p` as a user runs it, in a fresh home, against the demo agent. */
function claude(args: string[]) {
  return run(toolBin("claude"), ["-p", ...args], {
    cwd: home,
    env: {
      HOME: home,
      ANTHROPIC_BASE_URL: `${demo.url}/api/agents/demo-agent`,
      ANTHROPIC_API_KEY: "demo-admin-key",
      // No update checks or telemetry from a test.
      DISABLE_AUTOUPDATER: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    },
    timeoutMs: 120_000,
  });
}

describe.skipIf(skip !== null)(`Claude Code's CLI${skip ? ` (skipped: ${skip})` : ""}`, () => {
  it("prints the agent's answer with --model set to one of the agent's models", async () => {
    const result = await claude([
      "--model",
      "demo-large",
      "Which model are you running as? Reply with just the model id.",
    ]);
    expect(result.code, result.stderr + result.stdout).toBe(0);
    expect(result.stdout.trim()).toBe("demo-large");
  });

  it("without --model, its own model name gets the 400 that names the models list", async () => {
    const result = await claude(["Say hello."]);
    expect(result.code).not.toBe(0);
    expect(result.stdout + result.stderr).toMatch(
      /400 model "[^"]+" is not a model of agent demo-agent: use one of the ids listed by GET \/api\/agents\/demo-agent\/v1\/models \(demo-large, demo-small\)/,
    );
  });
});
