/** The service layer: the API's rules over the store, sandbox and engine, with no knowledge of HTTP. */

import type { Coordination } from "../coordination/index.ts";
import { type InterruptCode, interruptCode } from "../turn/failure.ts";
import { findAgent, listModels } from "./agents.ts";
import { ConversationService } from "./conversations.ts";
import { DEFAULT_DISK_BYTES_PER_WORKSPACE, DiskShares } from "./disk-shares.ts";
import { type FlowKeyCheck, FlowService } from "./flows.ts";
import { DELETE_DONE, evictIfStale, reconcileLocalCopies } from "./local-copies-reconcile.ts";
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

export interface ServiceLive {
  runningTurns: number;
  turnTimers: number;
  conversationLocks: number;
  /** Turns waiting behind another turn of their conversation. */
  waitingTurns: number;
  pendingRecordings: number;
}

/** `coordination`: one instance or several, decided once at start (coordination/index.ts). */
export async function createService(
  given: ServiceDeps,
  isFlowKey: FlowKeyCheck,
  coordination: Coordination,
): Promise<Service> {
  const deps: ServiceDeps = {
    ...given,
    diskShares:
      given.diskShares ??
      new DiskShares(given.store, given.sandbox, {
        bytesPerWorkspace: given.options.diskBytesPerWorkspace ?? DEFAULT_DISK_BYTES_PER_WORKSPACE,
      }),
  };
  const { locks, sessions, interrupts } = coordination;
  const turns = new TurnService(deps, coordination);
  await turns.recoverInterruptedTurns();
  const reconcile = { store: deps.store, sandbox: deps.sandbox, locks };
  // A delete on another instance ends the turn running here (and one here, there), and this instance's copy of
  // the conversation goes once the delete is done (evictIfStale waits for the conversation's lock, which the
  // deleting instance holds until its rows and shared files are gone). What was deleted while the listener was
  // away is found by reconciling the local copies with the database once it listens again.
  const unsubscribe = await interrupts.subscribe(
    (id, published) => {
      if (published === DELETE_DONE) {
        void evictIfStale(reconcile, id).catch(ignore);
        return;
      }
      const code = interruptCode(published);
      turns.interrupt(id, code);
      if (code === "AGENT_API_CONVERSATION_DELETED") void evictIfStale(reconcile, id).catch(ignore);
    },
    () => void reconcileLocalCopies(reconcile).catch(ignore),
  );
  // Deletes this instance missed while it was down.
  await reconcileLocalCopies(reconcile);
  // Instances tell each other the interrupt's code; each says it in the words of its own catalogue.
  const interruptTurn = (id: string, code: InterruptCode) => {
    turns.interrupt(id, code);
    void interrupts.publish(id, code).catch(() => undefined);
  };
  return {
    conversations: new ConversationService(deps, sessions, locks, interruptTurn, (id) => {
      void interrupts.publish(id, DELETE_DONE).catch(ignore);
    }),
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
      await unsubscribe();
      await sessions.close();
    },
  };
}

/**
 * A failed eviction leaves only a cache behind (the lock's waiting line was full, the disk refused): the shared
 * set is gone, no turn ever takes the copy (the sandbox's claim checks its owner), and the next reconcile retries.
 */
function ignore(): void {}

export type { Caller, ServiceDeps, ServiceOptions } from "./types.ts";
