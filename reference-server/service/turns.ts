/**
 * Send-message: everything decided before the stream opens (agent, role, delivery, conversation id
 * resolution, model and automation) happens in `prepare`, which throws ApiError for a status; the turn
 * itself runs in `PreparedTurn.events()`, where any failure becomes a coded TurnFailed item (turn-failure.ts):
 * the SSE `error` event on the wire, the code in the log and the transcript.
 */
import { randomUUID } from "node:crypto";
import type { components } from "@agent-api/client/api-types";
import type { AgentConfig, AutomationConfig } from "../config/types.ts";
import type { AgentEvent, TurnOutcome, TurnUsage } from "../engine/types.ts";
import { newConversation } from "../store/new-conversation.ts";
import {
  type ConversationRecord,
  type MessageRecord,
  type SessionRecord,
  TurnLeaseLostError,
  type TurnWrite,
} from "../store/types.ts";
import { checkModel, findAgent } from "./agents.ts";
import { newConversationId, newSessionId } from "./conversations.ts";
import { ApiError, conversationNotFound, forbidden, notImplemented } from "./errors.ts";
import { type LoadedHistory, loadHistory } from "./history-loader.ts";
import { LazySandbox } from "./lazy-sandbox.ts";
import type { ConversationLocks, Release } from "./leased-locks.ts";
import { checkConversationId, newestUserText, systemText, titleFrom } from "./prompt.ts";
import type { SessionRecordings } from "./session-recorder.ts";
import {
  blockEvents,
  isOutput,
  messageEnd,
  messageStart,
  type TurnStreamItem,
  usageFor,
} from "./stream-events.ts";
import {
  failureOf,
  fixedFailure,
  type InterruptCode,
  storeFailureOf,
  type TurnFailure,
} from "./turn-failure.ts";
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

interface TurnPlan {
  agent: AgentConfig;
  record: ConversationRecord;
  prompt: string;
  model: string;
  system: string | undefined;
  metadata: NonNullable<SendMessageRequest["metadata"]>;
  release: Release;
  caller: Caller;
}

/** What a finished (or failed) turn hands to the commit. */
interface TurnResult {
  agentEvents: AgentEvent[];
  outcome: TurnOutcome | undefined;
  resumedSessionId: string | null;
  failure: TurnFailure | undefined;
  /** Repo agents with read_only false: the commit pushed to the default branch. */
  pushedCommit: string | null;
}

const WORKSPACE_ROLES_THAT_RUN_TURNS = new Set(["Admin", "Builder", "Operator"]);

export class TurnService {
  readonly #deps: ServiceDeps;
  readonly #sessions: SessionRecordings;
  readonly #locks: ConversationLocks;
  /** The turn running on each conversation (turns of one conversation are serialised), to end it early. */
  readonly #running = new Map<string, AbortController>();
  /** Turn time-out timers set and not yet cleared or fired (checked by tests: 0 once turns are over). */
  readonly #liveTimers = { count: 0 };

  constructor(deps: ServiceDeps, sessions: SessionRecordings, locks: ConversationLocks) {
    this.#deps = deps;
    this.#sessions = sessions;
    this.#locks = locks;
  }

  #now(): string {
    return (this.#deps.now?.() ?? new Date()).toISOString();
  }

