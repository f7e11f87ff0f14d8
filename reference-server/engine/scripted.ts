/**
 * The `scripted` engine: offline and deterministic (same input → same events), driven by the phrases in
 * phrases.ts. It exists so every rule of the API is observable without a model: memory from the resumed
 * session, thinking with a signature, tools in the sandbox, no-output turns, model and system echo,
 * compaction. Memory comes only from `input.context`; the engine keeps no state between turns.
 */
import { createHash } from "node:crypto";
import type { ToolName } from "../sandbox/types.ts";
import { needsCompaction, summarizeContext } from "./compaction.ts";
import { rememberedCodeWords } from "./memory.ts";
import { type Directive, parseDirectives, requiredTokens } from "./phrases.ts";
import { signThinking } from "./signature.ts";
import type { AgentEngine, AgentEvent, SessionEntry, TurnInput, TurnOutcome } from "./types.ts";

export interface ScriptedEngineOptions {
  /** Key of the HMAC that signs thinking blocks; a fixed default keeps runs reproducible. */
  thinkingSignatureSecret?: string;
}

const ECHO_CHARS = 200;

export function createScriptedEngine(options: ScriptedEngineOptions = {}): AgentEngine {
  const secret = options.thinkingSignatureSecret;
  return {
    name: "scripted",
    runTurn: (input) => runScriptedTurn(input, secret),
  };
}

type ToolDirective = Extract<Directive, { kind: ToolName }>;

function isToolDirective(d: Directive): d is ToolDirective {
  return (
    d.kind === "write_file" || d.kind === "read_file" || d.kind === "list_files" || d.kind === "run_command"
  );
}

async function* runScriptedTurn(
  input: TurnInput,
  secret: string | undefined,
): AsyncGenerator<AgentEvent, TurnOutcome, void> {
  const directives = parseDirectives(input.prompt);
  const userEntry: SessionEntry = { role: "user", text: input.prompt };
  const unchanged: TurnOutcome = { context: input.context };

  // A no-output turn yields nothing at all, not even a compaction: the service must see an empty turn.
  if (directives.some((d) => d.kind === "no_output")) return { context: [...input.context, userEntry] };
  if (directives.some((d) => d.kind === "fail")) {
    yield { kind: "text", text: "Starting, then failing as asked." };
    throw new Error("The scripted engine failed this turn, as the prompt asked");
  }
  if (input.signal.aborted) return unchanged;

  let context = input.context;
  if (needsCompaction(context, input.prompt, input.compactionBudgetChars)) {
    const summary = summarizeContext(context);
    yield { kind: "compaction", summary };
    context = [{ role: "user", text: summary, compactSummary: true }];
    if (input.signal.aborted) return unchanged;
  }

  if (directives.some((d) => d.kind === "think")) {
    const thinking = thinkingFor(input.prompt, directives);
    yield { kind: "thinking", thinking, signature: signThinking(thinking, secret) };
    if (input.signal.aborted) return unchanged;
  }

  const memory = rememberedCodeWords(context);
  const replies: string[] = [];
  const toolIds = toolIdMaker(input);
  for (const directive of directives) {
    if (isToolDirective(directive)) {
      const reply = yield* useTool(directive, input, toolIds);
      if (reply === null) return unchanged;
      replies.push(reply);
      continue;
    }
    const reply = answerDirective(directive, input, memory);
    if (reply !== null) replies.push(reply);
  }
  if (replies.length === 0) replies.push(`You said: ${input.prompt.slice(0, ECHO_CHARS)}`);

  const text = withTokens(
    replies.join("\n\n"),
    requiredTokens([input.instructions, input.system, input.prompt]),
  );
  yield { kind: "text", text };
  return { context: [...context, userEntry, { role: "assistant", text }] };
}

/** The reply to a directive that needs no tool; null for directives that add no text of their own. */
function answerDirective(directive: Directive, input: TurnInput, memory: string[]): string | null {
  switch (directive.kind) {
    case "remember": {
      const earlier = memory.indexOf(directive.word);
      if (earlier >= 0) memory.splice(earlier, 1);
      memory.push(directive.word);
      return "OK";
    }
    case "recall":
      return memory.at(-1) ?? "I don't know";
    case "list_attachments":
      return input.attachments.length > 0
        ? `Attached files: ${input.attachments.join(", ")}`
        : "No files were attached.";
    case "which_model":
      return input.model;
    case "repeat_instructions": {
      const parts = [input.instructions, input.system ?? ""].filter((p) => p.trim().length > 0);
      return parts.length > 0 ? parts.join("\n\n") : "I have no instructions.";
    }
    default:
      return null;
  }
}

