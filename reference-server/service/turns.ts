/**
 * Send-message: everything decided before the stream opens (agent, role, delivery, conversation id
 * resolution, model and automation) happens in `prepare`, which throws ApiError for a status; the turn
 * itself runs in the turn wing (reference-server/turn/: run, events, commit, failure, interruption), which
 * `PreparedTurn.events()` hands to the HTTP layer.
 */
import type { components } from "@agent-api/client/api-types";
import type { AgentConfig, AutomationConfig } from "../config/types.ts";
import type { Coordination } from "../coordination/index.ts";
import type { ConversationLocks } from "../coordination/leased-locks.ts";
import { conversationNotFound, forbidden, notImplemented } from "../errors/catalogue.ts";
import { newConversation } from "../store/new-conversation.ts";
import type { ConversationRecord } from "../store/types.ts";
import type { TurnContext } from "../turn/context.ts";
import type { TurnStreamItem } from "../turn/events.ts";
import type { InterruptCode } from "../turn/failure.ts";
import { newConversationId } from "../turn/ids.ts";
import { recordInterrupted, TurnInterrupted } from "../turn/interruption.ts";
import { findAutomation, type TurnPlan, withAutomationPrompt } from "../turn/plan.ts";
import { runTurn } from "../turn/run.ts";
import { checkModel, findAgent } from "./agents.ts";
import { checkConversationId, newestUserText, systemText, titleFrom } from "./prompt.ts";
import type { Caller, ServiceDeps } from "./types.ts";
import { canSee, isOwner } from "./visibility.ts";

type SendMessageRequest = components["schemas"]["SendMessageRequest"];

export interface SendInput {
  caller: Caller;
  agent: string;
  body: SendMessageRequest;
  /** Model-routed send: `body.model` selected the agent, so it is not a model id. */
  routed: boolean;
  /** A new conversation is hidden from lists (a flow's step turns; `metadata.test` does the same). */
  hidden?: boolean;
}

/** A turn whose status is decided (200) and whose events are yet to run. Iterate `events` exactly once. */
export interface PreparedTurn {
  conversationId: string;
  /** Runs the turn; always drain it to the end (the transcript is written before it finishes). */
  events(signal: AbortSignal): AsyncGenerator<TurnStreamItem, void, void>;
}

const WORKSPACE_ROLES_THAT_RUN_TURNS = new Set(["Admin", "Builder", "Operator"]);

export class TurnService {
  readonly #deps: ServiceDeps;
  readonly #locks: ConversationLocks;
  /** Whether another instance may have left a turn of a conversation unfinished (it died during it). */
  readonly #othersMayLeaveTurns: boolean;
  /** What the turn wing (reference-server/turn/) runs a turn with. */
  readonly #turn: TurnContext;

