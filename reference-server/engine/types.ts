/**
 * The engine runs one agent turn. It knows nothing of HTTP, SQLite or the sandbox's internals:
 * it receives the prompt, the resumed session's context and a ToolRunner, and yields AgentEvents.
 */
import type { ToolName, ToolRunner } from "../sandbox/types.ts";

/** What the engine emits; the service turns these into SSE blocks and transcript entries. */
export type AgentEvent =
  | { kind: "text"; text: string }
  | { kind: "thinking"; thinking: string; signature: string }
  | { kind: "tool_use"; id: string; name: ToolName; input: Record<string, unknown> }
  | { kind: "tool_result"; toolUseId: string; content: string; isError: boolean }
  /** The context passed the budget and was replaced by `summary` before the turn answered. */
  | { kind: "compaction"; summary: string };

/** One entry of an agent session's memory (what a resumed turn "remembers"). */
export interface SessionEntry {
  role: "user" | "assistant";
  text: string;
  /** True for the summary that replaced older entries at a compaction. */
  compactSummary?: boolean;
}

export interface TurnInput {
  /** The newest user message's text (string content, or text blocks joined by blank lines). */
  prompt: string;
  /** The agent's own instructions; never replaced. */
  instructions: string;
  /** The request's `system` text, appended to the instructions; undefined when absent. */
  system: string | undefined;
  /** The model the turn runs with (body → automation → agent default, resolved by the service). */
  model: string;
  /** Prior context of the resumed session; [] when the turn has no session (fresh, no memory). */
  context: SessionEntry[];
  /** Names (relative to the working directory, e.g. `.uploads/a.txt`) of attachments that arrived. */
  attachments: string[];
  /** Runs tools in the turn's sandbox; null when tools are unavailable (the engine then says so in text). */
  tools: ToolRunner | null;
  /** Context size (characters of all entries) above which the engine compacts before answering. */
  compactionBudgetChars: number;
  signal: AbortSignal;
}

export interface TurnOutcome {
  /** The session context after this turn (input context + this turn, or the compacted form). */
  context: SessionEntry[];
}

export interface AgentEngine {
  readonly name: string;
  runTurn(input: TurnInput): AsyncGenerator<AgentEvent, TurnOutcome, void>;
}
