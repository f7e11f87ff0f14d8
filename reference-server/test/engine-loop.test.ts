/**
 * The one agent loop over HTTP, as a user runs it: the reference server on `--engine anthropic`, whose
 * upstream is the scripted model served over HTTP on loopback (what `agent-api model` runs). Each test
 * drives the upstream with a phrase of the scripted model's table and judges what the client receives
 * and what SQLite keeps.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import type { AgentClient, SendMessageRequest, TurnEvent } from "@agent-api/client";
import { StreamErrorEventError } from "@agent-api/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ScriptedModelServer,
  type ScriptedRequest,
  serveScriptedModel,
} from "../scripted-model/scripted-transport.ts";
import { PHRASES, runTurn, setEnv, startTestServer, type TestServer } from "./helpers.ts";

let model: ScriptedModelServer;
let slowModel: ScriptedModelServer;
let t: TestServer;
let limited: TestServer;
let slow: TestServer;
let delayed: TestServer;
/** Every request the upstream `model` received, in order (what the model was sent). */
const requests: ScriptedRequest[] = [];

/** Puts back the upstream variables the engines read at start. */
let restoreEnv = () => {};

beforeAll(async () => {
  model = await serveScriptedModel({ deltasPerBlock: 4, onRequest: (request) => requests.push(request) });
  slowModel = await serveScriptedModel({ latencyMs: 400 });
  restoreEnv = setEnv({ ANTHROPIC_API_KEY: "scripted-upstream-key", ANTHROPIC_BASE_URL: model.url });
  t = await startTestServer({ engine: "anthropic", sessionDelayMs: 0, unsafeNoIsolation: true });
  limited = await startTestServer({
    engine: "anthropic",
    sessionDelayMs: 0,
    maxIterations: 3,
    turnTimeoutMs: 1500,
    unsafeNoIsolation: true,
  });
  // A recording delay longer than any test: a new session stays pending in memory.
  delayed = await startTestServer({ engine: "anthropic", sessionDelayMs: 600_000, unsafeNoIsolation: true });
  process.env.ANTHROPIC_BASE_URL = slowModel.url;
  slow = await startTestServer({ engine: "anthropic", keepAliveMs: 100, unsafeNoIsolation: true });
}, 60_000);

afterAll(async () => {
  restoreEnv();
  await Promise.all([t?.close(), limited?.close(), slow?.close(), delayed?.close()]);
  await Promise.all([model?.close(), slowModel?.close()]);
});

const toolsAvailable = () => t.server.isolation !== "unavailable";

/**
 * Like runTurn, but a turn that ends with an `error` event keeps it (the client throws), its message, and the
 * error catalogue's code the server logged for it.
 */
async function turnUntilEnd(
  server: TestServer,
  prompt: string,
  metadata?: SendMessageRequest["metadata"],
  client: AgentClient = server.client(),
): Promise<{
  conversationId: string;
  events: TurnEvent[];
  text: string;
  errorEvent?: unknown;
  error?: string;
  code?: string;
}> {
  const turn = await client.sendMessage({ messages: [{ role: "user", content: prompt }], metadata });
  const events: TurnEvent[] = [];
  let error: string | undefined;
  let errorEvent: unknown;
  try {
    for await (const event of turn) events.push(event);
  } catch (thrown) {
    if (!(thrown instanceof StreamErrorEventError)) throw thrown;
    errorEvent = thrown.event;
    error = thrown.event.error.message;
  }
  const text = events
    .map((e) => (e.type === "content_block_delta" && e.delta.type === "text_delta" ? e.delta.text : ""))
    .join("");
  const code = error === undefined ? undefined : await server.turnFailure(turn.conversationId);
  return { conversationId: turn.conversationId, events, text, errorEvent, error, code };
}

function blocks(events: TurnEvent[]): Array<{ index: number; type: string }> {
  return events.flatMap((e) =>
    e.type === "content_block_start" ? [{ index: e.index, type: e.content_block.type }] : [],
  );
}

function messageDelta(events: TurnEvent[]) {
  const delta = events.find((e) => e.type === "message_delta");
  if (delta?.type !== "message_delta") throw new Error("no message_delta");
  return delta;
}

