/** What a turn works with: the parts below it, the session recordings, and the registry of running turns. */
import type { SessionRecordings } from "../coordination/session-recorder.ts";
import type { AgentEngine } from "../engine/types.ts";
import type { SandboxManager } from "../sandbox/types.ts";
import type { Store } from "../store/types.ts";

export interface TurnContext {
  store: Store;
  engine: AgentEngine;
  sandbox: SandboxManager;
  sessions: SessionRecordings;
  options: {
    /** Session history size (tokens) above which the engine compacts. */
    compactionBudgetTokens: number;
    /** Wall-clock bound of one turn. */
    turnTimeoutMs: number;
  };
  /** The time now, as stored (ISO 8601). */
  now(): string;
  /** The turn running on each conversation (turns of one conversation are serialised), to end it early. */
  running: Map<string, AbortController>;
  /** Turn time-out timers set and not yet cleared or fired (checked by tests: 0 once turns are over). */
  liveTimers: { count: number };
}