  /** What turns hold while they run; all zero when no turn runs (nothing a turn made outlives it). */
  live(): { running: number; turnTimers: number } {
    return { running: this.#running.size, turnTimers: this.#liveTimers.count };
  }

  /** Ends the turn running on a conversation (a delete): it stops and finishes with an `error` event. */
  interrupt(conversationId: string, code: InterruptCode): void {
    this.#running.get(conversationId)?.abort(new TurnInterrupted(fixedFailure(code)));
  }

  /** Ends every running turn (a shutdown past its grace period): each finishes with an `error` event. */
  interruptAll(code: InterruptCode): void {
    for (const controller of this.#running.values())
      controller.abort(new TurnInterrupted(fixedFailure(code)));
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
      const release = this.#locks.tryAcquire
        ? await this.#locks.tryAcquire(pending.conversationId)
        : undefined;
      if (this.#locks.tryAcquire && release === undefined) continue;
      try {
        if (await this.#recordInterrupted(pending.conversationId, release?.fence)) recovered++;
      } finally {
        release?.();
      }
    }
    return recovered;
  }

  /** Records the conversation's pending turn, if any, as interrupted (the caller holds its lock). */
  async #recordInterrupted(conversationId: string, fence: number | undefined): Promise<boolean> {
    const store = this.#deps.store;
    const pending = await store.getPendingTurn(conversationId);
    if (!pending) return false;
    const current = await store.getConversation(pending.conversationId);
    if (!current) return false;
    await store.commitTurn({
      conversationId: current.id,
      turnIndex: current.turnCount,
      messages: [
        {
          role: "user",
          text: pending.text,
          authorMemberId: pending.authorMemberId,
          authorName: pending.authorName,
          isCompactSummary: false,
        },
      ],
      events: [errorRecord(fixedFailure("AGENT_API_SERVER_STOPPED"))],
      compaction: null,
      at: this.#now(),
      fence,
    });
    return true;
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
    const release = await this.#locks.acquire(conversationId, caller.admissionKey ?? "");
    try {
      // A turn acknowledged by an instance that died during it: recorded before this one begins.
      if (this.#locks.tryAcquire) await this.#recordInterrupted(conversationId, release.fence);
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
      return { conversationId, events: (signal) => this.#run(plan, signal) };
    } catch (error) {
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

  async *#run(plan: TurnPlan, clientSignal: AbortSignal): AsyncGenerator<TurnStreamItem, void, void> {
    const { record, metadata } = plan;
    const store = this.#deps.store;
    const options = this.#deps.options;
    const interrupt = new AbortController();
    this.#running.set(record.id, interrupt);
    // Another instance took the lease (this one could not renew it in time): the turn stops now and says why,
    // rather than running on beside the other instance's turn until its commit is refused.
    const lost = plan.release.lost;
    const onLeaseLost = () => interrupt.abort(new TurnInterrupted(storeFailureOf(new TurnLeaseLostError())));
    if (lost?.aborted) onLeaseLost();
    else lost?.addEventListener("abort", onLeaseLost, { once: true });
    const cut = new TurnSignal(clientSignal, interrupt.signal, options.turnTimeoutMs, this.#liveTimers);
    const { signal } = cut;
    // A newer turn supersedes a recording still pending from an earlier one.
    await this.#sessions.cancel(record.id);
    const resumedSessionId = record.agentSessionId;
    const session = resumedSessionId ? await store.getSession(resumedSessionId) : undefined;
    const history = loadHistory(session?.context);
    const modelConfig = plan.agent.models.find((m) => m.id === plan.model);
    const streamToolCalls = metadata.stream_tool_calls === true;
    const agentEvents: AgentEvent[] = [];
    const readOnly = metadata.read_only !== false;
    const isolated = metadata.isolated === true;
    const sandbox = new LazySandbox(
      () =>
        this.#deps.sandbox.acquire({
          conversationId: record.id,
          generation: record.generation,
          agent: {
            workspaceId: plan.agent.workspaceId,
            name: plan.agent.name,
            kind: plan.agent.kind,
            secrets: plan.agent.secrets,
            repoUrl: plan.agent.repoUrl,
            filesDir: plan.agent.filesDir,
          },
          isolated,
          readOnly,
          attachments: metadata.attachments,
          // Files are saved to a shared store only while this turn still holds the conversation's lease.
          fence: plan.release.fence,
        }),
      // Ends a running tool with the turn (disconnect, time-out, delete), whatever the engine passes.
      signal,
    );
    let outcome: TurnOutcome | undefined;
    let failure: TurnFailure | undefined;
    let pushedCommit: string | null = null;
    // message_start waits for the upstream's first message_start, so it carries the input usage (only
    // keep-alive comments go before it); message_delta carries the turn's sums. Without it, it goes first.
    let started = false;
    const start = (usage?: TurnUsage) => {
      started = true;
      return messageStart(`msg_${randomUUID().replaceAll("-", "")}`, plan.model, usage);
    };
    try {
      // Attachments are written before the turn starts: the agent is told which files arrived.
      const hasAttachments = Array.isArray(metadata.attachments) && metadata.attachments.length > 0;
      const attachments = hasAttachments ? (await sandbox.ready()).attachments : [];
      const run = this.#deps.engine.runTurn({
        prompt: plan.prompt,
        instructions: plan.agent.instructions,
        system: plan.system,
        model: plan.model,
        upstreamModel: modelConfig?.upstream ?? plan.model,
        history: history.messages,
        historyTokens: history.tokens,
        attachments,
        environment: { agentKind: plan.agent.kind, isolated, readOnly },
        // Offered even where no sandbox can be built: each call is then refused with what failed and the fix,
        // which the model relays and a client streaming tool calls sees, rather than a bare "no tools".
        tools: sandbox.tools,
        compactionBudgetTokens: options.compactionBudgetTokens,
        thinkingBudgetTokens: modelConfig?.thinkingBudgetTokens ?? plan.agent.thinkingBudgetTokens,
        maxTokens: modelConfig?.maxTokens,
        signal,
      });
      let index = 0;
      // Quiet stretches (the upstream working, a tool running) are covered by the SSE writer's keep-alives.
      for (;;) {
        const step = await run.next();
        if (step.done) {
          outcome = step.value;
          break;
        }
        if (step.value.kind === "input_usage") {
          if (!started) yield start(step.value.usage);
          continue;
        }
        if (!started) yield start();
        agentEvents.push(step.value);
        const events = blockEvents(step.value, index, streamToolCalls);
        if (events.length > 0) index++;
        yield* events;
      }
      // A turn cut short is a failure whatever the engine returned: it must not move the session.
      if (signal.aborted) failure = cut.why();
    } catch (error) {
      failure = signal.aborted ? cut.why() : failureOf(error);
    }
    try {
      // Always awaited before the lock is released: it ends whatever process of the turn still runs.
      const finished = await sandbox.finish(failure === undefined ? "completed" : "failed");
      pushedCommit = finished?.pushedCommit ?? null;
    } catch (error) {
      failure ??= failureOf(error);
    }
    try {
      await this.#commit(plan, { agentEvents, outcome, resumedSessionId, failure, pushedCommit });
    } catch (error) {
      failure ??= storeFailureOf(error);
    } finally {
      cut.dispose();
      lost?.removeEventListener("abort", onLeaseLost);
      if (this.#running.get(record.id) === interrupt) this.#running.delete(record.id);
      plan.release();
    }
    if (!started) yield start();
    if (failure !== undefined || outcome === undefined) {
      yield { type: "turn_failed", failure: failure ?? fixedFailure("AGENT_API_TURN_NO_OUTCOME") };
      return;
    }
    const price = modelConfig?.price;
    yield* messageEnd(usageFor(outcome.usage, price), outcome.stopReason);
  }

  /** Writes the turn to the transcript and moves the session pointer as the API's states table says. */
  async #commit(plan: TurnPlan, result: TurnResult): Promise<void> {
    const { agentEvents, outcome, resumedSessionId, failure } = result;
    const store = this.#deps.store;
    const current = await store.getConversation(plan.record.id);
    // The same conversation, not a new one that took the id after a delete: never write into another's.
    if (
      !current ||
      current.generation !== plan.record.generation ||
      current.createdAt !== plan.record.createdAt ||
      current.ownerMemberId !== plan.record.ownerMemberId ||
      current.workspaceId !== plan.record.workspaceId
    )
      throw new ApiError("AGENT_API_CONVERSATION_DELETED", "the conversation was deleted during the turn");
    const completed = failure === undefined;
    const at = this.#now();
    const messages: Array<Omit<MessageRecord, "conversationId" | "turnIndex" | "seq" | "createdAt">> = [];
    // A turn that did not complete did not replace its context, so its compaction did not happen either.
    const compaction = completed ? agentEvents.find((e) => e.kind === "compaction") : undefined;
    if (compaction?.kind === "compaction") {
      // A user message as the API has it, so it carries an author: the member whose turn compacted.
      messages.push({
        role: "user",
        text: compaction.summary,
        authorMemberId: plan.caller.memberId,
        authorName: plan.caller.memberName,
        isCompactSummary: true,
      });
    }
    messages.push({
      role: "user",
      text: plan.prompt,
      authorMemberId: plan.caller.memberId,
      authorName: plan.caller.memberName,
      isCompactSummary: false,
    });
    const answer = agentEvents.flatMap((e) => (e.kind === "text" ? [e.text] : [])).join("\n\n");
    if (answer !== "")
      messages.push({ role: "assistant", text: answer, ...system(), isCompactSummary: false });
    const events = agentEvents.map(rawEvent);
    if (result.pushedCommit) events.push({ type: "repo_push", commit: result.pushedCommit });
    if (failure !== undefined) events.push(errorRecord(failure));
    // The API's states table: output records a session (the pointer a few seconds later; an existing one
    // is updated in place); a resumed turn without output clears the pointer so the next turn starts clean.
    // A turn that failed or was cut short moves nothing: it is stored with its error, the session kept.
    const producedOutput = agentEvents.some(isOutput);
    // Whether the session is still there; its history was read at the turn's start and is not read again.
    const resumed = resumedSessionId !== null && (await store.hasSession(resumedSessionId));
    let session: TurnWrite["session"];
    let toRecord: SessionRecord | undefined;
    if (completed && producedOutput && outcome !== undefined) {
      const context: LoadedHistory = { messages: outcome.history, tokens: outcome.historyTokens };
      if (resumed)
        session = { append: { id: resumedSessionId as string, history: context, kept: outcome.keptHistory } };
      else
        toRecord = {
          id: newSessionId(),
          conversationId: current.id,
          context,
          createdAt: at,
          updatedAt: at,
          turnIndex: current.turnCount,
        };
    } else if (completed && !producedOutput && resumedSessionId !== null) {
      session = { clearPointer: true };
    }
    await store.commitTurn({
      conversationId: current.id,
      turnIndex: current.turnCount,
      messages,
      events,
      compaction: compaction?.kind === "compaction" ? { summary: compaction.summary } : null,
      at,
      session,
      fence: plan.release.fence,
    });
    if (toRecord) await this.#sessions.recordLater(toRecord);
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

function system(): { authorMemberId: null; authorName: null } {
  return { authorMemberId: null, authorName: null };
}

/** The turn's prompt: the user's text, or the automation's stored prompt when the text is empty. */
function withAutomationPrompt(userText: string, automation: AutomationConfig | undefined): string {
  return userText.trim() === "" && automation ? automation.prompt : userText;
}

function findAutomation(agent: AgentConfig, name: string | undefined): AutomationConfig | undefined {
  if (name === undefined) return undefined;
  // An unknown (or inactive) automation name is ignored, as the API says: no error.
  return agent.automations.find((a) => a.name === name && a.active);
}

/** The transcript's raw `events` element for an agent event (their shape is "not shown" by the API). */
function rawEvent(event: AgentEvent): Record<string, unknown> {
  if (event.kind === "tool_result") {
    return {
      type: "tool_result",
      tool_use_id: event.toolUseId,
      content: event.content,
      is_error: event.isError,
    };
  }
  const { kind, ...rest } = event;
  return { type: kind, ...rest };
}

/**
 * A failed turn's raw event in the transcript: the message its stream's `error` event carried, and the
 * catalogue code (the API leaves the raw events' shape to the server, unlike the stream's event).
 */
function errorRecord(failure: TurnFailure): Record<string, unknown> {
  return { type: "error", message: failure.message, code: failure.code };
}

/**
 * Why a turn was ended early by the server (a delete, a shutdown, its lease lost), as opposed to a time-out or a
 * client leaving.
 */
class TurnInterrupted extends Error {
  readonly failure: TurnFailure;

  constructor(failure: TurnFailure) {
    super(failure.message);
    this.failure = failure;
  }
}

/**
 * The signal that ends a turn: its client leaving, an interrupt (a delete), or its time-out.
 *
 * Neither `AbortSignal.timeout` nor `AbortSignal.any`: Node keeps a timeout signal, and a composite signal
 * that has an abort listener, in a set of signals it never collects until they abort or lose their
 * listeners, so every turn left a Timeout, signals and their weak cells alive for the full time-out
 * (10 minutes) after it ended, ~250 MB at 900 turns/s. Here the timer is cleared and the listeners
 * removed when the turn ends, so nothing of the turn stays reachable.
 */
class TurnSignal {
  readonly #controller = new AbortController();
  readonly #client: AbortSignal;
  readonly #interrupt: AbortSignal;
  readonly #live: { count: number };
  #timer: NodeJS.Timeout | undefined;
  #timedOut = false;
  readonly #onAbort = (event: Event) => this.#controller.abort((event.target as AbortSignal).reason);

  constructor(client: AbortSignal, interrupt: AbortSignal, timeoutMs: number, live: { count: number }) {
    this.#client = client;
    this.#interrupt = interrupt;
    this.#live = live;
    if (client.aborted) this.#controller.abort(client.reason);
    client.addEventListener("abort", this.#onAbort, { once: true });
    interrupt.addEventListener("abort", this.#onAbort, { once: true });
    live.count++;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      live.count--;
      this.#timedOut = true;
      this.#controller.abort(new DOMException("The turn timed out", "TimeoutError"));
    }, timeoutMs);
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Why the turn was cut short, for its error event. */
  why(): TurnFailure {
    if (this.#interrupt.aborted && this.#interrupt.reason instanceof TurnInterrupted)
      return this.#interrupt.reason.failure;
    if (this.#timedOut) return fixedFailure("AGENT_API_TURN_TIMED_OUT");
    if (this.#client.aborted) return fixedFailure("AGENT_API_CLIENT_DISCONNECTED");
    return fixedFailure("AGENT_API_TURN_INTERRUPTED");
  }

  dispose(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#live.count--;
    }
    this.#client.removeEventListener("abort", this.#onAbort);
    this.#interrupt.removeEventListener("abort", this.#onAbort);
  }
}