  constructor(deps: ServiceDeps, coordination: Coordination) {
    const { locks, sessions } = coordination;
    this.#deps = deps;
    this.#locks = locks;
    this.#othersMayLeaveTurns = coordination.kind === "shared";
    this.#turn = {
      store: deps.store,
      engine: deps.engine,
      sandbox: deps.sandbox,
      sessions,
      options: deps.options,
      now: () => this.#now(),
      running: new Map(),
      liveTimers: { count: 0 },
    };
  }

  #now(): string {
    return (this.#deps.now?.() ?? new Date()).toISOString();
  }

  /** What turns hold while they run; all zero when no turn runs (nothing a turn made outlives it). */
  live(): { running: number; turnTimers: number } {
    return { running: this.#turn.running.size, turnTimers: this.#turn.liveTimers.count };
  }

  /** Ends the turn running on a conversation (a delete): it stops and finishes with an `error` event. */
  interrupt(conversationId: string, code: InterruptCode): void {
    this.#turn.running.get(conversationId)?.abort(new TurnInterrupted(code));
  }

  /** Ends every running turn (a shutdown past its grace period): each finishes with an `error` event. */
  interruptAll(code: InterruptCode): void {
    for (const controller of this.#turn.running.values()) controller.abort(new TurnInterrupted(code));
  }

  /**
   * Turns a previous process acknowledged and did not live to finish, recorded like a turn whose client
   * disconnected: the user's message kept, an error event, the session untouched. Run once at start-up,
   * before any turn can begin here. Where instances share the store, a turn whose lock another instance
   * holds is running there and is left alone (the next turn on it records it, see prepare).
   */
  async recoverInterruptedTurns(): Promise<number> {
    let recovered = 0;
    for (const pending of await this.#deps.store.listPendingTurns()) {
      // Before any turn begins here the lock is free unless another instance's turn holds it.
      const release = await this.#locks.tryAcquire(pending.conversationId);
      if (release === undefined) continue;
      try {
        if (await recordInterrupted(this.#deps.store, pending.conversationId, release.fence, this.#now()))
          recovered++;
      } finally {
        release();
      }
    }
    return recovered;
  }

  async prepare(input: SendInput): Promise<PreparedTurn> {
    const { caller, body } = input;
    const agent = findAgent(this.#deps.config, caller, input.agent);
    if (!WORKSPACE_ROLES_THAT_RUN_TURNS.has(caller.role)) throw forbidden("A Viewer key cannot run a turn");
    const metadata = body.metadata ?? {};
    if (metadata.delivery === "async") throw notImplemented("Only sync delivery is supported");
    // An empty model is no model: the defaults apply.
    const bodyModel = input.routed || body.model === "" ? undefined : body.model;
    if (bodyModel !== undefined) checkModel(agent, bodyModel, "model");
    const userText = newestUserText(body.messages);
    const conversationId = metadata.conversation_id ?? newConversationId();
    if (metadata.conversation_id !== undefined)
      checkConversationId(conversationId, "metadata.conversation_id");

    // The caller's right to the conversation is decided before its lock is asked for: a send it may not make
    // never waits on, queues on or fills anything of the conversation, so it costs the owner nothing and its
    // answer does not tell when the owner was busy. (Decided again under the lock: it may change meanwhile.)
    const existing = await this.#deps.store.getConversation(conversationId);
    if (existing) checkWritable(existing, caller, agent.name);
    // A workspace at its disk share writes no more turns (its reads and deletes still work); what the turn
    // adds beyond its prompt is measured once it ran.
    const disk = await this.#deps.diskShares?.reserve(caller.workspaceId, Buffer.byteLength(userText));
    let release: Awaited<ReturnType<ConversationLocks["acquire"]>>;
    try {
      release = await this.#locks.acquire(conversationId, caller.admissionKey ?? "");
    } catch (error) {
      disk?.done(false);
      throw error;
    }
    try {
      // A turn acknowledged by an instance that died during it: recorded before this one begins.
      if (this.#othersMayLeaveTurns)
        await recordInterrupted(
          this.#deps.store,
          conversationId,
          release.fence,
          this.#now(),
          release.tookOver ? "lease lost" : "server stopped",
        );
      const turnAutomation = findAutomation(agent, metadata.automation);
      const record = await this.#resolveConversation(caller, agent, conversationId, {
        // A new conversation's title comes from the prompt its first turn runs with.
        prompt: withAutomationPrompt(userText, turnAutomation),
        automation: turnAutomation,
        hidden:
          input.hidden === true ||
          (metadata.test !== undefined && metadata.test !== false && metadata.test !== null),
      });
      // Model: the body, then this turn's automation, then the defaults a fork recorded (its model, then its
      // automation's), then the agent's default.
      const inherited = findAutomation(agent, record.defaultAutomation ?? undefined);
      const plan: TurnPlan = {
        agent,
        record,
        prompt: withAutomationPrompt(userText, turnAutomation ?? inherited),
        model:
          bodyModel ?? turnAutomation?.model ?? record.defaultModel ?? inherited?.model ?? agent.defaultModel,
        system: systemText(body.system),
        metadata,
        release,
        caller,
      };
      // What this turn's request named is what a fork of the conversation inherits from now on.
      await this.#deps.store.updateConversation(record.id, {
        turnModel: bodyModel ?? null,
        turnAutomation: turnAutomation?.name ?? null,
      });
      // The user's message is durable before the 200 goes out: a process that dies during the turn leaves
      // it behind, and the next start records the turn as interrupted (recoverInterruptedTurns).
      await this.#deps.store.beginTurn({
        conversationId: record.id,
        turnIndex: record.turnCount,
        text: plan.prompt,
        authorMemberId: caller.memberId,
        authorName: caller.memberName,
        startedAt: this.#now(),
      });
      return {
        conversationId,
        events: (signal) => settledAfter(runTurn(this.#turn, plan, signal), () => disk?.done(true)),
      };
    } catch (error) {
      disk?.done(false);
      release();
      throw error;
    }
  }

  /** The API's conversation id resolution table (the caller holds the conversation's lock). */
  async #resolveConversation(
    caller: Caller,
    agent: AgentConfig,
    id: string,
    creation: { prompt: string; automation: AutomationConfig | undefined; hidden: boolean },
  ): Promise<ConversationRecord> {
    const existing = await this.#deps.store.getConversation(id);
    if (existing) {
      checkWritable(existing, caller, agent.name);
      return existing;
    }
    const at = this.#now();
    const record = newConversation({
      id,
      workspaceId: caller.workspaceId,
      agent: agent.name,
      ownerMemberId: caller.memberId,
      automation: creation.automation?.name ?? null,
      title: titleFrom(creation.prompt),
      hidden: creation.hidden,
      createdAt: at,
    });
    return { ...record, generation: await this.#deps.store.insertConversation(record) };
  }
}

/**
 * The API's id resolution for an existing conversation: the caller's own continues it; another workspace's or
 * agent's, or a member's private one, is 404 (never leaks); one shared with the caller is 403.
 */
function checkWritable(existing: ConversationRecord, caller: Caller, agent: string): void {
  if (existing.workspaceId !== caller.workspaceId || existing.agent !== agent) throw conversationNotFound();
  if (isOwner(existing, caller)) return;
  if (canSee(existing, caller, agent))
    throw forbidden("This conversation is shared read-only; fork it to continue");
  throw conversationNotFound();
}

/** The turn's events, then `settle` once they end however they end (the turn's disk reservation). */
async function* settledAfter<T>(
  events: AsyncGenerator<T, void, void>,
  settle: () => void,
): AsyncGenerator<T, void, void> {
  try {
    yield* events;
  } finally {
    settle();
  }
}