/** The stored session of a conversation: its Messages history, read from SQLite (one row per message). */
function storedHistory(
  server: TestServer,
  conversationId: string,
): Array<{ role: string; content: unknown }> {
  const db = new DatabaseSync(server.dbFile, { readOnly: true, timeout: 5000 });
  try {
    const rows = db
      .prepare(
        `SELECT m.message AS message FROM session_messages m
         JOIN conversations c ON c.agent_session_id = m.session_id
         WHERE c.id = ? AND m.replaced_at_turn IS NULL ORDER BY m.seq`,
      )
      .all(conversationId) as Array<{ message: string }>;
    if (rows.length === 0) throw new Error(`no session recorded for ${conversationId}`);
    return rows.map((row) => JSON.parse(row.message) as { role: string; content: unknown });
  } finally {
    db.close();
  }
}

function blockTypes(history: Array<{ role: string; content: unknown }>): string[] {
  return history.flatMap((m) =>
    Array.isArray(m.content) ? m.content.map((b: { type: string }) => `${m.role}:${b.type}`) : [],
  );
}

describe("the loop against a Messages upstream over HTTP", () => {
  it("runs a multi-call tool loop; each block arrives whole, with an index running across the calls", async (ctx) => {
    if (!toolsAvailable()) ctx.skip();
    const turn = await runTurn(
      t.client(),
      "Use your tools to create a file named loop.txt containing n-loop. Then use your tools to read the file named loop.txt.",
      { stream_tool_calls: true },
    );
    expect(blocks(turn.events)).toEqual([
      { index: 0, type: "tool_use" },
      { index: 1, type: "tool_result" },
      { index: 2, type: "tool_use" },
      { index: 3, type: "tool_result" },
      { index: 4, type: "text" },
    ]);
    // Whole blocks: the upstream split each into 4 deltas; the client gets one complete delta per block.
    const textDeltas = turn.events.filter((e) => e.type === "content_block_delta" && e.index === 4);
    expect(textDeltas).toHaveLength(1);
    expect(turn.text).toBe("Created loop.txt.\n\nn-loop");
    expect(messageDelta(turn.events).delta.stop_reason).toBe("end_turn");
  });

  it("keeps the full Messages history in the session and sends it back on resume", async (ctx) => {
    if (!toolsAvailable()) ctx.skip();
    const alice = t.client();
    const first = await runTurn(
      alice,
      "Think step by step before answering. Remember this code word: n-hist. Use your tools to list your files.",
    );
    await alice.waitForSession(first.conversationId, { intervalMs: 20, timeoutMs: 3000 });
    expect(blockTypes(storedHistory(t, first.conversationId))).toEqual([
      "user:text",
      "assistant:thinking",
      "assistant:tool_use",
      "user:tool_result",
      "assistant:text",
    ]);
    const thinking = (storedHistory(t, first.conversationId)[1].content as Array<Record<string, string>>)[0];
    expect(thinking.signature.length).toBeGreaterThan(0);
    const second = await runTurn(
      alice,
      "What code word did I ask you to remember? Reply with just the word.",
      {
        conversation_id: first.conversationId,
      },
    );
    expect(second.text).toBe("n-hist");
    // The resumed turn's history is the first turn's, unchanged, then the new messages.
    await alice.waitForSession(first.conversationId, { intervalMs: 20, timeoutMs: 3000 });
    expect(blockTypes(storedHistory(t, first.conversationId))).toEqual([
      "user:text",
      "assistant:thinking",
      "assistant:tool_use",
      "user:tool_result",
      "assistant:text",
      "user:text",
      "assistant:text",
    ]);
    // A resumed turn reads its stable prefix from the (imitated) prompt cache.
    expect(messageDelta(second.events).usage.cache_read_input_tokens).toBeGreaterThan(0);
  });

  it("reports the upstream usage summed over the turn's calls, priced by the model's price", async (ctx) => {
    if (!toolsAvailable()) ctx.skip();
    const turn = await runTurn(
      t.client(),
      "Report usage: input 1234, output 567, cache read 89, cache write 45. Use your tools to list your files.",
    );
    const { usage } = messageDelta(turn.events);
    // Two model calls (the tool call, then the answer), each reporting the same figures.
    expect(usage).toMatchObject({
      input_tokens: 2468,
      output_tokens: 1134,
      cache_read_input_tokens: 178,
      cache_creation_input_tokens: 90,
    });
    // demo-large: $3 / $15 / $0.30 / $3.75 per million tokens.
    const expected = (2468 * 3 + 1134 * 15 + 178 * 0.3 + 90 * 3.75) / 1e6;
    expect(usage.total_cost_usd).toBeCloseTo(expected, 8);
  });

  it.each(["max_tokens", "refusal", "pause_turn", "stop_sequence"])(
    "passes the upstream stop reason %s through",
    async (reason) => {
      const turn = await runTurn(t.client(), `Stop with reason ${reason}.`);
      expect(messageDelta(turn.events).delta.stop_reason).toBe(reason);
    },
  );

  it("retries 529 and 429 honouring Retry-After, then says plainly what happened", async () => {
    expect((await runTurn(t.client(), "Answer overloaded to the first 2 calls. Hi.")).text).toBe(
      "You said: Answer overloaded to the first 2 calls. Hi.",
    );
    expect((await runTurn(t.client(), "Answer rate limited to the first 1 call. Hi.")).text).toContain(
      "You said:",
    );
    const overloaded = await turnUntilEnd(t, "Answer overloaded to the first 9 calls. Hi.");
    expect(overloaded.code).toBe("AGENT_API_UPSTREAM_OVERLOADED");
    const limitedTurn = await turnUntilEnd(t, "Answer rate limited to the first 9 calls. Hi.");
    expect(limitedTurn.code).toBe("AGENT_API_UPSTREAM_RATE_LIMITED");
  });

  it("retries a dropped connection while no block was sent, and reports one that keeps dropping", async () => {
    const recovered = await runTurn(
      t.client(),
      "Answer by dropping the connection to the first 2 calls. Hi.",
    );
    expect(recovered.text).toContain("You said:");
    const dropped = await turnUntilEnd(t, "Answer by dropping the connection to the first 9 calls. Hi.");
    expect(dropped.code).toBe("AGENT_API_UPSTREAM_UNREACHABLE");
  });

  it("forwards the blocks done before an upstream error mid-stream, then an error event without the raw body", async () => {
    const turn = await turnUntilEnd(t, "Fail this turn after it starts.");
    expect(turn.text).toBe("Starting, then failing as asked.");
    expect(turn.code).toBe("AGENT_API_UPSTREAM_FAILED");
    // The API's shape and nothing else (the code is the log's); the upstream's own message stays out of it.
    expect(turn.errorEvent).toEqual({ type: "error", error: { type: "api_error", message: turn.error } });
    expect(turn.error).not.toContain("The scripted model failed this turn");
    expect(turn.events.some((e) => e.type === "message_delta")).toBe(false);
  });

  it("keeps redacted thinking in the session but never streams it", async () => {
    const alice = t.client();
    const turn = await runTurn(alice, "Think in redacted form. Hello.");
    expect(blocks(turn.events)).toEqual([{ index: 0, type: "text" }]);
    await alice.waitForSession(turn.conversationId, { intervalMs: 20, timeoutMs: 3000 });
    expect(blockTypes(storedHistory(t, turn.conversationId))).toEqual([
      "user:text",
      "assistant:redacted_thinking",
      "assistant:text",
    ]);
  });

  it("ends a turn at the iteration limit visibly: a closing text and stop reason max_iterations", async (ctx) => {
    if (!toolsAvailable()) ctx.skip();
    const turn = await runTurn(limited.client(), "Keep using your tools without end.", {
      stream_tool_calls: true,
    });
    expect(blocks(turn.events).filter((b) => b.type === "tool_use")).toHaveLength(3);
    expect(turn.text).toBe(
      "The turn stopped after 3 model calls, the iteration limit of this server. Send another message to continue.",
    );
    expect(messageDelta(turn.events).delta.stop_reason).toBe("max_iterations");
  });

  it("ends a turn past its time-out with an error event; the cut tool call is stored with an error result", async (ctx) => {
    if (!toolsAvailable()) ctx.skip();
    const alice = limited.client();
    const turn = await turnUntilEnd(
      limited,
      "Use your tools to run the shell command: sleep 3",
      { stream_tool_calls: true },
      alice,
    );
    expect(turn.code).toBe("AGENT_API_TURN_TIMED_OUT");
    const transcript = await alice.getTranscript(turn.conversationId);
    const results = transcript.events.filter((e) => (e as { type?: string }).type === "tool_result");
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ is_error: true });
  });

  it("sends SSE comment lines while the upstream works", async () => {
    const res = await fetch(`${slow.url}/api/agents/demo-agent/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": "demo-admin-key", "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Hi." }] }),
    });
    const body = await res.text();
    expect(body).toContain(": keep-alive\n\n");
    expect(body).toContain("event: message_stop");
  });

  it("sends the response headers as the turn starts, not when the upstream first answers", async () => {
    // message_start waits for the upstream's first answer (it carries the input usage): the headers must
    // not wait with it, or a client (and a proxy's first-byte time-out) sees nothing for the model's latency.
    const stalled = await serveScriptedModel({ latencyMs: 60_000 });
    const previous = process.env.ANTHROPIC_BASE_URL;
    process.env.ANTHROPIC_BASE_URL = stalled.url;
    const server = await startTestServer({
      engine: "anthropic",
      keepAliveMs: 60_000,
      unsafeNoIsolation: true,
    });
    process.env.ANTHROPIC_BASE_URL = previous;
    const abort = new AbortController();
    try {
      const started = performance.now();
      const res = await fetch(`${server.url}/api/agents/demo-agent/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": "demo-admin-key", "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "Hi." }] }),
        signal: abort.signal,
      });
      // Far below the upstream's 60 s and the 60 s keep-alive, far above a request's cost on a loaded machine.
      expect(performance.now() - started).toBeLessThan(15_000);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
      expect(res.headers.get("x-conversation-id")).toBeTruthy();
    } finally {
      abort.abort();
      await server.close();
      await stalled.close();
    }
  });
});

