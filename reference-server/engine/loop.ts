/**
 * The one agent loop, whatever the model: stream a model call; forward each block as soon as its upstream
 * `content_block_stop` arrives; run the `tool_use` blocks in the sandbox; send the results back; repeat
 * until the model ends the turn or the iteration limit is reached. The model is reached through
 * `@anthropic-ai/sdk`: the scripted model in-process (the SDK's `fetch` option), or any Messages upstream.
 */
import Anthropic from "@anthropic-ai/sdk";
import type { ToolName } from "../sandbox/types.ts";
import { ATTACHMENTS_NOTE, COMPACTION_REQUEST, SUMMARY_MARKER } from "../scripted-model/prompt-parts.ts";
import { isToolName, TOOL_DEFINITIONS } from "./anthropic-tools.ts";
import { systemPrompt } from "./system-prompt.ts";
import type { AgentEngine, AgentEvent, MessageParam, TurnInput, TurnOutcome, TurnUsage } from "./types.ts";

type ContentBlock = Anthropic.Messages.ContentBlock;
type ContentBlockParam = Anthropic.Messages.ContentBlockParam;
type ToolResultBlockParam = Anthropic.Messages.ToolResultBlockParam;
type Params = Anthropic.Messages.MessageCreateParamsStreaming;

export interface LoopSettings {
  /** Model calls per turn; past it the turn ends with a note and stop reason `max_iterations`. */
  maxIterations: number;
  /** `max_tokens` of each call unless the turn sets its own. */
  maxTokens: number;
  /** Retries of a call whose connection dropped before any of its blocks was forwarded. */
  maxDropRetries: number;
}

export const LOOP_DEFAULTS: LoopSettings = { maxIterations: 50, maxTokens: 8192, maxDropRetries: 2 };

export function createLoopEngine(
  name: string,
  client: () => Anthropic,
  settings: Partial<LoopSettings> = {},
): AgentEngine {
  const resolved = { ...LOOP_DEFAULTS, ...settings };
  return { name, runTurn: (input) => runLoop(client(), resolved, input) };
}

/** What went wrong upstream, for the service to name with a code of its catalogue. */
export type UpstreamFailureKind = "unreachable" | "overloaded" | "rate_limited" | "failed";

/** A failure of the upstream, said the way a client of this API should read it (never the raw body). */
export class UpstreamError extends Error {
  override name = "UpstreamError";
  readonly kind: UpstreamFailureKind;

  constructor(kind: UpstreamFailureKind, message: string) {
    super(message);
    this.kind = kind;
  }
}

const EMPTY_USAGE: TurnUsage = {
  input_tokens: 0,
  output_tokens: 0,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
};

async function* runLoop(
  client: Anthropic,
  settings: LoopSettings,
  input: TurnInput,
): AsyncGenerator<AgentEvent, TurnOutcome, void> {
  const usage = { ...EMPTY_USAGE };
  // The API wants max_tokens above the thinking budget; a budget configured past it still gets room to answer.
  const maxTokens = Math.max(
    input.maxTokens ?? settings.maxTokens,
    input.thinkingBudgetTokens ? input.thinkingBudgetTokens + 1024 : 0,
  );
  const base = {
    model: input.upstreamModel,
    max_tokens: maxTokens,
    stream: true as const,
    ...(input.thinkingBudgetTokens
      ? { thinking: { type: "enabled" as const, budget_tokens: input.thinkingBudgetTokens } }
      : {}),
  };
  const firstUsage = { pending: true };
  const call = (params: Omit<Params, "model" | "max_tokens" | "stream">, forward: boolean) =>
    streamCall(client, { ...base, ...params }, input.signal, settings, usage, forward, firstUsage);

  let history = input.history;
  let kept = history.length;
  // Compaction: past the budget, the model summarises the history, which the summary then replaces.
  if (history.length > 0 && input.historyTokens > input.compactionBudgetTokens) {
    const request = appendUser(history, [{ type: "text", text: COMPACTION_REQUEST }]);
    const result = yield* call({ messages: request, system: input.instructions || undefined }, false);
    const summary = result.content
      .flatMap((b) => (b.type === "text" ? [b.text] : []))
      .join("\n\n")
      .trim();
    const text = summary || "The earlier conversation was compacted; no summary came back.";
    yield { kind: "compaction", summary: text };
    history = [{ role: "user", content: [{ type: "text", text: `${SUMMARY_MARKER}\n${text}` }] }];
    kept = 0;
  }

  const promptBlocks: ContentBlockParam[] = [
    { type: "text", text: input.prompt.trim().length > 0 ? input.prompt : "(empty message)" },
  ];
  if (input.attachments.length > 0)
    promptBlocks.push({ type: "text", text: `${ATTACHMENTS_NOTE} ${input.attachments.join(", ")}` });
  const messages = appendUser(history, promptBlocks);
  // A prompt joined to a trailing user message changed that message.
  if (history.at(-1)?.role === "user") kept = Math.min(kept, history.length - 1);
  const system = systemPrompt(input);
  const tools = input.tools ? TOOL_DEFINITIONS : undefined;
  let stopReason = "end_turn";
  let lastCallTokens = input.historyTokens;

  for (let iteration = 0; ; iteration++) {
    if (iteration >= settings.maxIterations) {
      // Visible, not silent: the client reads why the turn ended; the history stays valid to resume.
      const note = `The turn stopped after ${settings.maxIterations} model calls, the iteration limit of this server. Send another message to continue.`;
      yield { kind: "text", text: note };
      messages.push({ role: "assistant", content: [{ type: "text", text: note }] });
      stopReason = "max_iterations";
      break;
    }
    const result = yield* call({ messages: withCacheBreakpoint(messages), system, tools }, true);
    lastCallTokens =
      result.usage.input_tokens +
      result.usage.cache_read_input_tokens +
      result.usage.cache_creation_input_tokens +
      result.usage.output_tokens;
    // A message with no content cannot be sent back; an empty turn leaves no assistant entry.
    if (result.content.length > 0)
      messages.push({ role: "assistant", content: result.content as ContentBlockParam[] });
    stopReason = result.stopReason;
    const toolUses = result.content.filter((b) => b.type === "tool_use");
    if (result.stopReason !== "tool_use" || toolUses.length === 0) break;
    const results: ToolResultBlockParam[] = [];
    for (const block of toolUses) {
      const outcome = yield* runTool(block, input);
      results.push(outcome);
      if (input.signal.aborted) break;
    }
    messages.push({ role: "user", content: results });
    if (input.signal.aborted) break;
  }
  return { history: messages, keptHistory: kept, historyTokens: lastCallTokens, usage, stopReason };
}

