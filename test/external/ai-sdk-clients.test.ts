/**
 * Two common AI SDK clients besides the official one, used unchanged against the reference server: the
 * Vercel AI SDK (`ai` + `@ai-sdk/anthropic`) and LangChain (`@langchain/anthropic`). Each streams text,
 * shows thinking, sends a system prompt (both send it as a list of text blocks), shows the server's own
 * message on an error, and resumes a conversation through `metadata.conversation_id`.
 *
 * The Vercel AI SDK sends no request metadata but `metadata.user_id`, so resuming needs the one extension
 * point it offers for this, a `fetch` that adds `metadata.conversation_id` to the body (AI_SDK_RESUME below).
 * Its `generateText` asks for a JSON message (`stream: false`), which the API answers with an event stream
 * all the same, so a turn goes through `streamText`; errors, answered before any stream, reach both.
 */
import { createAnthropic } from "@ai-sdk/anthropic";
import { ChatAnthropic } from "@langchain/anthropic";
import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import { APICallError, generateText, streamText } from "ai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";

let server: DemoServer;
let url: string;

beforeAll(async () => {
  server = await startDemoServer(300);
  url = server.url;
});
afterAll(async () => {
  await server?.close();
});

const KEY = "demo-admin-key";
const THINK = "Think step by step before answering.";
const remember = (word: string) => `Remember this code word: ${word}. Reply with just OK.`;
const RECALL = "What code word did I ask you to remember? Reply with just the word.";

/** The API's client guidance: wait (bounded) until the conversation's session is recorded. */
async function waitForSession(id: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const res = await fetch(`${url}/api/agents/demo-agent/conversations/${encodeURIComponent(id)}`, {
      headers: { "X-Api-Key": KEY },
    });
    const body = (await res.json()) as { conversation?: { agent_session_id: string | null } };
    if (body.conversation?.agent_session_id) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`agent_session_id of ${id} was not recorded within 10 s`);
}

/** The instructions the demo agent repeats back, read through the service itself. */
async function instructions(): Promise<string> {
  const res = await fetch(`${url}/api/agents/demo-agent/v1/messages`, {
    method: "POST",
    headers: { "X-Api-Key": KEY, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "Repeat your instructions." }] }),
  });
  const text = await res.text();
  return [...text.matchAll(/"text_delta","text":("(?:[^"\\]|\\.)*")/g)].map((m) => JSON.parse(m[1])).join("");
}

describe("Vercel AI SDK (ai + @ai-sdk/anthropic)", () => {
  const provider = (agent = "demo-agent", apiKey = KEY, extra: { fetch?: typeof fetch } = {}) =>
    createAnthropic({ baseURL: `${url}/api/agents/${agent}/v1`, apiKey, ...extra });

  /** Adds metadata.conversation_id to each request body: the SDK has no option for it. */
  const AI_SDK_RESUME =
    (conversationId: string): typeof fetch =>
    (input, init) => {
      const body = JSON.parse(String(init?.body)) as { metadata?: Record<string, unknown> };
      body.metadata = { ...body.metadata, conversation_id: conversationId };
      return fetch(input, { ...init, body: JSON.stringify(body) });
    };

  it("streams text and thinking, with usage", async () => {
    const result = streamText({
      model: provider()("demo-large"),
      prompt: `${THINK} Which model are you running as? Reply with just the model id.`,
      maxRetries: 0,
    });
    let streamed = "";
    for await (const delta of result.textStream) streamed += delta;
    expect(streamed).toBe("demo-large");
    expect((await result.reasoningText)?.length ?? 0).toBeGreaterThan(0);
    expect((await result.usage).outputTokens ?? 0).toBeGreaterThan(0);
    expect((await result.usage).inputTokens ?? 0).toBeGreaterThan(0);
    expect(await result.finishReason).toBe("stop");
  });

  it("sends a system prompt the agent appends to its instructions", async () => {
    const result = streamText({
      model: provider()("demo-large"),
      system: "Answer like a pirate.",
      prompt: "Repeat your instructions.",
      maxRetries: 0,
    });
    expect(await result.text).toBe(`${await instructions()}\n\nAnswer like a pirate.`);
  });

  it("shows the server's message on an error (unknown agent 404, unknown model 400, revoked key 401)", async () => {
    const failure = (agent: string, model: string, apiKey = KEY) =>
      generateText({ model: provider(agent, apiKey)(model), prompt: "hi", maxRetries: 0 }).catch(
        (e: unknown) => e,
      );
    const missing = await failure("no-such-agent", "demo-large");
    expect(APICallError.isInstance(missing)).toBe(true);
    expect((missing as APICallError).statusCode).toBe(404);
    expect((missing as APICallError).message).toBe("Agent not found: no-such-agent");
    const model = await failure("demo-agent", "claude-made-up");
    expect((model as APICallError).statusCode).toBe(400);
    expect((model as APICallError).message).toContain("/api/agents/demo-agent/v1/models");
    const revoked = await failure("demo-agent", "demo-large", "demo-revoked-key");
    expect((revoked as APICallError).statusCode).toBe(401);
    expect((revoked as APICallError).responseBody).toBe('{"message":"API key has been revoked"}');
  });

  it("a failure after the stream opened reaches the caller as an error with the server's type", async () => {
    const errors: unknown[] = [];
    const result = streamText({
      model: provider()("demo-large"),
      prompt: "Fail this turn after it starts.",
      maxRetries: 0,
      onError: ({ error }) => {
        errors.push(error);
      },
    });
    await result.consumeStream();
    expect(errors).toHaveLength(1);
    expect(JSON.stringify(errors[0])).toContain("api_error");
  });

  it("resumes a conversation through metadata.conversation_id (server-side memory)", async () => {
    const id = `ai-sdk-${process.pid}-${Date.now()}`;
    const model = provider("demo-agent", KEY, { fetch: AI_SDK_RESUME(id) })("demo-large");
    expect(await streamText({ model, prompt: remember("vercel-kiwi"), maxRetries: 0 }).text).toBe("OK");
    await waitForSession(id);
    expect(await streamText({ model, prompt: RECALL, maxRetries: 0 }).text).toBe("vercel-kiwi");
  });
});

