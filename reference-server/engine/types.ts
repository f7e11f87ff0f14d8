/**
 * The engine runs one agent turn. It knows nothing of HTTP, SQLite or the sandbox's internals: it
 * receives the prompt, the resumed session's Messages history and a ToolRunner, and yields AgentEvents,
 * each when its block is complete upstream.
 */
import type Anthropic from "@anthropic-ai/sdk";
import type { ToolName, ToolRunner } from "../sandbox/types.ts";

export type MessageParam = Anthropic.Messages.MessageParam;

/** What the engine emits; the service turns these into SSE blocks and transcript entries. */
export type AgentEvent =
  | { kind: "text"; text: string }
  | { kind: "thinking"; thinking: string; signature: string }
  /** Kept in the history and the transcript's raw events; never streamed (not a block type of the API). */
  | { kind: "redacted_thinking"; data: string }
  | { kind: "tool_use"; id: string; name: ToolName; input: Record<string, unknown> }
  | { kind: "tool_result"; toolUseId: string; content: string; isError: boolean }
  /** The history passed the budget and was replaced by `summary` before the turn answered. */
  | { kind: "compaction"; summary: string }
  /**
   * The input usage of the turn's first model call, as soon as the upstream reports it (its message_start),
   * so the turn's own message_start can carry it. Not a block: never streamed as one, never stored.
   */
  | { kind: "input_usage"; usage: TurnUsage };

/** Upstream usage, summed over the turn's model calls. */
export interface TurnUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
  cache_creation_input_tokens: number;
}

/** What the model is told about where it runs (the system prompt's environment section). */
export interface TurnEnvironment {
  agentKind: "storage" | "repo";
  isolated: boolean;
  /** Repo agents: the turn may not change the repository. */
  readOnly: boolean;
}

export interface TurnInput {
  /** The newest user message's text (string content, or text blocks joined by blank lines). */
  prompt: string;
  /** The agent's own instructions; never replaced. */
  instructions: string;
  /** The request's `system` text, appended after the instructions; undefined when absent. */
  system: string | undefined;
  /** The model the turn runs with (body → automation → agent default, resolved by the service). */
  model: string;
  /** The model name sent upstream (the config maps API model ids to upstream names). */
  upstreamModel: string;
  /** Resumed session's Messages history; [] when the turn has no session (fresh, no memory). */
  history: MessageParam[];
  /** Size of that history in tokens, as the upstream measured it at the end of its last turn. */
  historyTokens: number;
  /** Names (relative to the working directory, e.g. `.uploads/a.txt`) of attachments that arrived. */
  attachments: string[];
  environment: TurnEnvironment;
  /** Runs tools in the turn's sandbox; null when tools are unavailable (the model is then offered none). */
  tools: ToolRunner | null;
  /** History size (tokens) above which the engine compacts before answering. */
  compactionBudgetTokens: number;
  /** Extended thinking budget; off when absent. */
  thinkingBudgetTokens?: number;
  maxTokens?: number;
  signal: AbortSignal;
}

export interface TurnOutcome {
  /** The session history after this turn (input history + this turn's messages, or the compacted form). */
  history: MessageParam[];
  /**
   * How many leading messages of `history` are the input history's, untouched: a store appends only the
   * rest. 0 after a compaction; one less than the input when the prompt joined a trailing user message.
   */
  keptHistory: number;
  historyTokens: number;
  usage: TurnUsage;
  /** The last model call's stop reason, passed through (or `max_iterations` at the loop's limit). */
  stopReason: string;
}

export interface AgentEngine {
  readonly name: string;
  runTurn(input: TurnInput): AsyncGenerator<AgentEvent, TurnOutcome, void>;
}