interface CallResult {
  content: ContentBlock[];
  stopReason: string;
  usage: TurnUsage;
}

/**
 * One streamed model call. Blocks are yielded whole at their `content_block_stop` (when `forward`);
 * a dropped connection is retried while none of the call's blocks was forwarded yet. The SDK itself
 * retries 408/409/429/5xx/529 before a stream opens, honouring `Retry-After`.
 */
async function* streamCall(
  client: Anthropic,
  params: Params,
  signal: AbortSignal,
  settings: LoopSettings,
  total: TurnUsage,
  forward: boolean,
  firstUsage: { pending: boolean },
): AsyncGenerator<AgentEvent, CallResult, void> {
  for (let attempt = 0; ; attempt++) {
    let forwarded = false;
    try {
      const stream = await client.messages.create(params, { signal });
      const blocks: ContentBlock[] = [];
      const json = new Map<number, string>();
      const usage = { ...EMPTY_USAGE };
      let stopReason = "end_turn";
      for await (const event of stream) {
        switch (event.type) {
          case "message_start":
            mergeUsage(usage, event.message.usage);
            if (firstUsage.pending) {
              firstUsage.pending = false;
              yield { kind: "input_usage", usage: { ...usage } };
            }
            break;
          case "content_block_start":
            blocks[event.index] = { ...event.content_block } as ContentBlock;
            break;
          case "content_block_delta":
            applyDelta(blocks[event.index], event.delta, json, event.index);
            break;
          case "content_block_stop": {
            const block = blocks[event.index];
            if (block?.type === "tool_use") block.input = parseInput(json.get(event.index));
            const agentEvent = block && forward ? toAgentEvent(block) : undefined;
            if (agentEvent) {
              forwarded = true;
              yield agentEvent;
            }
            break;
          }
          case "message_delta":
            stopReason = event.delta.stop_reason ?? stopReason;
            mergeUsage(usage, event.usage);
            break;
        }
      }
      for (const key of Object.keys(total) as Array<keyof TurnUsage>) total[key] += usage[key];
      return { content: blocks.filter(Boolean), stopReason, usage };
    } catch (error) {
      if (signal.aborted) throw signal.reason ?? error;
      const dropped = !(error instanceof Anthropic.APIError) || error instanceof Anthropic.APIConnectionError;
      if (dropped && !forwarded && attempt < settings.maxDropRetries) continue;
      throw upstreamError(error, forwarded);
    }
  }
}

function mergeUsage(into: TurnUsage, from: Partial<Record<keyof TurnUsage, number | null>>): void {
  // Counters are whole-message totals, sent again (or first) by message_delta: overwrite when present.
  for (const key of Object.keys(into) as Array<keyof TurnUsage>) {
    const value = from[key];
    if (typeof value === "number") into[key] = value;
  }
}

