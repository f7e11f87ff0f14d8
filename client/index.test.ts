/**
 * The client against a real Prism mock server started from generated/openapi.json. Prism answers with
 * the spec's static examples; a `Prefer` header (added by the fetch we pass in) picks another documented
 * status or example. Prism sends a text/event-stream example as one body, which is enough to prove the
 * parsing, but not incremental delivery (covered by the reference-server tests).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PrismMock, startPrismMock } from "../conformance/cli/mock.ts";
import {
  AgentApiError,
  type AgentClient,
  collectText,
  createAgentClient,
  StreamErrorEventError,
  type TurnEvent,
} from "./index.ts";

let prism: PrismMock;

beforeAll(async () => {
  prism = await startPrismMock();
});

afterAll(async () => {
  await prism?.close();
});

/** A client whose requests carry `Prefer: <prefer>` and are counted. */
function clientPreferring(prefer?: string): { client: AgentClient; requests: Request[] } {
  const requests: Request[] = [];
  const client = createAgentClient({
    baseUrl: prism.url,
    apiKey: "test-key",
    agent: "acme-support-bot",
    fetch: (request) => {
      if (prefer) request.headers.set("Prefer", prefer);
      requests.push(request.clone());
      return fetch(request);
    },
  });
  return { client, requests };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to reject");
}

describe("JSON routes", () => {
  it("lists models with the key header on the agent's path", async () => {
    const { client, requests } = clientPreferring();
    const models = await client.listModels();
    expect(models.has_more).toBe(false);
    expect(models.data.map((m) => m.id)).toEqual(["claude-sonnet-4-5", "claude-haiku-4-5"]);
    expect(new URL(requests[0].url).pathname).toBe("/api/agents/acme-support-bot/v1/models");
    expect(requests[0].headers.get("x-api-key")).toBe("test-key");
  });

  it("lists conversations with query parameters", async () => {
    const { client, requests } = clientPreferring();
    const list = await client.listConversations({ channel: "INTERACTIVE", limit: 10 });
    expect(list.conversations[0].id).toBe("conv-2f6c1a");
    const url = new URL(requests[0].url);
    expect(url.searchParams.get("channel")).toBe("INTERACTIVE");
    expect(url.searchParams.get("limit")).toBe("10");
  });

  it("surfaces a limit outside 1..200 as a typed 400", async () => {
    const { client } = clientPreferring();
    const error = await rejection(client.listConversations({ limit: 500 }));
    expect(error).toBeInstanceOf(AgentApiError);
    expect((error as AgentApiError).status).toBe(400);
  });

  it("reads a conversation, its transcript and its last compaction", async () => {
    const { client } = clientPreferring();
    const { conversation } = await client.getConversation("conv-2f6c1a");
    expect(conversation.agent_session_id).toBe("sess_01J9Z3");
    const transcript = await client.getTranscript("conv-2f6c1a");
    expect(transcript.messages[0].is_compact_summary).toBe(true);
    expect(transcript.messages.at(-1)?.role).toBe("assistant");
    const compaction = await client.getLastCompaction("conv-2f6c1a");
    expect(compaction.compacted).toBe(true);
  });

  it("toggles sharing with exactly {shared}", async () => {
    const { client, requests } = clientPreferring();
    const result = await client.setSharing("conv-2f6c1a", true);
    expect(result).toHaveProperty("conversation");
    expect(requests[0].method).toBe("POST");
    expect(await requests[0].json()).toEqual({ shared: true });
  });

  it("forks and deletes", async () => {
    const { client, requests } = clientPreferring();
    const fork = await client.fork("conv-2f6c1a", { at_turn: 1, conversation_id: "conv-2f6c1a-alt" });
    expect(fork).toMatchObject({ parent_conversation_id: "conv-2f6c1a", forked_at_turn: 1 });
    await expect(client.deleteConversation("conv-2f6c1a")).resolves.toBeUndefined();
    expect(requests.map((r) => r.method)).toEqual(["POST", "DELETE"]);
  });

  it("invokes a flow on the flow server with X-API-Key", async () => {
    const { client, requests } = clientPreferring();
    const result = await client.invokeFlow({
      flowUrl: prism.url,
      appId: "app_7d1e",
      inputVars: { topic: "q3" },
      apiKey: "flow-key",
    });
    expect(result).toHaveProperty("run_id");
    expect(new URL(requests[0].url).pathname).toBe("/apps/app_7d1e");
    expect(requests[0].headers.get("x-api-key")).toBe("flow-key");
  });
});

