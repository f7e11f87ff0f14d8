/**
 * What differs between one instance and several, chosen once at start from the store the server runs on: one
 * process keeps the conversation's turn lock and its pending session recordings in memory, has nobody to tell
 * of an interrupt and keeps conversations' files on its own disk; instances sharing a store (PostgreSQL) hold
 * the lock as a lease in the database, keep the recordings' due times there, tell each other of interrupts and
 * keep the files in the store, which every instance restores from. Nothing else asks which of the two it is.
 */
import type { FileStore } from "../store/file-store.ts";
import type { ServerStore, TurnInterrupts } from "../store/types.ts";
import { type ConversationLocks, LeasedLocks } from "./leased-locks.ts";
import { KeyedMutex, type WaitingTurnLimits } from "./locks.ts";
import { SessionRecorder, type SessionRecordings } from "./session-recorder.ts";
import { SharedSessionRecorder } from "./shared-session-recorder.ts";

/** How long a dead instance's conversations stay locked (a live holder renews its lease every third of it). */
export const DEFAULT_TURN_LEASE_MS = 10_000;

interface CoordinationParts {
  readonly locks: ConversationLocks;
  readonly sessions: SessionRecordings;
  /** How instances end each other's turns (a delete). */
  readonly interrupts: TurnInterrupts;
}

/** One process: locks and recordings in memory, the local disk is the file store. */
export interface OneInstance extends CoordinationParts {
  readonly kind: "one-instance";
}

/** Instances sharing a store: any of them may hold a conversation's lock or run its turn. */
export interface SharedInstances extends CoordinationParts {
  readonly kind: "shared";
  /** Conversations' files and published outputs, which every instance restores from. */
  readonly files: FileStore;
}

export type Coordination = OneInstance | SharedInstances;

export interface CoordinationOptions {
  /** Delay between a turn's stream closing and its `agent_session_id` being recorded. */
  sessionDelayMs: number;
  /** The turn lock's lease where instances share the store (default DEFAULT_TURN_LEASE_MS). */
  turnLeaseMs?: number;
  /** Caps on turns waiting for a conversation's lock. */
  waitingTurns?: Partial<WaitingTurnLimits>;
}

/** One process has no other instance to tell: its own turns are ended before anything is published. */
const NO_OTHER_INSTANCE: TurnInterrupts = {
  publish: async () => undefined,
  subscribe: async () => async () => undefined,
};

export function chooseCoordination(store: ServerStore, options: CoordinationOptions): Coordination {
  if (store.sharing === "one-instance")
    return {
      kind: "one-instance",
      locks: new KeyedMutex(options.waitingTurns),
      sessions: new SessionRecorder(store, options.sessionDelayMs),
      interrupts: NO_OTHER_INSTANCE,
    };
  return {
    kind: "shared",
    locks: new LeasedLocks(store.turnLeases, {
      leaseMs: options.turnLeaseMs ?? DEFAULT_TURN_LEASE_MS,
      waitingTurns: options.waitingTurns,
    }),
    sessions: new SharedSessionRecorder(store.scheduledRecordings, options.sessionDelayMs),
    interrupts: store.turnInterrupts,
    files: store.fileStore,
  };
}
