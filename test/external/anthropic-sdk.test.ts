/**
 * The official messages client, `@anthropic-ai/sdk`, used unchanged against the reference server: the
 * agent-scoped base URL (`{base_url}/api/agents/{agent}`) and the model-routed one (`{base_url}/api/agents`
 * with `model: "<routing_prefix>--<agent>"`), both streaming styles (`messages.create({stream: true})` and
 * `messages.stream().finalMessage()`), thinking blocks with their signature, usage, server-side memory
 * through `metadata.conversation_id`, and the SDK's typed errors for 404/401/403 and a failed turn.
 * The snippet a user would paste is in test/external/README.md.
 */
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";

let url: string;
let env: Record<string, string>;
let server: DemoServer;

beforeAll(async () => {
  server = await startDemoServer(300);
  url = server.url;
  env = server.envVars;
});

afterAll(async () => {
  await server?.close();
});

const THINK = "Think step by step before answering.";

/** The SDK's metadata type has only `user_id`; the service reads `conversation_id` from the same object. */
const conversation = (id: string) => ({ conversation_id: id }) as unknown as Anthropic.Metadata;

// `authToken: null` so that an ANTHROPIC_AUTH_TOKEN in the environment cannot change what is sent.
function agentClient(agent = "demo-agent", apiKey = "demo-admin-key"): Anthropic {
  return new Anthropic({ baseURL: `${url}/api/agents/${agent}`, apiKey, authToken: null, maxRetries: 0 });
}

function routedClient(apiKey = "demo-admin-key"): Anthropic {
  return new Anthropic({ baseURL: `${url}/api/agents`, apiKey, authToken: null, maxRetries: 0 });
}

/** The API's client guidance: poll the conversation until `agent_session_id` is recorded (bounded). */
async function waitForSession(id: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const res = await fetch(`${url}/api/agents/demo-agent/conversations/${id}`, {
      headers: { "X-Api-Key": "demo-admin-key" },
    });
    const body = (await res.json()) as { conversation?: { agent_session_id: string | null } };
    if (body.conversation?.agent_session_id) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`agent_session_id of ${id} was not recorded within 10 s`);
}

function textOf(message: Anthropic.Message): string {
  return message.content.map((b) => (b.type === "text" ? b.text : "")).join("");
}

