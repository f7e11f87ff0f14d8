/**
 * The client against the real reference server (not Prism): the parts Prism cannot play — a live turn
 * stream, an `error` event after the stream opened, and the wait for `agent_session_id`.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../reference-server/index.ts";
import {
  AgentApiError,
  collectText,
  createAgentClient,
  StreamErrorEventError,
  type TurnEvent,
} from "./index.ts";

const SESSION_DELAY_MS = 300;
let server: RunningServer;
let dataDir: string;
let client: ReturnType<typeof createAgentClient>;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "client-ref-"));
  server = await startServer({
    dataDir,
    port: 0,
    host: "127.0.0.1",
    demo: true,
    sessionDelayMs: SESSION_DELAY_MS,
    logLevel: "silent",
  });
  client = createAgentClient({ baseUrl: server.url, apiKey: "demo-admin-key", agent: "demo-agent" });
}, 30_000);

afterAll(async () => {
  await server?.close();
  await rm(dataDir, { recursive: true, force: true });
});

const prompt = (content: string, conversationId?: string) => ({
  stream: true,
  messages: [{ role: "user" as const, content }],
  ...(conversationId ? { metadata: { conversation_id: conversationId } } : {}),
});

describe("client against the reference server", () => {
  it("sendMessage yields typed events and the id from X-Conversation-Id", async () => {
    const turn = await client.sendMessage(prompt("Remember this code word: plum. Reply with just OK."));
    expect(turn.conversationId).toMatch(/^conv_/);
    const events: TurnEvent[] = [];
    for await (const event of turn) events.push(event);
    expect(events[0].type).toBe("message_start");
    expect(events.at(-1)?.type).toBe("message_stop");
  });

  it("an error event is thrown as StreamErrorEventError after the events before it", async () => {
    const turn = await client.sendMessage(prompt("Fail this turn after it starts."));
    const seen: string[] = [];
    let thrown: unknown;
    try {
      for await (const event of turn) seen.push(event.type ?? "error");
    } catch (error) {
      thrown = error;
    }
    expect(seen).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
    ]);
    expect(thrown).toBeInstanceOf(StreamErrorEventError);
    expect((thrown as StreamErrorEventError).errorType).toBe("api_error");
  });

  it("waitForSession returns the session once recorded, and memory follows", async () => {
    const id = `client-wait-${Date.now()}`;
    await collectText(
      await client.sendMessage(prompt("Remember this code word: fig. Reply with just OK.", id)),
    );
    const waited = await client.waitForSession(id, { intervalMs: 50, timeoutMs: 5_000 });
    expect(waited.timedOut).toBe(false);
    expect(waited.agentSessionId).toMatch(/^sess_/);
    const answer = await collectText(
      await client.sendMessage(
        prompt("What code word did I ask you to remember? Reply with just the word.", id),
      ),
    );
    expect(answer).toBe("fig");
  });

  it("waitForSession gives up at its bound when a turn legitimately has no session", async () => {
    const id = `client-empty-${Date.now()}`;
    await collectText(await client.sendMessage(prompt("Produce no output at all for this turn.", id)));
    const waited = await client.waitForSession(id, { intervalMs: 50, timeoutMs: SESSION_DELAY_MS * 3 });
    expect(waited).toEqual({ agentSessionId: null, timedOut: true });
  });

  it("a non-2xx answer is an AgentApiError with status and body", async () => {
    const error = await client.getConversation("no-such-conversation").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AgentApiError);
    expect((error as AgentApiError).status).toBe(404);
    expect((error as AgentApiError).body).toMatchObject({ message: "Conversation not found" });
  });
});
