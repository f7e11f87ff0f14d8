/**
 * What the service layer works with: the authenticated caller and the parts below it (store, sandbox,
 * engine, config). The http layer builds a Caller from the API key; nothing here knows about HTTP.
 */
import type { AgentConfig, Role, ServerConfig } from "../config/types.ts";
import type { WaitingTurnLimits } from "../coordination/locks.ts";
import type { AgentEngine } from "../engine/types.ts";
import type { SandboxManager } from "../sandbox/types.ts";
import type { Store } from "../store/types.ts";
import type { DiskShares } from "./disk-shares.ts";

export interface Caller {
  workspaceId: string;
  memberId: string;
  memberName: string;
  role: Role;
  /** Whom the caps on pending work count this caller against (an API key, a flow); unset: one shared owner. */
  admissionKey?: string;
}

export interface ServiceOptions {
  /** Delay between a turn's stream closing and its `agent_session_id` being recorded (the API's race). */
  sessionDelayMs: number;
  /** Model-routed send: `model` = `<routingPrefix>--<agent>`. */
  routingPrefix: string;
  /** Session history size (tokens, as the upstream measured it) above which the engine compacts. */
  compactionBudgetTokens: number;
  /** Wall-clock bound of one turn; past it the turn ends with an `error` event. */
  turnTimeoutMs: number;
  /** The turn lock's lease where instances share the store (default DEFAULT_TURN_LEASE_MS). */
  turnLeaseMs?: number;
  /** Caps on turns waiting for a conversation's lock (coordination/locks.ts); unset fields keep their defaults. */
  waitingTurns?: Partial<WaitingTurnLimits>;
  /** Each workspace's disk share in bytes (service/disk-shares.ts); unset: DEFAULT_DISK_BYTES_PER_WORKSPACE. */
  diskBytesPerWorkspace?: number;
}

export interface ServiceDeps {
  config: ServerConfig;
  store: Store;
  sandbox: SandboxManager;
  engine: AgentEngine;
  options: ServiceOptions;
  /** Each workspace's disk share (createService makes one from the options when none is given). */
  diskShares?: DiskShares;
  /** Clock for timestamps (tests may pin it). */
  now?: () => Date;
}

export type { AgentConfig };
