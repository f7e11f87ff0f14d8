/** The service layer: the seed's rules over the store, sandbox and engine, with no knowledge of HTTP. */
import { findAgent, listModels } from "./agents.ts";
import { ConversationService } from "./conversations.ts";
import { FlowService } from "./flows.ts";
import { KeyedMutex } from "./locks.ts";
import { SessionRecorder } from "./sessions.ts";
import { TurnService } from "./turns.ts";
import type { Caller, ServiceDeps } from "./types.ts";

export interface Service {
  conversations: ConversationService;
  turns: TurnService;
  flows: FlowService;
  models(caller: Caller, agent: string): ReturnType<typeof listModels>;
  /** What is held per running turn or per conversation; every figure returns to 0 once turns are over. */
  live(): ServiceLive;
  close(): void;
}

export interface ServiceLive {
  runningTurns: number;
  turnTimers: number;
  conversationLocks: number;
  /** Turns waiting behind another turn of their conversation. */
  waitingTurns: number;
  pendingRecordings: number;
}

export function createService(
  deps: ServiceDeps,
  isFlowKey: (flowId: string, key: string) => boolean,
): Service {
  const sessions = new SessionRecorder(deps.store, deps.options.sessionDelayMs);
  const locks = new KeyedMutex(deps.options.waitingTurns);
  const turns = new TurnService(deps, sessions, locks);
  turns.recoverInterruptedTurns();
  return {
    conversations: new ConversationService(deps, sessions, locks, (id, reason) =>
      turns.interrupt(id, reason),
    ),
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
    close: () => sessions.close(),
  };
}

export type { Caller, ServiceDeps, ServiceOptions } from "./types.ts";
