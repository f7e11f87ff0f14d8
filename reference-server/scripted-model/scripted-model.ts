/**
 * The `scripted` model: a pure function from a Messages API request to a Messages answer, driven by the
 * phrase table (phrases.ts). It has no state: it remembers by reading the history it is sent, and uses
 * files and the shell by answering `tool_use` for the tools the request offers, then composing its reply
 * from the `tool_result` blocks that come back. The agent loop (loop.ts) drives it exactly like a real
 * model, in-process or over HTTP (`agent-api model`), see scripted-transport.ts.
 */
import { createHash } from "node:crypto";
import type Anthropic from "@anthropic-ai/sdk";
import type { ToolName } from "../sandbox/types.ts";
import { lastRememberedWord, rememberedCodeWords } from "./memory.ts";
import { type Directive, parseDirectives, requiredTokens } from "./phrases.ts";
import { ATTACHMENTS_NOTE, COMPACTION_REQUEST, ENVIRONMENT_HEADING, SUMMARY_MARKER } from "./prompt-parts.ts";
import { signThinking } from "./signature.ts";

/** A Messages request, streaming or not (the transport reads `stream`). */
type Params = Omit<Anthropic.Messages.MessageCreateParamsNonStreaming, "stream">;
type MessageParam = Anthropic.Messages.MessageParam;
type ContentBlock = Anthropic.Messages.ContentBlock;
type Usage = Anthropic.Messages.Usage;

export interface ScriptedMessage {
  id: string;
  model: string;
  content: ContentBlock[];
  stop_reason: string;
  usage: Pick<
    Usage,
    "input_tokens" | "output_tokens" | "cache_read_input_tokens" | "cache_creation_input_tokens"
  >;
}

/** A failure the transport plays on the first `times` identical requests before answering (a transient upstream). */
export interface TransientFailure {
  kind: "overloaded" | "rate_limited" | "dropped";
  times: number;
}

/**
 * One paragraph of a final reply and what it reports, so a style (realistic-style.ts) can rephrase it the
 * way a real model would without parsing the plain wording back.
 */
export interface ReplyPart {
  kind: Directive["kind"] | "echo" | "tokens" | "no_tools";
  /** The plain wording (what the scripted model answers). */
  text: string;
  /** The value reported: a code word, a model id, a file's content, a command's output, the echoed prompt. */
  value?: string;
  /** The file a tool touched. */
  path?: string;
  /** Names listed (files, attachments, tokens). */
  items?: string[];
  isError?: boolean;
}

export interface ScriptedAnswer {
  message: ScriptedMessage;
  /** The final text reply, paragraph by paragraph (absent when the answer has no composed reply). */
  parts?: ReplyPart[];
  /** Blocks streamed before an `error` event ends the stream (the phrase "Fail this turn after it starts"). */
  failAfterBlocks?: number;
  transient?: TransientFailure;
}

export interface ScriptedModelOptions {
  /** Key of the HMAC that signs thinking blocks; a fixed default keeps runs reproducible. */
  thinkingSignatureSecret?: string;
}

const ECHO_CHARS = 200;

type ToolDirective = Extract<Directive, { kind: ToolName | "loop_forever" | "list_attachments" }>;

function usesTool(d: Directive): d is ToolDirective {
  return (
    d.kind === "write_file" ||
    d.kind === "read_file" ||
    d.kind === "list_files" ||
    d.kind === "run_command" ||
    d.kind === "loop_forever" ||
    d.kind === "list_attachments"
  );
}

/** Where the server writes attachments, relative to the working directory (the system prompt says so). */
const UPLOADS = ".uploads";

/**
 * `requestChars`: the size of the request's JSON body when the caller has it (the transport does), so the
 * imitated usage need not serialise the whole history again.
 */
