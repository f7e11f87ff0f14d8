import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ToolRunner } from "../sandbox/types.ts";
import { createAnthropicEngine } from "./anthropic.ts";
import { createEngine } from "./index.ts";
import type { AgentEngine, AgentEvent, TurnInput, TurnOutcome } from "./types.ts";

/**
 * A stand-in for the third-party Messages API: a real HTTP server on loopback that records each request
 * and answers with whatever the test's `reply` function returns for it (non-streaming JSON).
 */
interface UpstreamRequest {
  headers: IncomingMessage["headers"];
  // Parsed JSON of the request; its shape is whatever the SDK sent, which is what the tests inspect.
  body: {
    model: string;
    system?: string;
    messages: Array<{ role: string; content: unknown }>;
    tools?: unknown[];
  };
}
type Reply = (request: UpstreamRequest, index: number) => { status?: number; body: unknown } | "hang";

interface FakeUpstream {
  baseURL: string;
  requests: UpstreamRequest[];
  reply: Reply;
  server: Server;
}

async function startUpstream(): Promise<FakeUpstream> {
  const upstream: FakeUpstream = {
    baseURL: "",
    requests: [],
    reply: () => ({ body: message([{ type: "text", text: "hi" }]) }),
    server: createServer(async (req, res) => {
      let raw = "";
      for await (const chunk of req) raw += chunk;
      const request: UpstreamRequest = { headers: req.headers, body: JSON.parse(raw) };
      upstream.requests.push(request);
      const answer = upstream.reply(request, upstream.requests.length - 1);
      if (answer === "hang") return;
      res.writeHead(answer.status ?? 200, { "content-type": "application/json" });
      res.end(JSON.stringify(answer.body));
    }),
  };
  await new Promise<void>((resolve) => upstream.server.listen(0, "127.0.0.1", resolve));
  upstream.baseURL = `http://127.0.0.1:${(upstream.server.address() as AddressInfo).port}`;
  return upstream;
}

function message(content: unknown[], stopReason = "end_turn") {
  return {
    id: "msg_fake",
    type: "message",
    role: "assistant",
    model: "fake-model",
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1 },
  };
}

async function collect(generator: AsyncGenerator<AgentEvent, TurnOutcome, void>) {
  const events: AgentEvent[] = [];
  for (;;) {
    const step = await generator.next();
    if (step.done) return { events, outcome: step.value };
    events.push(step.value);
  }
}

function input(overrides: Partial<TurnInput>): TurnInput {
  return {
    prompt: "hello",
    instructions: "You are the demo agent.",
    system: undefined,
    model: "demo-model",
    context: [],
    attachments: [],
    tools: null,
    compactionBudgetChars: 100_000,
    signal: new AbortController().signal,
    ...overrides,
  };
}

/** Test scaffolding for the tool contract: writes and reads plain files in a temp dir. */
function fileToolRunner(dir: string): ToolRunner {
  return {
    async run(name, toolInput) {
      const path = join(dir, String(toolInput.path));
      if (name === "write_file") {
        await writeFile(path, String(toolInput.content));
        return { content: "ok", isError: false };
      }
      if (name === "read_file") {
        return readFile(path, "utf8").then(
          (content) => ({ content, isError: false }),
          (error: Error) => ({ content: error.message, isError: true }),
        );
      }
      return { content: `${name} is not supported here`, isError: true };
    },
  };
}