/** The first model call of the turn whose prompt this is: the request that carried the resumed history. */
function firstCallOf(prompt: string): ScriptedRequest {
  const found = requests.find((request) => {
    const last = request.messages.at(-1);
    return (
      last?.role === "user" &&
      Array.isArray(last.content) &&
      last.content.some((b) => b.type === "text" && b.text === prompt)
    );
  });
  if (!found) throw new Error(`no request carried the prompt ${prompt}`);
  return found;
}

/** The history a call resumed: every message before its newest user message. */
function resumed(request: ScriptedRequest): unknown[] {
  return request.messages.slice(0, -1);
}

describe("a fork's child resumes the parent's Messages history up to at_turn", () => {
  it("every block of the turns before at_turn, nothing after; a fork of a fork likewise", async (ctx) => {
    if (!toolsAvailable()) ctx.skip();
    const alice = t.client();
    const n = `f${Date.now().toString(36)}`;
    const prompts = [
      `Remember this code word: ${n}-word. Use your tools to create a file named a-${n}.txt containing ${n}-zero.`,
      `Use your tools to create a file named b-${n}.txt containing ${n}-one. Then use your tools to read the file named a-${n}.txt.`,
      `Use your tools to run the shell command: echo ${n}-two`,
    ];
    const id = (await runTurn(alice, prompts[0])).conversationId;
    for (const prompt of prompts.slice(1)) await runTurn(alice, prompt, { conversation_id: id });
    // What the parent's turns 1 and 2 resumed: its history after turn 0, and after turn 1.
    const afterTurn0 = resumed(firstCallOf(prompts[1]));
    const afterTurn1 = resumed(firstCallOf(prompts[2]));
    expect(blockTypes(afterTurn1 as Array<{ role: string; content: unknown }>)).toEqual([
      "user:text",
      "assistant:tool_use",
      "user:tool_result",
      "assistant:text",
      "user:text",
      "assistant:tool_use",
      "user:tool_result",
      "assistant:tool_use",
      "user:tool_result",
      "assistant:text",
    ]);

    // In the middle of the tool-using history: turns 0 and 1, every block as the model first sent it.
    const child = await alice.fork(id, { at_turn: 2 });
    const childPrompt = `${PHRASES.recall} (${n}-child)`;
    const childTurn = await runTurn(alice, childPrompt, { conversation_id: child.conversation_id });
    expect(childTurn.text).toBe(`${n}-word`);
    const childCall = firstCallOf(childPrompt);
    expect(resumed(childCall)).toEqual(afterTurn1);
    expect(JSON.stringify(childCall.messages)).not.toContain(`${n}-two`);

    // A fork of the fork, in the middle: the original parent's turn 0 only.
    const grandchild = await alice.fork(child.conversation_id, { at_turn: 1 });
    const grandPrompt = `Use your tools to list your files. (${n}-grand)`;
    await runTurn(alice, grandPrompt, { conversation_id: grandchild.conversation_id });
    const grandCall = firstCallOf(grandPrompt);
    expect(resumed(grandCall)).toEqual(afterTurn0);
    expect(JSON.stringify(grandCall.messages)).not.toContain(`${n}-one`);

    // A fork of the whole fork: the parent's turns 0 and 1, then the child's own turn, as the child stored it.
    await alice.waitForSession(child.conversation_id, { intervalMs: 20, timeoutMs: 3000 });
    const whole = await alice.fork(child.conversation_id);
    expect(whole.forked_at_turn).toBe(3);
    const wholePrompt = `${PHRASES.recall} (${n}-whole)`;
    expect((await runTurn(alice, wholePrompt, { conversation_id: whole.conversation_id })).text).toBe(
      `${n}-word`,
    );
    const wholeCall = firstCallOf(wholePrompt);
    expect(resumed(wholeCall)).toEqual(storedHistory(t, child.conversation_id));
    expect(resumed(wholeCall).slice(0, afterTurn1.length)).toEqual(afterTurn1);
    // The parent, untouched, still resumes its own three turns.
    const parentPrompt = `${PHRASES.recall} (${n}-parent)`;
    await runTurn(alice, parentPrompt, { conversation_id: id });
    expect(resumed(firstCallOf(parentPrompt))).toEqual(storedHistory(t, id).slice(0, -2));
    expect(JSON.stringify(resumed(firstCallOf(parentPrompt)))).toContain(`${n}-two`);
  });

  it("takes the newest turn's history while its recording is still pending", async (ctx) => {
    if (!toolsAvailable()) ctx.skip();
    const alice = delayed.client();
    const n = `p${Date.now().toString(36)}`;
    const prompt = `Remember this code word: ${n}-word. Use your tools to create a file named p-${n}.txt containing ${n}.`;
    const id = (await runTurn(alice, prompt)).conversationId;
    expect((await alice.getConversation(id)).conversation.agent_session_id).toBeNull();
    const child = await alice.fork(id);
    const childPrompt = `${PHRASES.recall} (${n}-child)`;
    const turn = await runTurn(alice, childPrompt, { conversation_id: child.conversation_id });
    expect(turn.text).toBe(`${n}-word`);
    const history = resumed(firstCallOf(childPrompt)) as Array<{ role: string; content: unknown }>;
    expect(blockTypes(history)).toEqual([
      "user:text",
      "assistant:tool_use",
      "user:tool_result",
      "assistant:text",
    ]);
    expect(history[0]).toEqual({ role: "user", content: [{ type: "text", text: prompt }] });
  });
});