export function scriptedAnswer(
  request: Params,
  options: ScriptedModelOptions = {},
  requestChars?: number,
): ScriptedAnswer {
  const messages = request.messages;
  const system = systemBlocks(request.system);
  const promptAt = findPromptIndex(messages);
  const promptBlocks = promptAt >= 0 ? textBlocksOf(messages[promptAt]) : [];
  // The prompt's message may also carry a compaction summary (the history it follows was replaced by it).
  const summaries = promptBlocks.filter((t) => t.startsWith(SUMMARY_MARKER));
  const prompt = promptBlocks
    .filter((t) => !t.startsWith(ATTACHMENTS_NOTE) && !t.startsWith(SUMMARY_MARKER))
    .join("\n\n");
  const attachmentNote = promptBlocks.find((t) => t.startsWith(ATTACHMENTS_NOTE));
  const directives = parseDirectives(prompt);
  const reply = (content: ContentBlock[], stop = "end_turn"): ScriptedMessage =>
    message(request, content, stop, directives, requestChars);

  if (prompt.startsWith(COMPACTION_REQUEST))
    return { message: reply([text(summarize(messages.slice(0, promptAt)))]) };

  const transient = transientOf(directives);
  if (directives.some((d) => d.kind === "no_output")) return { message: reply([]), transient };
  if (directives.some((d) => d.kind === "fail"))
    return { message: reply([text("Starting, then failing as asked.")]), failAfterBlocks: 1, transient };

  // This turn's calls so far: what came after the prompt (the model's tool calls and their results).
  const turnSoFar = messages.slice(promptAt + 1);
  const firstCall = turnSoFar.length === 0;
  const toolUses = turnSoFar.flatMap((m) =>
    m.role === "assistant" && Array.isArray(m.content)
      ? (m.content as Anthropic.Messages.ContentBlockParam[]).filter(
          (b): b is Anthropic.Messages.ToolUseBlockParam => b.type === "tool_use",
        )
      : [],
  );
  const results = new Map<string, { content: string; isError: boolean }>();
  for (const m of turnSoFar) {
    if (m.role !== "user" || !Array.isArray(m.content)) continue;
    for (const b of m.content as Anthropic.Messages.ContentBlockParam[])
      if (b.type === "tool_result")
        results.set(b.tool_use_id, { content: resultText(b), isError: !!b.is_error });
  }

  const offered = new Set<string>(
    (request.tools ?? []).flatMap((t: Anthropic.Messages.ToolUnion) => ("name" in t ? [t.name] : [])),
  );
  const toolDirectives = directives.filter(usesTool);
  const lead: ContentBlock[] = [];
  if (firstCall && directives.some((d) => d.kind === "think")) {
    const thinking = thinkingFor(prompt, directives);
    lead.push({
      type: "thinking",
      thinking,
      signature: signThinking(thinking, options.thinkingSignatureSecret),
    });
  }
  if (firstCall && directives.some((d) => d.kind === "redacted_thinking"))
    lead.push({ type: "redacted_thinking", data: `scripted-redacted-${digest([prompt]).slice(0, 16)}` });

  // One tool call per model call, in the order the prompt asks: the next one not yet made.
  const next = nextToolCall(toolDirectives, toolUses.length, offered);
  if (next) {
    // Unique in the conversation without hashing all of it: its length and this turn's messages differ.
    const id = `toolu_${digest([messages.length, prompt, turnSoFar, next.name, next.input]).slice(0, 24)}`;
    return {
      message: reply(
        [...lead, { type: "tool_use", id, name: next.name, input: next.input } as ContentBlock],
        "tool_use",
      ),
      transient,
    };
  }

  // Only a recall reads the history, and only back to the newest word remembered (the summaries this
  // prompt carries are newer than anything before it).
  const memory = new Memory(
    () =>
      lastRememberedWord(summaries.map((text): MessageParam => ({ role: "user", content: text }))) ??
      lastRememberedWord(messages, Math.max(0, promptAt)),
  );
  const parts: ReplyPart[] = [];
  let toolIndex = 0;
  for (const directive of directives) {
    if (usesTool(directive)) {
      // With no tools, the files this turn's message names are all there is to go by.
      if (directive.kind === "list_attachments" && !offered.has("list_files")) {
        parts.push({ kind: directive.kind, ...attachedFiles(attachmentNote, undefined) });
        continue;
      }
      if (!offered.has(toolNameOf(directive))) {
        const tool = toolNameOf(directive);
        parts.push({
          kind: "no_tools",
          text: `Tools are unavailable in this turn, so I could not run ${tool}.`,
          value: tool,
        });
        continue;
      }
      const use = toolUses[toolIndex++];
      const result = use ? results.get(use.id) : undefined;
      if (directive.kind === "loop_forever") continue;
      parts.push(afterTool(directive, result ?? { content: "no result", isError: true }, attachmentNote));
      continue;
    }
    const answer = answerDirective(directive, request, system, memory);
    if (answer !== null) parts.push(answer);
  }
  if (parts.length === 0) {
    const echoed = prompt.slice(0, ECHO_CHARS);
    parts.push({ kind: "echo", text: `You said: ${echoed}`, value: echoed });
  }
  const tokens = missingTokens(parts.map((p) => p.text).join("\n\n"), requiredTokens([...system, prompt]));
  if (tokens.length > 0) parts.push({ kind: "tokens", text: tokens.join(" "), items: tokens });
  const body = parts.map((p) => p.text).join("\n\n");
  const stop = directives.find((d) => d.kind === "stop_reason");
  return {
    message: reply([...lead, text(body)], stop?.kind === "stop_reason" ? stop.reason : "end_turn"),
    parts,
    transient,
  };
}