describe("typed errors", () => {
  it("401 for a revoked key carries the fixed body", async () => {
    const { client } = clientPreferring("code=401, example=revoked");
    const error = (await rejection(client.listModels())) as AgentApiError;
    expect(error).toBeInstanceOf(AgentApiError);
    expect(error.status).toBe(401);
    expect(error.body).toEqual({ message: "API key has been revoked" });
  });

  it("404 carries `Conversation not found`", async () => {
    const { client } = clientPreferring("code=404, example=conversationNotFound");
    const error = (await rejection(client.getConversation("elsewhere"))) as AgentApiError;
    expect(error.status).toBe(404);
    expect(error.message).toContain("Conversation not found");
  });

  it("403 on send, before any stream", async () => {
    const { client } = clientPreferring("code=403, example=viewer");
    const error = (await rejection(
      client.sendMessage({ messages: [{ role: "user", content: "hi" }] }),
    )) as AgentApiError;
    expect(error.status).toBe(403);
    expect(error.body).toMatchObject({ error: { type: "permission_error" } });
  });

  it("409 on a taken fork id, 501 on async delivery", async () => {
    const conflict = (await rejection(
      clientPreferring("code=409").client.fork("conv-2f6c1a", { conversation_id: "taken" }),
    )) as AgentApiError;
    expect(conflict.status).toBe(409);
    const notImplemented = (await rejection(
      clientPreferring("code=501").client.sendMessage({
        messages: [{ role: "user", content: "hi" }],
        metadata: { delivery: "async" },
      }),
    )) as AgentApiError;
    expect(notImplemented.status).toBe(501);
  });
});

describe("turn stream", () => {
  it("returns the conversation id and the typed events of a turn with a tool call", async () => {
    const { client, requests } = clientPreferring();
    const turn = await client.sendMessage({
      stream: true,
      messages: [{ role: "user", content: "How many lines does notes.txt have?" }],
      metadata: { conversation_id: "conv-2f6c1a", stream_tool_calls: true },
    });
    expect(turn.conversationId).toBe("conv-2f6c1a");
    expect(new URL(requests[0].url).pathname).toBe("/api/agents/acme-support-bot/v1/messages");
    const events: TurnEvent[] = [];
    for await (const event of turn) events.push(event);
    expect(events.map((e) => e.type)).toEqual([
      "message_start",
      ...["content_block_start", "content_block_delta", "content_block_delta", "content_block_stop"],
      ...["content_block_start", "content_block_delta", "content_block_stop"],
      ...["content_block_start", "content_block_stop"],
      ...["content_block_start", "content_block_delta", "content_block_stop"],
      "message_delta",
      "message_stop",
    ]);
    const last = events.at(-2);
    expect(last?.type === "message_delta" && last.usage.total_cost_usd).toBeGreaterThan(0);
  });

  it("collects the text of a routed turn", async () => {
    const { client, requests } = clientPreferring();
    const turn = await client.sendRoutedMessage({
      model: "acme-support-bot",
      messages: [{ role: "user", content: [{ type: "text", text: "count lines" }] }],
    });
    expect(await collectText(turn)).toBe("notes.txt has 2 lines.");
    expect(new URL(requests[0].url).pathname).toBe("/api/agents/v1/messages");
  });

  it("yields the events before an error event, then throws it typed", async () => {
    const { client } = clientPreferring("example=errorAfterOpen");
    const turn = await client.sendMessage({ messages: [{ role: "user", content: "hi" }] });
    const seen: string[] = [];
    const error = await rejection(
      (async () => {
        for await (const event of turn) seen.push(event.type);
      })(),
    );
    expect(seen).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
    ]);
    expect(error).toBeInstanceOf(StreamErrorEventError);
    expect((error as StreamErrorEventError).errorType).toBe("api_error");
    expect((error as StreamErrorEventError).message).toContain("sandbox stopped");
  });
});

describe("waitForSession", () => {
  it("resolves with the session id once it is recorded", async () => {
    const { client } = clientPreferring();
    await expect(client.waitForSession("conv-2f6c1a", { timeoutMs: 5_000 })).resolves.toEqual({
      agentSessionId: "sess_01J9Z3",
      timedOut: false,
    });
  });

  it("keeps polling while the session is null and resolves timedOut instead of throwing", async () => {
    const { client, requests } = clientPreferring("example=sessionNotRecorded");
    const result = await client.waitForSession("conv-9b01", { intervalMs: 50, timeoutMs: 400 });
    expect(result).toEqual({ agentSessionId: null, timedOut: true });
    expect(requests.length).toBeGreaterThan(1);
    expect(requests.every((r) => new URL(r.url).pathname.endsWith("/conversations/conv-9b01"))).toBe(true);
  });

  it("throws a typed error when the conversation cannot be read", async () => {
    const { client } = clientPreferring("code=404");
    await expect(client.waitForSession("gone", { timeoutMs: 1_000 })).rejects.toBeInstanceOf(AgentApiError);
  });
});
