import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createEngine, createScriptedEngine, KNOWN_ENGINES } from "../engine/index.ts";
import type { AgentEngine, AgentEvent, MessageParam, TurnInput, TurnOutcome } from "../engine/types.ts";
import type { ToolName, ToolOutcome, ToolRunner } from "../sandbox/types.ts";
import { loadHistory, type SessionTextEntry } from "../turn/history.ts";

/** A resumed session written as plain text entries (the loader turns them into Messages history). */
function ctx(entries: SessionTextEntry[]): Pick<TurnInput, "history" | "historyTokens"> {
  const { messages, tokens } = loadHistory(entries);
  return { history: messages, historyTokens: tokens };
}

/** The outcome's history as `role: text` lines (tool blocks as their type), for readable assertions. */
function lines(history: MessageParam[]): string[] {
  return history.flatMap((m) =>
    (typeof m.content === "string" ? [{ type: "text" as const, text: m.content }] : m.content).map((b) =>
      b.type === "text" ? `${m.role}: ${b.text}` : `${m.role}: [${b.type}]`,
    ),
  );
}

/**
 * Test scaffolding for the engine's tool contract: plain file operations and `sh -c` in a temp dir.
 * Deliberately naive (no isolation, no path checks); the real sandbox lives in ../sandbox.
 */
function tempDirToolRunner(dir: string): ToolRunner & { calls: Array<{ name: ToolName; input: unknown }> } {
  const calls: Array<{ name: ToolName; input: unknown }> = [];
  const fail = (error: unknown): ToolOutcome => ({ content: (error as Error).message, isError: true });
  return {
    calls,
    async run(name, input) {
      calls.push({ name, input });
      const at = (p: unknown) => join(dir, String(p));
      switch (name) {
        case "write_file":
          await mkdir(dirname(at(input.path)), { recursive: true });
          await writeFile(at(input.path), String(input.content));
          return { content: `wrote ${input.path}`, isError: false };
        case "read_file":
          return readFile(at(input.path), "utf8").then((content) => ({ content, isError: false }), fail);
        case "list_files":
          return { content: (await readdir(dir, { recursive: true })).sort().join("\n"), isError: false };
        case "run_command":
          return new Promise((resolve) => {
            execFile("sh", ["-c", String(input.command)], { cwd: dir }, (error, stdout, stderr) => {
              resolve({ content: stdout + stderr, isError: error !== null });
            });
          });
      }
    },
  };
}

/** A turn's events: its blocks, and apart from them the input usage the engine reports first. */
async function collect(
  generator: AsyncGenerator<AgentEvent, TurnOutcome, void>,
): Promise<{ events: AgentEvent[]; inputUsage: AgentEvent[]; outcome: TurnOutcome }> {
  const events: AgentEvent[] = [];
  const inputUsage: AgentEvent[] = [];
  for (;;) {
    const step = await generator.next();
    if (step.done) return { events, inputUsage, outcome: step.value };
    (step.value.kind === "input_usage" ? inputUsage : events).push(step.value);
  }
}

/** The next event that is not the input usage report. */
async function nextBlock(generator: AsyncGenerator<AgentEvent, TurnOutcome, void>) {
  const step = await generator.next();
  return !step.done && step.value.kind === "input_usage" ? generator.next() : step;
}

function input(overrides: Partial<TurnInput>): TurnInput {
  return {
    prompt: "hello",
    instructions: "You are the demo agent.",
    system: undefined,
    model: "scripted-1",
    upstreamModel: overrides.model ?? "scripted-1",
    history: [],
    historyTokens: 0,
    attachments: [],
    environment: { agentKind: "storage", isolated: false, readOnly: true },
    tools: null,
    compactionBudgetTokens: 1_000_000,
    signal: new AbortController().signal,
    ...overrides,
  };
}

function texts(events: AgentEvent[]): string[] {
  return events.flatMap((e) => (e.kind === "text" ? [e.text] : []));
}

async function turn(engine: AgentEngine, overrides: Partial<TurnInput>) {
  const result = await collect(engine.runTurn(input(overrides)));
  return { ...result, text: texts(result.events).join("") };
}

const REMEMBER = (word: string) => `Remember this code word: ${word}. Reply with just OK.`;
const RECALL = "What code word did I ask you to remember? Reply with just the word.";

