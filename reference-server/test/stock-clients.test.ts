/**
 * What stock clients of the messages API send, over real HTTP: the send routes read only the newest `user`
 * element of `messages` (SendMessageRequest), so elements they never read (a `system` element, replayed
 * history with blocks of any type) and fields they ignore (`thinking`, `context_management`, client `tools`,
 * `?beta=true`) are not refused; the element they do read is still checked. Beside the API, two extras the
 * stock SDKs read: `x-should-retry: false` on answers a retry cannot change (the SDKs retry 409 and 5xx
 * otherwise), and a `created_at` on each model entry (their model type requires it).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ISO_MS, isErrorBody, KEYS, raw, runTurn, startTestServer, type TestServer } from "./helpers.ts";

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
});

const SEND = "/api/agents/demo-agent/v1/messages";

/** A client tool definition the way Claude Code sends a dozen or more of them. */
const clientTool = (name: string) => ({
  name,
  description: `The client's own ${name} tool`,
  input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
});

/** The shape of a Claude Code `-p` request (captured from its CLI), with the demo's model. */
function claudeCodeBody(prompt: string): Record<string, unknown> {
  return {
    model: "demo-large",
    max_tokens: 32000,
    stream: true,
    system: [
      { type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } },
      { type: "text", text: "Be brief." },
    ],
    messages: [
      { role: "system", content: "Context the client keeps beside the conversation." },
      { role: "user", content: [{ type: "text", text: "an earlier prompt" }] },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "…", signature: "sig" },
          { type: "tool_use", id: "toolu_1", name: "Read", input: { path: "a" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_1", content: "file text" },
          { type: "text", text: prompt, cache_control: { type: "ephemeral" } },
        ],
      },
    ],
    tools: [
      "Bash",
      "Glob",
      "Grep",
      "Read",
      "Edit",
      "Write",
      "WebFetch",
      "TodoWrite",
      "WebSearch",
      "Task",
      "LS",
      "NotebookEdit",
    ].map(clientTool),
    thinking: { type: "enabled", budget_tokens: 31999 },
    context_management: { edits: [{ type: "clear_thinking_20251015", keep: "all" }] },
    metadata: { user_id: "user_0123_account__session_abc" },
    temperature: 1,
  };
}

describe("a stock client's request", () => {
  it("Claude Code's request shape (a system element in messages, thinking, tools, ?beta=true) streams the turn", async () => {
    const response = await raw(t.url, "POST", `${SEND}?beta=true`, {
      key: KEYS.admin,
      body: claudeCodeBody("Say hello to the stock client."),
      headers: { "anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219" },
    });
    expect(response.status, response.text.slice(0, 300)).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(response.text).toContain("event: message_start");
    expect(response.text).toContain("event: content_block_delta");
    expect(response.text).toContain("event: message_stop");
  });

  it("the model-routed send accepts the same shape", async () => {
    const body = { ...claudeCodeBody("Hello through the router."), model: "demo-agent" };
    const response = await raw(t.url, "POST", "/api/agents/v1/messages?beta=true", { key: KEYS.admin, body });
    expect(response.status, response.text.slice(0, 300)).toBe(200);
    expect(response.text).toContain("event: message_stop");
  });

  it("the element that is read is still checked: the newest user element must be an InputMessage", async () => {
    const bodies = [
      // The newest user element has no content, or content of the wrong type; older elements are fine.
      { messages: [{ role: "user", content: "older" }, { role: "user" }] },
      {
        messages: [
          { role: "system", content: "x" },
          { role: "user", content: 5 },
        ],
      },
      { messages: [{ role: "user", content: [{ text: "a block without a type" }] }] },
      // No user element at all, and an element without a role.
      { messages: [{ role: "system", content: "x" }] },
      { messages: [{ content: "x" }, { role: "user", content: "hi" }] },
    ];
    for (const body of bodies) {
      const response = await raw(t.url, "POST", SEND, { key: KEYS.admin, body });
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(isErrorBody(response.json), response.text).toBe(true);
    }
    const wrongContent = await raw(t.url, "POST", SEND, { key: KEYS.admin, body: bodies[1] });
    expect((wrongContent.json as { message: string }).message).toMatch(/^body\.messages\.1\.content /);
  });

  it("a stock client's own model name gets a 400 naming the models list", async () => {
    const body = { ...claudeCodeBody("hi"), model: "claude-sonnet-4-5-20250929" };
    const response = await raw(t.url, "POST", `${SEND}?beta=true`, { key: KEYS.admin, body });
    expect(response.status).toBe(400);
    expect((response.json as { message: string }).message).toMatch(
      /claude-sonnet-4-5-20250929.*GET \/api\/agents\/demo-agent\/v1\/models \(demo-large, demo-small\)/,
    );
  });
});

describe("what the stock SDKs read beside the API", () => {
  const NO_RETRY = "x-should-retry";
  it("the 501 of async delivery says x-should-retry: false", async () => {
    const response = await raw(t.url, "POST", SEND, {
      key: KEYS.admin,
      body: { messages: [{ role: "user", content: "hi" }], metadata: { delivery: "async" } },
    });
    expect(response.status).toBe(501);
    expect(response.headers.get(NO_RETRY)).toBe("false");
  });

  it("a fork's taken id (409), an unknown agent (404), a missing key (401), a viewer's turn (403) say it too", async () => {
    const { conversationId } = await runTurn(t.client(), "hello");
    const fork = await raw(t.url, "POST", `/api/agents/demo-agent/conversations/${conversationId}/fork`, {
      key: KEYS.admin,
      body: { conversation_id: conversationId },
    });
    expect(fork.status).toBe(409);
    expect(fork.headers.get(NO_RETRY)).toBe("false");
    const missing = await raw(t.url, "GET", "/api/agents/no-such-agent/v1/models", { key: KEYS.admin });
    expect([missing.status, missing.headers.get(NO_RETRY)]).toEqual([404, "false"]);
    const noKey = await raw(t.url, "GET", "/api/agents/demo-agent/v1/models");
    expect([noKey.status, noKey.headers.get(NO_RETRY)]).toEqual([401, "false"]);
    const viewer = await raw(t.url, "POST", SEND, {
      key: KEYS.viewer,
      body: { messages: [{ role: "user", content: "hi" }] },
    });
    expect([viewer.status, viewer.headers.get(NO_RETRY)]).toEqual([403, "false"]);
  });

  it("a success carries no such header", async () => {
    const models = await raw(t.url, "GET", "/api/agents/demo-agent/v1/models", { key: KEYS.admin });
    expect(models.status).toBe(200);
    expect(models.headers.get(NO_RETRY)).toBeNull();
  });

  it("every model entry carries created_at, a UTC timestamp", async () => {
    const models = await raw(t.url, "GET", "/api/agents/demo-agent/v1/models", { key: KEYS.admin });
    const { data } = models.json as { data: Array<{ id: string; created_at?: string }> };
    expect(data.length).toBeGreaterThan(0);
    for (const entry of data) expect(entry.created_at, entry.id).toMatch(ISO_MS);
  });
});
