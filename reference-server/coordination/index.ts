/**
 * What differs between one instance and several, chosen once at start: one process keeps the conversation's
 * turn lock and its pending session recordings in memory; instances sharing a store (PostgreSQL) hold the lock
 * as a lease in the database, keep the recordings' due times there, and tell each other of interrupts.
 */
import type { Store, TurnInterrupts } from "../store/types.ts";
import { type ConversationLocks, LeasedLocks } from "./leased-locks.ts";
import { KeyedMutex, type WaitingTurnLimits } from "./locks.ts";
import { SessionRecorder, type SessionRecordings } from "./session-recorder.ts";
import { SharedSessionRecorder } from "./shared-session-recorder.ts";

/** How long a dead instance's conversations stay locked (a live holder renews its lease every third of it). */
export const DEFAULT_TURN_LEASE_MS = 10_000;

export interface Coordination {
  /** Whether other instances share the store (and so may hold a conversation's lock or run its turn). */
  readonly shared: boolean;
  readonly locks: ConversationLocks;
  readonly sessions: SessionRecordings;
  /** How instances end each other's turns (a delete); none for one instance. */
  readonly interrupts: TurnInterrupts | undefined;
}

export interface CoordinationOptions {
  /** Delay between a turn's stream closing and its `agent_session_id` being recorded. */
  sessionDelayMs: number;
  /** The turn lock's lease where instances share the store (default DEFAULT_TURN_LEASE_MS). */
  turnLeaseMs?: number;
  /** Caps on turns waiting for a conversation's lock. */
  waitingTurns?: Partial<WaitingTurnLimits>;
}

/** Each part follows what the store offers (PostgreSQL offers all three, SQLite none). */
export function chooseCoordination(store: Store, options: CoordinationOptions): Coordination {
  return {
    shared: store.turnLeases !== undefined,
    locks: store.turnLeases
      ? new LeasedLocks(store.turnLeases, {
          leaseMs: options.turnLeaseMs ?? DEFAULT_TURN_LEASE_MS,
          waitingTurns: options.waitingTurns,
        })
      : new KeyedMutex(options.waitingTurns),
    sessions: store.scheduledRecordings
      ? new SharedSessionRecorder(store.scheduledRecordings, options.sessionDelayMs)
      : new SessionRecorder(store, options.sessionDelayMs),
    interrupts: store.turnInterrupts,
  };
}