let upstream: FakeUpstream;
let engine: AgentEngine;
let dir: string;
beforeEach(async () => {
  upstream = await startUpstream();
  engine = createAnthropicEngine({ baseURL: upstream.baseURL, apiKey: "sk-test-key", maxRetries: 0 });
  dir = await mkdtemp(join(tmpdir(), "anthropic-engine-"));
});
afterEach(async () => {
  upstream.server.closeAllConnections();
  await new Promise((resolve) => upstream.server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

describe("anthropic engine", () => {
  it("sends context as alternating messages with instructions + system, and maps the text reply", async () => {
    upstream.reply = () => ({ body: message([{ type: "text", text: "Hello back." }]) });
    const context = [
      { role: "user" as const, text: "first" },
      { role: "assistant" as const, text: "one" },
      { role: "user" as const, text: "unanswered" },
    ];
    const { events, outcome } = await collect(
      engine.runTurn(
        input({ prompt: "second", system: "Be brief.", context, attachments: [".uploads/a.txt"] }),
      ),
    );
    expect(events).toEqual([{ kind: "text", text: "Hello back." }]);
    expect(outcome.context).toEqual([
      ...context,
      { role: "user", text: "second" },
      { role: "assistant", text: "Hello back." },
    ]);

    const [request] = upstream.requests;
    expect(request.headers["x-api-key"]).toBe("sk-test-key");
    expect(request.headers.authorization).toBe("Bearer sk-test-key");
    expect(request.body.model).toBe("demo-model");
    expect(request.body.system).toBe(
      "You are the demo agent.\n\nBe brief.\n\nTools are unavailable in this turn.",
    );
    expect(request.body.tools).toBeUndefined();
    expect(request.body.messages).toEqual([
      { role: "user", content: "first" },
      { role: "assistant", content: "one" },
      {
        role: "user",
        content: "unanswered\n\nsecond\n\nAttached files (in your working directory): .uploads/a.txt",
      },
    ]);
  });

  it("runs a tool loop: tool_use, real tool, tool_result back to the model, then the answer", async () => {
    upstream.reply = (_request, index) =>
      index === 0
        ? {
            body: message(
              [
                { type: "thinking", thinking: "I should write it.", signature: "sig-1" },
                {
                  type: "tool_use",
                  id: "toolu_1",
                  name: "write_file",
                  input: { path: "n.txt", content: "n-77" },
                },
                { type: "tool_use", id: "toolu_2", name: "delete_everything", input: {} },
              ],
              "tool_use",
            ),
          }
        : { body: message([{ type: "text", text: "Created n.txt." }]) };
    const { events, outcome } = await collect(
      engine.runTurn(input({ prompt: "write", tools: fileToolRunner(dir) })),
    );

    expect(events).toEqual([
      { kind: "thinking", thinking: "I should write it.", signature: "sig-1" },
      { kind: "tool_use", id: "toolu_1", name: "write_file", input: { path: "n.txt", content: "n-77" } },
      { kind: "tool_result", toolUseId: "toolu_1", content: "ok", isError: false },
      { kind: "text", text: "Created n.txt." },
    ]);
    expect(await readFile(join(dir, "n.txt"), "utf8")).toBe("n-77");
    expect(outcome.context.at(-1)).toEqual({ role: "assistant", text: "Created n.txt." });

    expect(upstream.requests).toHaveLength(2);
    expect(upstream.requests[0].body.tools?.map((t) => (t as { name: string }).name)).toEqual([
      "write_file",
      "read_file",
      "list_files",
      "run_command",
    ]);
    const followUp = upstream.requests[1].body.messages;
    expect(followUp.at(-2)?.role).toBe("assistant");
    expect(followUp.at(-1)).toEqual({
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "toolu_1", content: "ok", is_error: false },
        {
          type: "tool_result",
          tool_use_id: "toolu_2",
          content: "unknown tool delete_everything",
          is_error: true,
        },
      ],
    });
  });

  it("stops the tool loop after maxToolIterations", async () => {
    const limited = createAnthropicEngine({
      baseURL: upstream.baseURL,
      apiKey: "k",
      maxRetries: 0,
      maxToolIterations: 2,
    });
    upstream.reply = (_r, index) => ({
      body: message(
        [{ type: "tool_use", id: `toolu_${index}`, name: "read_file", input: { path: "x" } }],
        "tool_use",
      ),
    });
    const { events, outcome } = await collect(
      limited.runTurn(input({ prompt: "loop", tools: fileToolRunner(dir) })),
    );
    expect(upstream.requests).toHaveLength(2);
    expect(events.map((e) => e.kind)).toEqual(["tool_use", "tool_result", "tool_use", "tool_result"]);
    expect(events[1]).toMatchObject({ isError: true });
    expect(outcome.context).toEqual([{ role: "user", text: "loop" }]);
  });

  it("yields nothing and records no assistant entry when the model produces no content", async () => {
    upstream.reply = () => ({ body: message([]) });
    const { events, outcome } = await collect(engine.runTurn(input({ prompt: "silence" })));
    expect(events).toEqual([]);
    expect(outcome.context).toEqual([{ role: "user", text: "silence" }]);
  });

  it("compacts with a model summary that keeps remembered code words", async () => {
    upstream.reply = (request) =>
      request.body.system?.startsWith("You compact")
        ? { body: message([{ type: "text", text: "We chatted." }]) }
        : { body: message([{ type: "text", text: "n-keep" }]) };
    const context = [
      {
        role: "user" as const,
        text: `Remember this code word: n-keep. Reply with just OK. ${"x".repeat(200)}`,
      },
      { role: "assistant" as const, text: "OK" },
    ];
    const { events, outcome } = await collect(
      engine.runTurn(input({ prompt: "What code word?", context, compactionBudgetChars: 100 })),
    );
    const summary = "We chatted.\n\nCode words remembered: n-keep.";
    expect(events).toEqual([
      { kind: "compaction", summary },
      { kind: "text", text: "n-keep" },
    ]);
    expect(String(upstream.requests[0].body.messages[0].content)).toContain("n-keep");
    expect(upstream.requests[1].body.messages[0].content).toBe(
      `[Summary of the earlier conversation]\n${summary}\n\nWhat code word?`,
    );
    expect(outcome.context[0]).toEqual({ role: "user", text: summary, compactSummary: true });
  });

  it("throws upstream failures so the service can report an error event", async () => {
    upstream.reply = () => ({
      status: 500,
      body: { type: "error", error: { type: "api_error", message: "upstream broke" } },
    });
    await expect(collect(engine.runTurn(input({})))).rejects.toThrow(/upstream broke/);
  });

  it("ends quietly when the turn is aborted while the upstream is still answering", async () => {
    upstream.reply = () => "hang";
    const controller = new AbortController();
    const pending = collect(engine.runTurn(input({ signal: controller.signal })));
    while (upstream.requests.length === 0) await new Promise((resolve) => setImmediate(resolve));
    controller.abort();
    expect(await pending).toEqual({ events: [], outcome: { context: [] } });
  });

  it("is registered as createEngine('anthropic'), configured from the environment", async () => {
    const names = ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL"] as const;
    const saved = names.map((name) => process.env[name]);
    try {
      delete process.env.ANTHROPIC_API_KEY;
      expect(() => createEngine("anthropic")).toThrow(/ANTHROPIC_API_KEY/);
      process.env.ANTHROPIC_API_KEY = "sk-env";
      process.env.ANTHROPIC_BASE_URL = upstream.baseURL;
      process.env.ANTHROPIC_MODEL = "upstream-model";
      const fromEnv = createEngine("anthropic");
      expect(fromEnv.name).toBe("anthropic");
      const { events } = await collect(fromEnv.runTurn(input({})));
      expect(events).toEqual([{ kind: "text", text: "hi" }]);
      expect(upstream.requests[0].headers["x-api-key"]).toBe("sk-env");
      expect(upstream.requests[0].body.model).toBe("upstream-model");
    } finally {
      names.forEach((name, i) => {
        if (saved[i] === undefined) delete process.env[name];
        else process.env[name] = saved[i];
      });
    }
  });
});