function applyDelta(
  block: ContentBlock | undefined,
  delta: Anthropic.Messages.RawContentBlockDelta,
  json: Map<number, string>,
  index: number,
): void {
  if (!block) return;
  if (delta.type === "text_delta" && block.type === "text") block.text += delta.text;
  else if (delta.type === "thinking_delta" && block.type === "thinking") block.thinking += delta.thinking;
  else if (delta.type === "signature_delta" && block.type === "thinking") block.signature = delta.signature;
  else if (delta.type === "input_json_delta") json.set(index, (json.get(index) ?? "") + delta.partial_json);
}

function parseInput(raw: string | undefined): Record<string, unknown> {
  if (!raw) return {};
  try {
    const value: unknown = JSON.parse(raw);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

function toAgentEvent(block: ContentBlock): AgentEvent | undefined {
  switch (block.type) {
    case "text":
      return block.text.length > 0 ? { kind: "text", text: block.text } : undefined;
    case "thinking":
      return { kind: "thinking", thinking: block.thinking, signature: block.signature };
    case "redacted_thinking":
      return { kind: "redacted_thinking", data: block.data };
    case "tool_use":
      // Tools this server does not offer still get a result (an error), but are no event of the turn.
      return isToolName(block.name)
        ? { kind: "tool_use", id: block.id, name: block.name, input: block.input as Record<string, unknown> }
        : undefined;
    default:
      return undefined;
  }
}

/** Runs one requested tool; the turn's signal reaches the tool, so a cut turn kills its process tree. */
async function* runTool(
  block: Extract<ContentBlock, { type: "tool_use" }>,
  input: TurnInput,
): AsyncGenerator<AgentEvent, ToolResultBlockParam, void> {
  const toolInput = block.input as Record<string, unknown>;
  if (!isToolName(block.name) || input.tools === null) {
    const reason = input.tools === null ? "tools are unavailable in this turn" : `unknown tool ${block.name}`;
    return { type: "tool_result", tool_use_id: block.id, content: reason, is_error: true };
  }
  const cancelled = { content: "The tool was stopped: the turn was cancelled.", isError: true };
  // A turn cancelled before the call starts no process at all.
  let outcome = input.signal.aborted
    ? cancelled
    : await input.tools.run(block.name as ToolName, toolInput, input.signal).catch((error: unknown) => ({
        content: error instanceof Error ? error.message : String(error),
        isError: true,
      }));
  if (input.signal.aborted) outcome = cancelled;
  yield { kind: "tool_result", toolUseId: block.id, content: outcome.content, isError: outcome.isError };
  return { type: "tool_result", tool_use_id: block.id, content: outcome.content, is_error: outcome.isError };
}

/** The history with a new user content appended; merged into a trailing user message (roles alternate). */
function appendUser(history: MessageParam[], content: ContentBlockParam[]): MessageParam[] {
  const messages = [...history];
  const last = messages.at(-1);
  if (last?.role === "user") {
    const earlier: ContentBlockParam[] =
      typeof last.content === "string" ? [{ type: "text", text: last.content }] : last.content;
    messages[messages.length - 1] = { role: "user", content: [...earlier, ...content] };
  } else {
    messages.push({ role: "user", content });
  }
  return messages;
}

/**
 * Marks the newest message as a prompt-cache breakpoint, on a copy: the stored history stays free of
 * markers (the API allows four per request, and every earlier turn would otherwise leave one).
 */
function withCacheBreakpoint(messages: MessageParam[]): MessageParam[] {
  const last = messages.at(-1);
  if (!last || typeof last.content === "string" || last.content.length === 0) return messages;
  const blocks = [...last.content];
  const tail = blocks[blocks.length - 1];
  if (tail.type === "thinking" || tail.type === "redacted_thinking") return messages;
  blocks[blocks.length - 1] = { ...tail, cache_control: { type: "ephemeral" } } as ContentBlockParam;
  return [...messages.slice(0, -1), { ...last, content: blocks } as MessageParam];
}

function upstreamError(error: unknown, forwarded: boolean): UpstreamError {
  const after = forwarded ? " after part of the answer was sent" : "";
  if (error instanceof Anthropic.APIConnectionError || !(error instanceof Anthropic.APIError))
    return new UpstreamError(
      "unreachable",
      `The model's upstream could not be reached or dropped the connection${after}.`,
    );
  const type = (error.error as { error?: { type?: unknown } } | undefined)?.error?.type;
  const kind = typeof type === "string" ? type : error.type;
  if (error.status === 529 || kind === "overloaded_error")
    return new UpstreamError("overloaded", `The model is overloaded${after}; try again later.`);
  if (error.status === 429 || kind === "rate_limit_error")
    return new UpstreamError("rate_limited", `The model's rate limit was reached${after}; try again later.`);
  if (error.status === undefined)
    return new UpstreamError(
      "failed",
      `The model failed while answering (upstream ${kind ?? "error"})${after}.`,
    );
  return new UpstreamError(
    "failed",
    `The model request failed (upstream status ${error.status}${kind ? ` ${kind}` : ""}).`,
  );
}
