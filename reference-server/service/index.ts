/** The service layer: the API's rules over the store, sandbox and engine, with no knowledge of HTTP. */

import { LeasedLocks } from "../coordination/leased-locks.ts";
import { KeyedMutex } from "../coordination/locks.ts";
import { SessionRecorder } from "../coordination/session-recorder.ts";
import { SharedSessionRecorder } from "../coordination/shared-session-recorder.ts";
import { type InterruptCode, interruptCode } from "../turn/failure.ts";
import { findAgent, listModels } from "./agents.ts";
import { ConversationService } from "./conversations.ts";
import { FlowService } from "./flows.ts";
import { TurnService } from "./turns.ts";
import type { Caller, ServiceDeps } from "./types.ts";

export interface Service {
  conversations: ConversationService;
  turns: TurnService;
  flows: FlowService;
  models(caller: Caller, agent: string): ReturnType<typeof listModels>;
  /** What is held per running turn or per conversation; every figure returns to 0 once turns are over. */
  live(): ServiceLive;
  close(): Promise<void>;
}

/** How long a dead instance's conversations stay locked (a live holder renews its lease every third of it). */
export const DEFAULT_TURN_LEASE_MS = 10_000;

export interface ServiceLive {
  runningTurns: number;
  turnTimers: number;
  conversationLocks: number;
  /** Turns waiting behind another turn of their conversation. */
  waitingTurns: number;
  pendingRecordings: number;
}

export async function createService(
  deps: ServiceDeps,
  isFlowKey: (flowId: string, key: string) => boolean,
): Promise<Service> {
  // Instances sharing the store record each other's pending sessions; one process keeps them in memory.
  const sessions = deps.store.scheduledRecordings
    ? new SharedSessionRecorder(deps.store.scheduledRecordings, deps.options.sessionDelayMs)
    : new SessionRecorder(deps.store, deps.options.sessionDelayMs);
  // Instances sharing the store share the lock through it; one process keeps it in memory.
  const locks = deps.store.turnLeases
    ? new LeasedLocks(deps.store.turnLeases, {
        leaseMs: deps.options.turnLeaseMs ?? DEFAULT_TURN_LEASE_MS,
        waitingTurns: deps.options.waitingTurns,
      })
    : new KeyedMutex(deps.options.waitingTurns);
  const turns = new TurnService(deps, sessions, locks);
  await turns.recoverInterruptedTurns();
  // A delete on another instance ends the turn running here (and one here, there).
  const interrupts = deps.store.turnInterrupts;
  const unsubscribe = interrupts
    ? await interrupts.subscribe((id, published) => {
        const code = interruptCode(published);
        turns.interrupt(id, code);
        if (code === "AGENT_API_CONVERSATION_DELETED") void evictDeleted(id);
      })
    : undefined;
  // This instance's copy of a conversation deleted elsewhere goes once the delete is done: under the
  // conversation's lock, which the deleting instance holds until its rows and shared files are gone, so no
  // turn (of a conversation re-created with the id) runs here meanwhile.
  async function evictDeleted(id: string): Promise<void> {
    try {
      const release = await locks.acquire(id);
      try {
        await deps.sandbox.evictLocal(id);
      } finally {
        release();
      }
    } catch {
      // Only a cache is left behind (the lock's waiting line was full, the disk refused): the shared set is
      // gone, so no turn ever restores from it, and the next turn of a re-created id replaces it.
    }
  }
  // Instances tell each other the interrupt's code; each says it in the words of its own catalogue.
  const interruptTurn = (id: string, code: InterruptCode) => {
    turns.interrupt(id, code);
    void interrupts?.publish(id, code).catch(() => undefined);
  };
  return {
    conversations: new ConversationService(deps, sessions, locks, interruptTurn),
    turns,
    flows: new FlowService(deps, turns, isFlowKey),
    models: (caller, agent) => listModels(findAgent(deps.config, caller, agent)),
    live: () => {
      const turnsLive = turns.live();
      return {
        runningTurns: turnsLive.running,
        turnTimers: turnsLive.turnTimers,
        conversationLocks: locks.size,
        waitingTurns: locks.waiting,
        pendingRecordings: sessions.pending,
      };
    },
    close: async () => {
      await unsubscribe?.();
      await sessions.close();
    },
  };
}

export type { Caller, ServiceDeps, ServiceOptions } from "./types.ts";