describe("LangChain (@langchain/anthropic)", () => {
  const chat = (options: { agent?: string; apiKey?: string; conversationId?: string; model?: string } = {}) =>
    new ChatAnthropic({
      model: options.model ?? "demo-large",
      apiKey: options.apiKey ?? KEY,
      anthropicApiUrl: `${url}/api/agents/${options.agent ?? "demo-agent"}`,
      maxRetries: 0,
      streaming: true,
      // Anything the messages API takes that ChatAnthropic has no field for goes here, metadata included.
      ...(options.conversationId
        ? { invocationKwargs: { metadata: { conversation_id: options.conversationId } } }
        : {}),
    });

  it("streams text and thinking, with real input and output usage", async () => {
    let text = "";
    let thinking = "";
    const usage = { input: 0, output: 0 };
    for await (const chunk of await chat().stream(
      `${THINK} Which model are you running as? Reply with just the model id.`,
    )) {
      // LangChain reads input usage from message_start only, output usage from message_delta.
      usage.input += chunk.usage_metadata?.input_tokens ?? 0;
      usage.output += chunk.usage_metadata?.output_tokens ?? 0;
      if (typeof chunk.content === "string") text += chunk.content;
      else
        for (const block of chunk.content as Array<{ type: string; text?: string; thinking?: string }>) {
          if (block.type === "text") text += block.text ?? "";
          if (block.type === "thinking") thinking += block.thinking ?? "";
        }
    }
    expect(text).toBe("demo-large");
    expect(thinking.length).toBeGreaterThan(0);
    expect(usage.input).toBeGreaterThan(0);
    expect(usage.output).toBeGreaterThan(0);
  });

  it("sends a system prompt the agent appends to its instructions", async () => {
    const reply = await chat().invoke([
      new SystemMessage("Answer like a pirate."),
      new HumanMessage("Repeat your instructions."),
    ]);
    expect(reply.text).toBe(`${await instructions()}\n\nAnswer like a pirate.`);
  });

  it("shows the server's message on an error (unknown agent 404, unknown model 400)", async () => {
    const missing = (await chat({ agent: "no-such-agent" })
      .invoke("hi")
      .catch((e: unknown) => e)) as Error & {
      status?: number;
    };
    expect(missing.status).toBe(404);
    expect(missing.message).toContain("Agent not found: no-such-agent");
    const model = (await chat({ model: "claude-made-up" })
      .invoke("hi")
      .catch((e: unknown) => e)) as Error & {
      status?: number;
    };
    expect(model.status).toBe(400);
    expect(model.message).toContain("/api/agents/demo-agent/v1/models");
  });

  it("resumes a conversation through metadata.conversation_id (server-side memory)", async () => {
    const id = `langchain-${process.pid}-${Date.now()}`;
    expect((await chat({ conversationId: id }).invoke(remember("lang-mango"))).text).toBe("OK");
    await waitForSession(id);
    expect((await chat({ conversationId: id }).invoke(RECALL)).text).toBe("lang-mango");
  });
});