function nextToolCall(
  directives: ToolDirective[],
  made: number,
  offered: Set<string>,
): { name: ToolName; input: Record<string, unknown> } | null {
  const usable = directives.filter((d) => offered.has(toolNameOf(d)));
  if (usable.some((d) => d.kind === "loop_forever")) return { name: "list_files", input: {} };
  const directive = usable[made];
  if (!directive) return null;
  return { name: toolNameOf(directive), input: toolInputOf(directive) };
}

function toolNameOf(d: ToolDirective): ToolName {
  return d.kind === "loop_forever" || d.kind === "list_attachments" ? "list_files" : d.kind;
}

/** Room for the server's attachments note: 10 names of at most 200 bytes under `.uploads/`, comma-separated. */
const MAX_NOTE_CHARS = 4096;
/** Lines of a listing compared with the note: more than the list tool ever returns (1,000 entries). */
const MAX_LISTED_LINES = 2000;

/**
 * The reply to `List the attached files`: the files this turn's message says arrived (older ones may still
 * be in .uploads/), as the listing of .uploads/ shows them: a file the listing lacks is not claimed. In the
 * message's order; a name is matched whole (names may hold commas). `listing` undefined: no tool was
 * offered, so the message is all there is.
 */
function attachedFiles(
  note: string | undefined,
  listing: { content: string; isError: boolean } | undefined,
): { text: string; items?: string[]; isError?: boolean } {
  // Bounded before matching: one search of the names per listed line is lines × names, and a caller of the
  // Messages upstream writes both. The server's note names at most 10 files of at most 200 bytes each.
  const names = note?.slice(ATTACHMENTS_NOTE.length, ATTACHMENTS_NOTE.length + MAX_NOTE_CHARS).trim() ?? "";
  if (names === "") return { text: "No files were attached.", items: [] };
  if (!listing) return { text: `Attached files: ${names}`, items: names.split(", ") };
  if (listing.isError)
    return { text: `I could not list the attached files: ${listing.content.trimEnd()}`, isError: true };
  const items = `, ${names}, `;
  const found = listing.content
    .split("\n", MAX_LISTED_LINES)
    .map((line) => ({ path: `${UPLOADS}/${line}`, at: items.indexOf(`, ${UPLOADS}/${line}, `) }))
    .filter((file) => file.at >= 0)
    .sort((a, b) => a.at - b.at)
    .map((file) => file.path);
  return found.length > 0
    ? { text: `Attached files: ${found.join(", ")}`, items: found }
    : { text: "No files were attached.", items: [] };
}

function toolInputOf(d: ToolDirective): Record<string, unknown> {
  switch (d.kind) {
    case "write_file":
      return { path: d.path, content: d.content };
    case "read_file":
      return { path: d.path };
    case "list_files":
    case "loop_forever":
      return {};
    case "list_attachments":
      return { path: UPLOADS };
    case "run_command":
      return { command: d.command };
  }
}