describe("cancellation (needs the sandbox side: ToolRunner.run's signal kills the tool's process tree)", () => {
  it("a client disconnect kills the running tool: the next read_only false turn does not push its file", async (ctx) => {
    if (!toolsAvailable()) ctx.skip();
    const repo = t.client("demo-admin-key", "acme-widgets");
    const id = `orphan-${Date.now()}`;
    const abort = new AbortController();
    const turn = await repo.sendMessage(
      {
        messages: [
          { role: "user", content: "Use your tools to run the shell command: sleep 2; echo x > orphan.txt" },
        ],
        metadata: { conversation_id: id, read_only: false, stream_tool_calls: true },
      },
      { signal: abort.signal },
    );
    for await (const event of turn) {
      if (event.type === "content_block_stop") break; // the tool_use block: the command now runs
    }
    abort.abort();
    const next = await runTurn(repo, "Use your tools to create a file named kept.txt containing k.", {
      conversation_id: id,
      read_only: false,
    });
    expect(next.text).toBe("Created kept.txt.");
    const git = (...args: string[]) =>
      execFileSync("git", ["--git-dir", join(t.dataDir, "demo", "acme-widgets.git"), ...args], {
        encoding: "utf8",
      }).trim();
    const files = git("ls-tree", "-r", "--name-only", "refs/heads/main").split("\n");
    expect(files).toContain("kept.txt");
    expect(files).not.toContain("orphan.txt");
    // Nor did the command finish later in the clone: it was killed, not left to run.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const clones = execFileSync("find", [t.dataDir, "-name", "orphan.txt"], { encoding: "utf8" }).trim();
    expect(clones).toBe("");
    expect(existsSync(join(t.dataDir, "orphan.txt"))).toBe(false);
  }, 20_000);
});