let engine: AgentEngine;
let dir: string;
beforeEach(async () => {
  engine = createScriptedEngine();
  dir = await mkdtemp(join(tmpdir(), "engine-test-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("memory", () => {
  it("remembers a code word from the resumed context only", async () => {
    const first = await turn(engine, { prompt: REMEMBER("n-7f3a9c21") });
    expect(first.text).toBe("OK");
    expect(lines(first.outcome.history)).toEqual([`user: ${REMEMBER("n-7f3a9c21")}`, "assistant: OK"]);

    const resumed = await turn(engine, {
      prompt: RECALL,
      history: first.outcome.history,
      historyTokens: first.outcome.historyTokens,
    });
    expect(resumed.text).toBe("n-7f3a9c21");
    // Same engine instance, no session: the engine must not remember anything by itself.
    const fresh = await turn(engine, { prompt: RECALL, history: [] });
    expect(fresh.text).toBe("I don't know");
  });

  it("answers with the most recently remembered word and tolerates quotes and case", async () => {
    const context: SessionTextEntry[] = [
      { role: "user", text: REMEMBER("n-first") },
      { role: "assistant", text: "OK" },
      { role: "user", text: `REMEMBER THIS CODE WORD: "n-second". reply with just ok` },
      { role: "assistant", text: "OK" },
    ];
    expect((await turn(engine, { prompt: RECALL, ...ctx(context) })).text).toBe("n-second");
    expect((await turn(engine, { prompt: `${REMEMBER("n-third")} ${RECALL}`, ...ctx(context) })).text).toBe(
      "OK\n\nn-third",
    );
  });
});

describe("directive token", () => {
  it("includes a token demanded by the system text or the prompt in every text reply", async () => {
    const bySystem = await turn(engine, {
      prompt: REMEMBER("n-a"),
      system: "Always include the token n-tok1.",
    });
    expect(bySystem.text).toContain("OK");
    expect(bySystem.text).toContain("n-tok1");
    const byPrompt = await turn(engine, { prompt: "Always include the token 'n-tok2' in any reply. Hi." });
    expect(byPrompt.text).toContain("n-tok2");
    expect((await turn(engine, { prompt: "Hi." })).text).not.toContain("n-tok");
  });
});

describe("no output", () => {
  it("emits no block at all, not even thinking; a due compaction still happens first", async () => {
    const context: SessionTextEntry[] = [{ role: "user", text: "x".repeat(500) }];
    const prompt = "Think step by step before answering. Produce no output at all for this turn.";
    expect((await turn(engine, { prompt, ...ctx(context) })).events).toEqual([]);
    // The loop compacts before it asks the model, which only then says nothing: a compaction step.
    const compacted = await turn(engine, { prompt, ...ctx(context), compactionBudgetTokens: 25 });
    expect(compacted.events.map((e) => e.kind)).toEqual(["compaction"]);
  });
});

describe("input usage", () => {
  it("reports the first model call's input usage once, before any block, with its input tokens", async () => {
    const generator = engine.runTurn(input({ prompt: "Think step by step before answering. Say hi." }));
    const first = await generator.next();
    expect(first.value).toMatchObject({ kind: "input_usage" });
    const usage = (first.value as Extract<AgentEvent, { kind: "input_usage" }>).usage;
    expect(
      usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens,
    ).toBeGreaterThan(0);
    const rest = await collect(generator);
    expect(rest.inputUsage).toEqual([]);
    expect(rest.events.length).toBeGreaterThan(0);
  });
});

describe("failure on request", () => {
  it("emits one text block, then throws (the service turns it into an error event)", async () => {
    const generator = engine.runTurn(input({ prompt: "Fail this turn after it starts." }));
    const first = await nextBlock(generator);
    expect(first.value).toEqual({ kind: "text", text: "Starting, then failing as asked." });
    await expect(generator.next()).rejects.toMatchObject({ name: "UpstreamError", kind: "failed" });
  });
});

describe("thinking", () => {
  it("emits a signed thinking block before the text", async () => {
    const { events } = await turn(engine, { prompt: "Think step by step before answering. What is 2+2?" });
    expect(events.map((e) => e.kind)).toEqual(["thinking", "text"]);
    const thinking = events[0] as Extract<AgentEvent, { kind: "thinking" }>;
    expect(thinking.thinking.length).toBeGreaterThan(0);
    expect(thinking.signature.length).toBeGreaterThan(0);
    const otherSecret = await turn(createScriptedEngine({ scripted: { thinkingSignatureSecret: "other" } }), {
      prompt: "Think step by step before answering. What is 2+2?",
    });
    const otherThinking = otherSecret.events[0] as Extract<AgentEvent, { kind: "thinking" }>;
    expect(otherThinking.thinking).toBe(thinking.thinking);
    expect(otherThinking.signature).not.toBe(thinking.signature);
  });
});

describe("tools", () => {
  it("writes a real file, then reads it back in a later turn", async () => {
    const tools = tempDirToolRunner(dir);
    const write = await turn(engine, {
      prompt: "Use your tools to create a file named notes.txt containing n-5d1e.",
      tools,
    });
    expect(write.events.map((e) => e.kind)).toEqual(["tool_use", "tool_result", "text"]);
    const use = write.events[0] as Extract<AgentEvent, { kind: "tool_use" }>;
    const result = write.events[1] as Extract<AgentEvent, { kind: "tool_result" }>;
    expect(use.name).toBe("write_file");
    expect(use.input).toEqual({ path: "notes.txt", content: "n-5d1e" });
    expect(use.id).toMatch(/^toolu_[0-9a-f]{24}$/);
    expect(result.toolUseId).toBe(use.id);
    expect(result.isError).toBe(false);
    expect(write.text).toBe("Created notes.txt.");
    expect(await readFile(join(dir, "notes.txt"), "utf8")).toBe("n-5d1e");

    const read = await turn(engine, {
      prompt: "Use your tools to read the file named notes.txt and reply with its contents.",
      tools,
    });
    expect(read.events[0]).toMatchObject({
      kind: "tool_use",
      name: "read_file",
      input: { path: "notes.txt" },
    });
    expect(read.text).toBe("n-5d1e");
  });

  it("accepts quoted names and contents", async () => {
    const tools = tempDirToolRunner(dir);
    const { text } = await turn(engine, {
      prompt: `Use your tools to create a file named "my notes.txt" containing 'n-q1'.`,
      tools,
    });
    expect(text).toBe("Created my notes.txt.");
    expect(await readFile(join(dir, "my notes.txt"), "utf8")).toBe("n-q1");
  });

  it("reports a failing tool in the result and the reply instead of throwing", async () => {
    const { events, text } = await turn(engine, {
      prompt: "Use your tools to read the file named missing.txt and reply with its contents.",
      tools: tempDirToolRunner(dir),
    });
    expect(events[1]).toMatchObject({ kind: "tool_result", isError: true });
    expect(text).toMatch(/^I could not read missing\.txt: .*ENOENT/);

    const throwing: ToolRunner = {
      run: () => Promise.reject(new Error("sandbox exploded")),
    };
    const thrown = await turn(engine, { prompt: "Use your tools to list your files.", tools: throwing });
    expect(thrown.events[1]).toMatchObject({
      kind: "tool_result",
      isError: true,
      content: "sandbox exploded",
    });
    expect(thrown.text).toBe("I could not list the files: sandbox exploded");
  });

  it("lists files and runs a shell command in a real child process", async () => {
    await writeFile(join(dir, "a.txt"), "a");
    await writeFile(join(dir, "b.txt"), "b");
    const tools = tempDirToolRunner(dir);
    const listed = await turn(engine, { prompt: "Use your tools to list your files.", tools });
    expect(listed.events[0]).toMatchObject({ kind: "tool_use", name: "list_files", input: {} });
    expect(listed.text).toBe("Files:\na.txt\nb.txt");

    const ran = await turn(engine, {
      prompt: "Use your tools to run the shell command: echo n-$((40+2))",
      tools,
    });
    expect(ran.events[0]).toMatchObject({ name: "run_command", input: { command: "echo n-$((40+2))" } });
    expect(ran.text).toBe("n-42");

    const failed = await turn(engine, { prompt: "Use your tools to run the shell command: `exit 3`", tools });
    expect(tools.calls.at(-1)).toEqual({ name: "run_command", input: { command: "exit 3" } });
    expect(failed.text).toMatch(/^The command failed/);
  });

  it("says tools are unavailable when the turn has none, without tool events", async () => {
    const { events, text } = await turn(engine, {
      prompt: "Use your tools to list your files.",
      tools: null,
    });
    expect(events.map((e) => e.kind)).toEqual(["text"]);
    expect(text).toContain("Tools are unavailable");
  });

  it("handles several directives in order: thinking, then tools, then one text", async () => {
    const tools = tempDirToolRunner(dir);
    const { events, text } = await turn(engine, {
      prompt:
        "Use your tools to create a file named a.txt containing n-1. Think step by step before answering. " +
        "Then use your tools to read the file named a.txt. Remember this code word: n-2.",
      tools,
    });
    expect(events.map((e) => e.kind)).toEqual([
      "thinking",
      "tool_use",
      "tool_result",
      "tool_use",
      "tool_result",
      "text",
    ]);
    expect(text).toBe("Created a.txt.\n\nn-1\n\nOK");
    const ids = events.flatMap((e) => (e.kind === "tool_use" ? [e.id] : []));
    expect(new Set(ids).size).toBe(2);
  });
});

describe("attachments", () => {
  it("lists attachments or says none arrived, and reads one through read_file", async () => {
    const attachments = [".uploads/a.txt", ".uploads/b (1).txt"];
    // The user message names this turn's files (older uploads may still lie in .uploads/).
    expect((await turn(engine, { prompt: "List the attached files.", attachments })).text).toBe(
      "Attached files: .uploads/a.txt, .uploads/b (1).txt",
    );
    expect((await turn(engine, { prompt: "List the attached files." })).text).toBe("No files were attached.");

    await mkdir(join(dir, ".uploads"));
    await writeFile(join(dir, ".uploads", "a.txt"), "n-att");
    const read = await turn(engine, {
      prompt: "Use your tools to read the attached file a.txt and reply with its contents.",
      attachments,
      tools: tempDirToolRunner(dir),
    });
    expect(read.events[0]).toMatchObject({ name: "read_file", input: { path: ".uploads/a.txt" } });
    expect(read.text).toBe("n-att");
  });
});

describe("model, instructions, fallback", () => {
  it("reports the model it runs with", async () => {
    const prompt = "Which model are you running as? Reply with just the model id.";
    expect((await turn(engine, { prompt, model: "claude-x-2" })).text).toBe("claude-x-2");
    // The model names what it was asked as: the upstream name the config maps the API id to.
    expect((await turn(engine, { prompt, model: "api-id", upstreamModel: "claude-up" })).text).toBe(
      "claude-up",
    );
  });

  it("repeats instructions followed by the system text", async () => {
    const prompt = "Repeat your instructions.";
    expect((await turn(engine, { prompt, system: "Be brief." })).text).toBe(
      "You are the demo agent.\n\nBe brief.",
    );
    expect((await turn(engine, { prompt })).text).toBe("You are the demo agent.");
  });

  it("answers anything else by mentioning the prompt", async () => {
    const long = `Tell me about ${"x".repeat(300)}`;
    expect((await turn(engine, { prompt: long })).text).toBe(`You said: ${long.slice(0, 200)}`);
  });
});

describe("compaction", () => {
  const history: SessionTextEntry[] = [
    { role: "user", text: REMEMBER("n-old") },
    { role: "assistant", text: "OK" },
    { role: "user", text: REMEMBER("n-new") },
    { role: "assistant", text: "OK" },
    { role: "user", text: `Tell me a story ${"la ".repeat(100)}` },
    { role: "assistant", text: "Once upon a time." },
  ];

  it("compacts past the budget into a summary that keeps the code words", async () => {
    const result = await turn(engine, { prompt: RECALL, ...ctx(history), compactionBudgetTokens: 50 });
    expect(result.events.map((e) => e.kind)).toEqual(["compaction", "text"]);
    const summary = (result.events[0] as Extract<AgentEvent, { kind: "compaction" }>).summary;
    expect(summary).toContain("Code words remembered: n-old, n-new.");
    expect(result.text).toBe("n-new");
    expect(lines(result.outcome.history)).toEqual([
      `user: [Summary of the earlier conversation]\n${summary}`,
      `user: ${RECALL}`,
      "assistant: n-new",
    ]);

    // A second compaction over a summary still keeps the words, so memory survives any number of them.
    const again = await turn(engine, {
      prompt: `${REMEMBER("n-newest")} ${"pad ".repeat(60)}`,
      history: result.outcome.history,
      historyTokens: result.outcome.historyTokens,
      compactionBudgetTokens: 50,
    });
    expect(again.events[0].kind).toBe("compaction");
    const recalled = await turn(engine, {
      prompt: RECALL,
      history: again.outcome.history,
      historyTokens: again.outcome.historyTokens,
      compactionBudgetTokens: 50,
    });
    expect(recalled.events[0]).toMatchObject({
      kind: "compaction",
      summary: expect.stringContaining("n-old, n-new, n-newest"),
    });
    expect(recalled.text).toBe("n-newest");
  });

  it("does not compact within the budget or with an empty context", async () => {
    expect((await turn(engine, { prompt: RECALL, ...ctx(history) })).events.map((e) => e.kind)).toEqual([
      "text",
    ]);
    const empty = await turn(engine, { prompt: "x".repeat(500), compactionBudgetTokens: 10 });
    expect(empty.events.map((e) => e.kind)).toEqual(["text"]);
  });
});

describe("determinism and abort", () => {
  it("yields identical events for identical input", async () => {
    const prompt =
      "Think step by step before answering. Use your tools to create a file named d.txt containing n-det. " +
      "Use your tools to list your files.";
    const context: SessionTextEntry[] = [{ role: "user", text: REMEMBER("n-ctx") }];
    const dirB = await mkdtemp(join(tmpdir(), "engine-test-"));
    try {
      const a = await turn(createScriptedEngine(), {
        prompt,
        ...ctx(context),
        tools: tempDirToolRunner(dir),
      });
      const b = await turn(createScriptedEngine(), {
        prompt,
        ...ctx(context),
        tools: tempDirToolRunner(dirB),
      });
      expect(b.events).toEqual(a.events);
      expect(b.outcome).toEqual(a.outcome);
      const otherContext = await turn(createScriptedEngine(), {
        prompt,
        history: [],
        tools: tempDirToolRunner(dirB),
      });
      expect(otherContext.events[1]).not.toEqual(a.events[1]); // tool ids depend on the turn's content
    } finally {
      await rm(dirB, { recursive: true, force: true });
    }
  });

  it("never throws and is deterministic for arbitrary prompts and contexts", async () => {
    const entry = fc.record({
      role: fc.constantFrom("user" as const, "assistant" as const),
      text: fc.string(),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.string(),
        fc.array(entry, { maxLength: 4 }),
        fc.nat(300),
        async (prompt, context, budget) => {
          const a = await turn(engine, { prompt, ...ctx(context), compactionBudgetTokens: budget });
          const b = await turn(engine, { prompt, ...ctx(context), compactionBudgetTokens: budget });
          expect(b.events).toEqual(a.events);
          expect(a.events.filter((e) => e.kind === "text")).toHaveLength(1);
        },
      ),
      { numRuns: 100 },
    );
  });

  it("passes the turn's signal to the running tool and records the cut call with an error result", async () => {
    const controller = new AbortController();
    // The sandbox's contract: an aborted signal ends the tool, and run resolves with an error outcome.
    const untilAborted: ToolRunner = {
      run: (_name, _input, signal) =>
        new Promise<ToolOutcome>((resolve) =>
          signal?.addEventListener("abort", () => resolve({ content: "killed", isError: true })),
        ),
    };
    const generator = engine.runTurn(
      input({ prompt: "Use your tools to list your files.", tools: untilAborted, signal: controller.signal }),
    );
    const first = await nextBlock(generator);
    expect(first.value).toMatchObject({ kind: "tool_use" });
    const pending = generator.next();
    controller.abort();
    expect((await pending).value).toMatchObject({ kind: "tool_result", isError: true });
    const end = await generator.next();
    expect(end.done).toBe(true);
    expect(lines((end.value as TurnOutcome).history).at(-1)).toBe("user: [tool_result]");

    const aborted = new AbortController();
    aborted.abort();
    await expect(turn(engine, { prompt: RECALL, signal: aborted.signal })).rejects.toThrow();
  });
});

describe("createEngine", () => {
  it("creates the scripted engine and rejects unknown names with the known list", () => {
    expect(createEngine("scripted").name).toBe("scripted");
    expect(KNOWN_ENGINES).toContain("scripted");
    expect(() => createEngine("gpt-9")).toThrow(/unknown engine "gpt-9".*scripted/);
    expect(() => createEngine("toString")).toThrow(/unknown engine/);
  });
});