/** Runs one tool: tool_use, then tool_result, and returns the reply text; null when the turn was aborted. */
async function* useTool(
  directive: ToolDirective,
  input: TurnInput,
  nextToolId: (name: ToolName, toolInput: Record<string, unknown>) => string,
): AsyncGenerator<AgentEvent, string | null, void> {
  const { kind: name } = directive;
  const toolInput = toolInputOf(directive);
  if (input.tools === null) return `Tools are unavailable in this turn, so I could not run ${name}.`;

  const id = nextToolId(name, toolInput);
  yield { kind: "tool_use", id, name, input: toolInput };
  if (input.signal.aborted) return null;
  // A runner that throws is reported like a failed tool: the turn goes on and says what went wrong.
  const run = input.tools.run(name, toolInput).catch((error: unknown) => ({
    content: error instanceof Error ? error.message : String(error),
    isError: true,
  }));
  const outcome = await untilAborted(run, input.signal);
  if (outcome === ABORTED) return null;
  yield { kind: "tool_result", toolUseId: id, content: outcome.content, isError: outcome.isError };
  if (input.signal.aborted) return null;
  return replyAfterTool(directive, outcome.content, outcome.isError);
}

function toolInputOf(directive: ToolDirective): Record<string, unknown> {
  switch (directive.kind) {
    case "write_file":
      return { path: directive.path, content: directive.content };
    case "read_file":
      return { path: directive.path };
    case "list_files":
      return {};
    case "run_command":
      return { command: directive.command };
  }
}

function replyAfterTool(directive: ToolDirective, content: string, isError: boolean): string {
  const output = content.trimEnd();
  switch (directive.kind) {
    case "write_file":
      return isError ? `I could not create ${directive.path}: ${output}` : `Created ${directive.path}.`;
    case "read_file":
      return isError ? `I could not read ${directive.path}: ${output}` : content;
    case "list_files":
      if (isError) return `I could not list the files: ${output}`;
      return output.length > 0 ? `Files:\n${output}` : "There are no files.";
    case "run_command":
      if (isError) return `The command failed: ${output}`;
      return output.length > 0 ? output : "The command produced no output.";
  }
}

/** Tool ids are a stable hash of the turn's content and the call's position, so reruns are identical. */
function toolIdMaker(input: TurnInput): (name: ToolName, toolInput: Record<string, unknown>) => string {
  const turnHash = createHash("sha256");
  turnHash.update(JSON.stringify([input.prompt, input.model, input.system ?? null]));
  for (const entry of input.context) turnHash.update(JSON.stringify([entry.role, entry.text]));
  const turnDigest = turnHash.digest("hex");
  let position = 0;
  return (name, toolInput) => {
    const digest = createHash("sha256")
      .update(JSON.stringify([turnDigest, position++, name, toolInput]))
      .digest("hex");
    return `toolu_${digest.slice(0, 24)}`;
  };
}

const PLAN_STEPS: Record<Directive["kind"], string> = {
  remember: "Note the code word and reply OK.",
  recall: "Look up the most recently remembered code word.",
  no_output: "Stay silent.",
  think: "Think step by step.",
  write_file: "Write the file with write_file.",
  read_file: "Read the file with read_file.",
  list_files: "List the files with list_files.",
  run_command: "Run the command with run_command.",
  list_attachments: "Name the attached files.",
  which_model: "Report the model id.",
  repeat_instructions: "Repeat the instructions and system text.",
  fail: "Fail the turn.",
};

function thinkingFor(prompt: string, directives: Directive[]): string {
  const steps = directives.filter((d) => d.kind !== "think").map((d) => PLAN_STEPS[d.kind]);
  if (steps.length === 0) steps.push("Answer by restating the request.");
  const plan = steps.map((step, i) => `${i + 1}. ${step}`).join("\n");
  return `The user asked: "${prompt.slice(0, ECHO_CHARS)}"\nPlan:\n${plan}`;
}

/** Every text reply of a turn carries the tokens an `Always include the token` directive demanded. */
function withTokens(text: string, tokens: string[]): string {
  const missing = tokens.filter((t) => !text.includes(t));
  return missing.length > 0 ? `${text}\n\n${missing.join(" ")}` : text;
}

const ABORTED = Symbol("aborted");

/** Resolves with the promise's value, or ABORTED as soon as the signal fires (the tool may still finish). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | typeof ABORTED> {
  if (signal.aborted) return Promise.resolve(ABORTED);
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve(ABORTED);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