function afterTool(
  d: ToolDirective,
  result: { content: string; isError: boolean },
  attachmentNote: string | undefined,
): ReplyPart {
  const { content, isError } = result;
  const output = content.trimEnd();
  const kind = d.kind;
  switch (d.kind) {
    case "write_file":
      return isError
        ? { kind, text: `I could not create ${d.path}: ${output}`, path: d.path, value: output, isError }
        : { kind, text: `Created ${d.path}.`, path: d.path };
    case "read_file":
      return isError
        ? { kind, text: `I could not read ${d.path}: ${output}`, path: d.path, value: output, isError }
        : { kind, text: content, path: d.path, value: content };
    case "list_files":
    case "loop_forever":
      if (isError) return { kind, text: `I could not list the files: ${output}`, value: output, isError };
      return output.length > 0
        ? { kind, text: `Files:\n${output}`, items: output.split("\n") }
        : { kind, text: "There are no files.", items: [] };
    case "run_command":
      if (isError) return { kind, text: `The command failed: ${output}`, value: output, isError };
      return output.length > 0
        ? { kind, text: output, value: output }
        : { kind, text: "The command produced no output.", value: "" };
    case "list_attachments":
      return { kind, ...attachedFiles(attachmentNote, result) };
  }
}

/** The reply to a directive that needs no tool; null for directives that add no text of their own. */
function answerDirective(
  directive: Directive,
  request: Params,
  system: string[],
  memory: Memory,
): ReplyPart | null {
  const kind = directive.kind;
  switch (directive.kind) {
    case "remember":
      memory.remember(directive.word);
      return { kind, text: "OK", value: directive.word };
    case "recall": {
      const word = memory.last();
      return word === undefined ? { kind, text: "I don't know" } : { kind, text: word, value: word };
    }
    case "which_model":
      return { kind, text: request.model, value: request.model };
    case "repeat_instructions": {
      // Everything the system prompt says except the server's description of the environment.
      const parts = system.filter((p) => p.trim().length > 0 && !p.startsWith(ENVIRONMENT_HEADING));
      return parts.length > 0
        ? { kind, text: parts.join("\n\n"), value: parts.join("\n\n") }
        : { kind, text: "I have no instructions." };
    }
    default:
      return null;
  }
}

/** The newest remembered word: one this prompt remembered, else the history's, read only when asked. */
class Memory {
  readonly #fromHistory: () => string | undefined;
  #last: { word: string | undefined } | undefined;

  constructor(fromHistory: () => string | undefined) {
    this.#fromHistory = fromHistory;
  }

  remember(word: string): void {
    this.#last = { word };
  }

  last(): string | undefined {
    this.#last ??= { word: this.#fromHistory() };
    return this.#last.word;
  }
}

function transientOf(directives: Directive[]): TransientFailure | undefined {
  for (const d of directives) if (d.kind === "transient") return { kind: d.failure, times: d.times };
  return undefined;
}

/** The newest user message that carries text (not only tool results): this turn's prompt. */
function findPromptIndex(messages: MessageParam[]): number {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === "user" && textBlocksOf(messages[i]).length > 0) return i;
  }
  return -1;
}

export function textBlocksOf(message: MessageParam): string[] {
  if (typeof message.content === "string") return [message.content];
  return (message.content as Anthropic.Messages.ContentBlockParam[]).flatMap((b) =>
    b.type === "text" ? [b.text] : [],
  );
}

function systemBlocks(system: Params["system"]): string[] {
  if (system === undefined) return [];
  if (typeof system === "string") return [system];
  return system.map((b) => b.text);
}

function resultText(block: Anthropic.Messages.ToolResultBlockParam): string {
  if (typeof block.content === "string") return block.content;
  return (block.content ?? []).flatMap((b) => (b.type === "text" ? [b.text] : [])).join("");
}