describe("@anthropic-ai/sdk against {base_url}/api/agents/{agent}", () => {
  it("messages.create({stream: true}) yields the whole turn: thinking with signature, text, usage", async () => {
    const client = agentClient();
    const { data: stream, response } = await client.messages
      .create({
        model: "demo-large",
        max_tokens: 1024,
        stream: true,
        messages: [{ role: "user", content: `${THINK} What is the capital of France?` }],
      })
      .withResponse();
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const conversationId = response.headers.get("x-conversation-id");
    expect(conversationId).toBeTruthy();

    const events: Anthropic.RawMessageStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((e) => e.type)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    const [start, thinkingStart, thinkingDelta, signatureDelta, , textStart, textDelta, , messageDelta] =
      events;
    expect(start.type === "message_start" && start.message.model).toBe("demo-large");
    // The input usage is known when message_start is sent: clients that read it only there report it.
    expect(start.type === "message_start" ? start.message.usage.input_tokens : 0).toBeGreaterThan(0);
    expect(thinkingStart).toMatchObject({ index: 0, content_block: { type: "thinking", thinking: "" } });
    expect(thinkingDelta).toMatchObject({ index: 0, delta: { type: "thinking_delta" } });
    expect(signatureDelta).toMatchObject({ index: 0, delta: { type: "signature_delta" } });
    expect(
      signatureDelta.type === "content_block_delta" && signatureDelta.delta.type === "signature_delta"
        ? signatureDelta.delta.signature
        : "",
    ).toMatch(/^\S{16,}$/);
    expect(textStart).toMatchObject({ index: 1, content_block: { type: "text", text: "" } });
    expect(
      textDelta.type === "content_block_delta" && textDelta.delta.type === "text_delta"
        ? textDelta.delta.text
        : "",
    ).toContain("What is the capital of France?");
    expect(messageDelta).toMatchObject({ delta: { stop_reason: "end_turn" } });
    const usage = messageDelta.type === "message_delta" ? messageDelta.usage : undefined;
    expect(usage?.output_tokens).toBeGreaterThan(0);
    expect((usage as unknown as { total_cost_usd?: number }).total_cost_usd).toBeGreaterThanOrEqual(0);

    // The turn is stored on the server under the id the SDK's response carried.
    const transcript = await fetch(`${url}/api/agents/demo-agent/conversations/${conversationId}/messages`, {
      headers: { "X-Api-Key": "demo-admin-key" },
    });
    expect(transcript.status).toBe(200);
    const body = (await transcript.json()) as { messages: { role: string }[] };
    expect(body.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
  });

  it("messages.stream().finalMessage() accumulates thinking (signed), text and usage", async () => {
    const stream = agentClient().messages.stream({
      model: "demo-small",
      max_tokens: 1024,
      messages: [{ role: "user", content: `${THINK} Name a prime number.` }],
    });
    let streamedText = "";
    stream.on("text", (delta) => {
      streamedText += delta;
    });
    const message = await stream.finalMessage();
    expect(message.type).toBe("message");
    expect(message.role).toBe("assistant");
    expect(message.model).toBe("demo-small");
    expect(message.stop_reason).toBe("end_turn");
    expect(message.content.map((b) => b.type)).toEqual(["thinking", "text"]);
    const thinking = message.content[0] as Anthropic.ThinkingBlock;
    expect(thinking.thinking).toContain("Name a prime number.");
    expect(thinking.signature.length).toBeGreaterThan(16);
    expect(textOf(message)).toContain("Name a prime number.");
    expect(streamedText).toBe(textOf(message));
    expect(message.usage.input_tokens).toBeGreaterThan(0);
    expect(message.usage.output_tokens).toBeGreaterThan(0);
  });

  it("resumes a conversation through metadata.conversation_id: the agent remembers (state is server-side)", async () => {
    const client = agentClient();
    const id = `sdk-memory-${Date.now()}`;
    const word = `kiwi-${Math.random().toString(36).slice(2, 8)}`;
    const first = await client.messages
      .stream({
        model: "demo-large",
        max_tokens: 256,
        messages: [{ role: "user", content: `Remember this code word: ${word}. Reply with just OK.` }],
        metadata: conversation(id),
      })
      .finalMessage();
    expect(textOf(first)).toBe("OK");
    await waitForSession(id);
    // One new user message per call; no history is replayed by the caller.
    const second = await client.messages
      .stream({
        model: "demo-large",
        max_tokens: 256,
        messages: [
          { role: "user", content: "What code word did I ask you to remember? Reply with just the word." },
        ],
        metadata: conversation(id),
      })
      .finalMessage();
    expect(textOf(second)).toBe(word);
  });

  it("also sends the key as the API's X-Api-Key header (apiKey: null, defaultHeaders)", async () => {
    // For a deployment that reads only X-Api-Key: the SDK then sends no Authorization header at all.
    const client = new Anthropic({
      baseURL: `${url}/api/agents/demo-agent`,
      apiKey: null,
      authToken: null,
      defaultHeaders: { "X-Api-Key": "demo-admin-key" },
      maxRetries: 0,
    });
    const { data: message, response } = await client.messages
      .stream({ model: "demo-large", max_tokens: 64, messages: [{ role: "user", content: "Say hello." }] })
      .withResponse();
    expect(response.status).toBe(200);
    expect(textOf(await message.finalMessage())).toContain("Say hello.");
    const wrong = await new Anthropic({
      baseURL: `${url}/api/agents/demo-agent`,
      apiKey: null,
      authToken: null,
      defaultHeaders: { "X-Api-Key": "not-a-key" },
      maxRetries: 0,
    }).messages
      .create({ model: "demo-large", max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(Anthropic.AuthenticationError);
  });

  it("surfaces an unknown agent as Anthropic.NotFoundError (404)", async () => {
    const error = await agentClient("no-such-agent")
      .messages.create({ model: "demo-large", max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Anthropic.NotFoundError);
    expect((error as InstanceType<typeof Anthropic.NotFoundError>).status).toBe(404);
    // The body is the messages API's error envelope, so the SDK shows the server's message and type.
    expect((error as InstanceType<typeof Anthropic.NotFoundError>).message).toContain(
      "Agent not found: no-such-agent",
    );
    expect((error as InstanceType<typeof Anthropic.NotFoundError>).type).toBe("not_found_error");
    // An agent of another workspace is just as unknown to this key.
    const foreign = await agentClient(env.AGENT_API_FOREIGN_AGENT)
      .messages.stream({ model: "demo-large", max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
      .finalMessage()
      .catch((e: unknown) => e);
    expect(foreign).toBeInstanceOf(Anthropic.NotFoundError);
  });

  it("surfaces key and role errors as the SDK's typed errors (401, 403)", async () => {
    const ask = (client: Anthropic) =>
      client.messages
        .create({ model: "demo-large", max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e);
    expect(await ask(agentClient("demo-agent", "not-a-key"))).toBeInstanceOf(Anthropic.AuthenticationError);
    const revoked = await ask(agentClient("demo-agent", "demo-revoked-key"));
    expect(revoked).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((revoked as InstanceType<typeof Anthropic.APIError>).error).toEqual({
      message: "API key has been revoked",
    });
    expect(await ask(agentClient("demo-agent", "demo-viewer-key"))).toBeInstanceOf(
      Anthropic.PermissionDeniedError,
    );
  });

  it("a model not in the models list: Anthropic.BadRequestError whose message names the models route", async () => {
    const error = await agentClient()
      .messages.create({
        model: "claude-made-up",
        max_tokens: 16,
        messages: [{ role: "user", content: "hi" }],
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Anthropic.BadRequestError);
    expect((error as InstanceType<typeof Anthropic.APIError>).message).toContain(
      "/api/agents/demo-agent/v1/models",
    );
    expect((error as InstanceType<typeof Anthropic.APIError>).type).toBe("invalid_request_error");
  });

  it("turns an error event after the stream opened into Anthropic.APIError with its type", async () => {
    const error = await agentClient()
      .messages.stream({
        model: "demo-large",
        max_tokens: 64,
        messages: [{ role: "user", content: "Fail this turn after it starts." }],
      })
      .finalMessage()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect((error as InstanceType<typeof Anthropic.APIError>).type).toBe("api_error");
  });
});

describe("@anthropic-ai/sdk against the model-routed path {base_url}/api/agents", () => {
  it("model <routing_prefix>--<agent> reaches the agent (stream().finalMessage())", async () => {
    const message = await routedClient()
      .messages.stream({
        model: `${env.AGENT_API_ROUTING_PREFIX}--demo-agent`,
        max_tokens: 256,
        messages: [
          { role: "user", content: `${THINK} Which model are you running as? Reply with just the model id.` },
        ],
      })
      .finalMessage();
    expect(message.content.map((b) => b.type)).toEqual(["thinking", "text"]);
    expect((message.content[0] as Anthropic.ThinkingBlock).signature.length).toBeGreaterThan(16);
    // The routing string is not a model id: the turn runs on the agent's default model.
    expect(textOf(message)).toBe("demo-large");
    expect(message.usage.output_tokens).toBeGreaterThan(0);
  });

  it("messages.create({stream: true}) with a bare agent name as model", async () => {
    const stream = await routedClient().messages.create({
      model: "notes-agent",
      max_tokens: 256,
      stream: true,
      messages: [{ role: "user", content: "Repeat your instructions." }],
    });
    let text = "";
    let outputTokens = 0;
    for await (const event of stream) {
      if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text;
      if (event.type === "message_delta") outputTokens = event.usage.output_tokens;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(outputTokens).toBeGreaterThan(0);
  });

  it("an unknown routed agent is Anthropic.NotFoundError", async () => {
    const error = await routedClient()
      .messages.create({
        model: `${env.AGENT_API_ROUTING_PREFIX}--no-such-agent`,
        max_tokens: 16,
        messages: [{ role: "user", content: "hi" }],
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Anthropic.NotFoundError);
  });
});
