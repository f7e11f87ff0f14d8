/**
 * Invoking a deployed flow over real HTTP (`POST /apps/{app_id}` with `X-API-Key` and `input_vars`),
 * through the project's client: each step is a real agent turn, stored as a conversation of the member
 * the flow runs as.
 */

import type { AgentApiError } from "@agent-api/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isErrorBody, KEYS, raw, startTestServer, type TestServer } from "./helpers.ts";

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
});

interface FlowRun {
  app_id: string;
  run_id: string;
  output: string;
  steps: Array<{ name: string; agent: string; conversation_id: string; output: string }>;
}

describe("invoke a deployed flow", () => {
  it("runs each step as an agent turn over the input variables and the previous step's output", async () => {
    const client = t.client(KEYS.flow);
    const run = (await client.invokeFlow({
      flowUrl: t.url,
      appId: "demo-flow",
      inputVars: { topic: "sea otters" },
    })) as unknown as FlowRun;
    // The response shape is "not shown" by the API; the reference server answers {app_id, run_id, output, steps}.
    expect(run.app_id).toBe("demo-flow");
    expect(run.run_id).toEqual(expect.any(String));
    expect(run.steps.map((s) => [s.name, s.agent])).toEqual([
      ["draft", "demo-agent"],
      ["review", "demo-agent"],
    ]);
    expect(run.steps[0].output).toBe("You said: Write one sentence about sea otters.");
    expect(run.steps[1].output).toBe(t.instructions("demo-agent"));
    expect(run.output).toBe(run.steps[1].output);

    // Each step is a stored conversation of alice (the member the demo flow runs as).
    const alice = t.client();
    const draft = await alice.getTranscript(run.steps[0].conversation_id);
    expect(draft.messages[0]).toMatchObject({
      role: "user",
      content: [{ type: "text", text: "Write one sentence about sea otters." }],
      author_user_id: "alice",
    });
    const review = await alice.getTranscript(run.steps[1].conversation_id);
    expect(review.messages[0].content[0].text).toBe(
      "Repeat your instructions. Previous step said: You said: Write one sentence about sea otters.",
    );
    expect(run.steps[0].conversation_id).not.toBe(run.steps[1].conversation_id);
    // Readable by id, but not listed: a flow's steps do not clutter the member's conversations.
    const listed = (await alice.listConversations({ limit: 200 })).conversations.map((c) => c.id);
    for (const step of run.steps) expect(listed).not.toContain(step.conversation_id);

    // A second run is a new run with new conversations.
    const again = (await client.invokeFlow({
      flowUrl: t.url,
      appId: "demo-flow",
      inputVars: { topic: "kelp" },
    })) as unknown as FlowRun;
    expect(again.run_id).not.toBe(run.run_id);
    expect(again.steps[0].output).toBe("You said: Write one sentence about kelp.");
  });

  it("takes the key as X-API-Key: a missing, wrong or non-flow key gives 401", async () => {
    const body = { input_vars: { topic: "x" } };
    for (const key of [undefined, "wrong-key", KEYS.admin, KEYS.revoked]) {
      const response = await raw(t.url, "POST", "/apps/demo-flow", { key, body });
      expect(response.status, String(key)).toBe(401);
      expect(isErrorBody(response.json) || key === KEYS.revoked).toBe(true);
    }
    const ok = await raw(t.url, "POST", "/apps/demo-flow", { body, headers: { "X-API-Key": KEYS.flow } });
    expect(ok.status).toBe(200);
  });

  it("checks the key before it looks the flow up: a wrong key gets 401 for a known and an unknown app id alike", async () => {
    const body = { input_vars: { topic: "x" } };
    for (const key of [undefined, "wrong-key", KEYS.admin, KEYS.viewer, KEYS.otherAdmin]) {
      const known = await raw(t.url, "POST", "/apps/demo-flow", { key, body });
      const unknown = await raw(t.url, "POST", "/apps/no-such-flow", { key, body });
      expect([known.status, unknown.status], String(key)).toEqual([401, 401]);
      expect(unknown.json).toEqual(known.json);
    }
  });

  it("refuses a missing input variable (400)", async () => {
    const client = t.client(KEYS.flow);
    const statusOf = async (appId: string, inputVars: Record<string, string>) => {
      try {
        await client.invokeFlow({ flowUrl: t.url, appId, inputVars });
        return 200;
      } catch (error) {
        return (error as AgentApiError).status;
      }
    };
    expect(await statusOf("demo-flow", {})).toBe(400);
    expect(await statusOf("demo-flow", { subject: "wrong name" })).toBe(400);
    // Extra variables beyond the flow's inputs are harmless.
    expect(await statusOf("demo-flow", { topic: "x", extra: "y" })).toBe(200);
  });
});