/** A deterministic digest of the history; `Code words remembered: X, Y.` is parsed back by memory.ts. */
function summarize(history: MessageParam[]): string {
  const prompts = history.filter(
    (m) => m.role === "user" && textBlocksOf(m).length > 0 && !textBlocksOf(m)[0].startsWith(SUMMARY_MARKER),
  );
  const replies = history.filter((m) => m.role === "assistant" && textBlocksOf(m).length > 0).length;
  const words = rememberedCodeWords(history);
  const parts = [
    `Summary of earlier conversation: ${prompts.length} user message(s) and ${replies} assistant repl(ies) were compacted.`,
  ];
  const first = prompts[0] ? textBlocksOf(prompts[0])[0] : undefined;
  if (first !== undefined) parts.push(`First request: "${excerpt(first)}".`);
  parts.push(
    words.length > 0 ? `Code words remembered: ${words.join(", ")}.` : "No code words were remembered.",
  );
  return parts.join(" ");
}

function excerpt(value: string): string {
  const oneLine = value.replace(/\s+/g, " ").trim();
  return oneLine.length > 120 ? `${oneLine.slice(0, 120)}…` : oneLine;
}

const PLAN_STEPS: Partial<Record<Directive["kind"], string>> = {
  remember: "Note the code word and reply OK.",
  recall: "Look up the most recently remembered code word.",
  write_file: "Write the file with write_file.",
  read_file: "Read the file with read_file.",
  list_files: "List the files with list_files.",
  run_command: "Run the command with run_command.",
  list_attachments: "List .uploads with list_files and name this turn's attached files.",
  which_model: "Report the model id.",
  repeat_instructions: "Repeat the instructions and system text.",
};

function thinkingFor(prompt: string, directives: Directive[]): string {
  const steps = directives.flatMap((d) => (PLAN_STEPS[d.kind] ? [PLAN_STEPS[d.kind] as string] : []));
  if (steps.length === 0) steps.push("Answer by restating the request.");
  const plan = steps.map((step, i) => `${i + 1}. ${step}`).join("\n");
  return `The user asked: "${prompt.slice(0, ECHO_CHARS)}"\nPlan:\n${plan}`;
}

/** The tokens an `Always include the token` directive demanded that the reply does not carry yet. */
function missingTokens(value: string, tokens: string[]): string[] {
  return tokens.filter((t) => !value.includes(t));
}

function text(value: string): ContentBlock {
  return { type: "text", text: value, citations: null };
}

function digest(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("hex");
}

/** Tokens by the 4-characters rule: the scripted model has no tokenizer, and usage must be plausible. */
export function tokensOf(value: unknown): number {
  if (value === undefined) return 0;
  const chars = typeof value === "string" ? value.length : JSON.stringify(value).length;
  return Math.ceil(chars / 4);
}

function message(
  request: Params,
  content: ContentBlock[],
  stop: string,
  directives: Directive[],
  requestChars: number | undefined,
): ScriptedMessage {
  const reported = directives.find((d) => d.kind === "usage");
  let usage: ScriptedMessage["usage"];
  if (reported?.kind === "usage") {
    usage = {
      input_tokens: reported.input,
      output_tokens: reported.output,
      cache_read_input_tokens: reported.cacheRead,
      cache_creation_input_tokens: reported.cacheWrite,
    };
  } else {
    // An imitation of a prompt cache, deterministic: a request that already holds an answer of the model
    // reads everything before its newest message from the cache; a first request writes its system prompt.
    // The messages' JSON is the body's minus everything else (the same serialiser wrote both), so the
    // history's size comes without serialising it again.
    const messagesTokens =
      requestChars !== undefined
        ? Math.ceil((requestChars - (JSON.stringify({ ...request, messages: [] }).length - 2)) / 4)
        : tokensOf(request.messages);
    const all = tokensOf(request.system) + tokensOf(request.tools) + messagesTokens;
    const resumed = request.messages.some((m: MessageParam) => m.role === "assistant");
    const cached = resumed ? all - tokensOf(request.messages.at(-1)) : 0;
    const written = resumed ? 0 : tokensOf(request.system);
    usage = {
      input_tokens: Math.max(1, all - cached - written),
      output_tokens: Math.max(1, tokensOf(content)),
      cache_read_input_tokens: cached,
      cache_creation_input_tokens: written,
    };
  }
  return {
    // Deterministic per request; the newest message and the history's length tell requests apart.
    id: `msg_${digest([request.model, request.system ?? null, request.messages.length, request.messages.at(-1) ?? null]).slice(0, 24)}`,
    model: request.model,
    content,
    stop_reason: stop,
    usage,
  };
}
