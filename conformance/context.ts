/**
 * What a check works with: API calls that record every exchange and validate every JSON body and SSE
 * event against the bundled spec, turns read through the SSE grammar, run-unique ids, and fixtures
 * shared between checks. Conversations created here are remembered for the run's cleanup.
 */
import { randomBytes } from "node:crypto";
import type { components } from "@agent-api/client/api-types";
import type { OperationId } from "@agent-api/client/protocol";
import type { Dispatcher } from "undici";
import { describeDiagnosis, diagnoseForeignResponse, LARGE_BODY_BYTES } from "./deployment-errors.ts";
import {
  type ConnectionOptions,
  createDispatcher,
  type HttpRequest,
  type HttpResponse,
  httpRequest,
  REQUEST_TIMEOUT_MS,
} from "./http.ts";
import { isRecord } from "./json.ts";
import { CheckFailure, CheckSkip, DeploymentPrevented, excerpt, skip } from "./outcomes.ts";
import type { Exchange, FailureDetail, SuiteInputs } from "./records.ts";
import { TurnMeter } from "./run-cost.ts";
import type { SpecValidator } from "./spec-validator.ts";
import {
  carriesOutput,
  checkTurnStream,
  FRAMING_ONLY_CODES,
  replyText,
  type TurnStreamReading,
} from "./sse/grammar.ts";
import { type StreamTiming, type TurnTimeline, turnTimeline } from "./sse/timing.ts";
import { createToolResultsSeen, recordToolResults, type ToolResultsSeen } from "./tool-findings.ts";

export type { OperationId };

/** Shared by every context of one run. */
export interface RunState {
  inputs: SuiteInputs;
  runId: string;
  validator: SpecValidator;
  dispatcher: Dispatcher;
  nextId: number;
  fixtures: Map<string, Promise<FixtureOutcome<unknown>>>;
  /** Conversations this run created: id → who may delete it. */
  created: Map<string, { agent: string; key: string }>;
  /** Bound of one request (`--timeout-ms`). */
  requestTimeoutMs: number;
  /** How refusals for load (429, 503, 529) are retried before the check is skipped. */
  retry: RetryPolicy;
  /** `--ca` and `--http2`: a large upload's own connection is made the same way. */
  connection: ConnectionOptions;
  /** Every tool result the run's turns streamed: the deployment-level finding reads them. */
  toolResults: ToolResultsSeen;
  /** The turns sent so far, their tokens and cost, and `--max-turns`. */
  turns: TurnMeter;
  /**
   * Conversations a turn was sent into again after an error event naming load: what they kept of the failed
   * try is not shown, so how many turns they hold is no longer known.
   */
  resentInto: Set<string>;
  /** Every stream the named checks read, in the order they ended: sweeps/turns.ts judges each one's fields. */
  turnsRead: TurnRead[];
  /** Every conversation object the named checks read, and the deletes they saw succeed: sweeps/conversations.ts. */
  conversationsRead: ConversationRead[];
  /** Conversations a check sent turns into other than through `call` (an official client): their counts are not the run's to bound. */
  sentOutside: Set<string>;
  /** The model entries each agent's models list answered (200) with, for the sweeps: agent → entries. */
  modelsRead: Map<string, Array<Record<string, unknown>>>;
  /** Counts the starts and ends of calls, so the sweeps can tell which call ended before another began. */
  callSeq: number;
  /**
   * The longest the deployment was seen taking to record `agent_session_id` after a turn with output (ms from
   * the wait's start to the first non-null read); undefined until one was seen. waitForNoSession bounds its
   * wait by it.
   */
  sessionRecordedMs?: number;
}

/** What `nonce()` makes: each sent once, so where one shows up says where it came from (sweeps/titles.ts). */
export const NONCE_PATTERN = /\bn-[0-9a-f]{8}\b/g;

/** A conversation object a named check read (single fetch, list, transcript), or a delete it saw succeed. */
export type ConversationRead =
  | {
      kind: "read";
      madeBy: string;
      /** The route's request, as reports show it. */
      request: string;
      key?: string;
      conversation: Record<string, unknown>;
      started: number;
      ended: number;
    }
  /** A list page as answered (its conversations are reads of their own too). */
  | {
      kind: "list";
      madeBy: string;
      url: string;
      key?: string;
      conversations: Array<Record<string, unknown>>;
      started: number;
      ended: number;
    }
  /** A transcript as answered (its conversation object is a read of its own too). */
  | {
      kind: "transcript";
      madeBy: string;
      request: string;
      id: string;
      messages: Array<Record<string, unknown>>;
      started: number;
      ended: number;
    }
  /**
   * A share toggle sent, answered anyhow: the value when its body was exactly {"shared": <boolean>}
   * (undefined for any other body) and the status it got.
   */
  | {
      kind: "share-sent";
      id: string;
      shared?: boolean;
      /** Set false when the body held no boolean `shared` at all (`{}`, `{"shared": "true"}`, not an object). */
      namesValue?: boolean;
      status: number;
      started: number;
      ended: number;
    }
  /**
   * A wait for `agent_session_id` (waitForSession) that ended: `found` false when the bounded wait expired with
   * it still null (sweeps/sessions.ts judges that against the turn before it).
   */
  | { kind: "session-wait"; id: string; found: boolean; started: number; ended: number }
  /** A last compaction answered 200: whether it said `compacted` true. */
  | {
      kind: "compaction";
      madeBy: string;
      request: string;
      id: string;
      compacted: boolean;
      started: number;
      ended: number;
    }
  /** A delete the deployment answered 204 (or 200), a fork's child. */
  | { kind: "deleted" | "fork-child"; id: string; started: number; ended: number }
  /** A fork answered 200: what it was asked (`at_turn` when a number) and the fork result's `forked_at_turn`. */
  | {
      kind: "fork";
      madeBy: string;
      request: string;
      parent: string;
      child: string;
      atTurn?: number;
      forkedAt: unknown;
      started: number;
      ended: number;
    }
  /**
   * A turn sent into a conversation (answered anyhow, or not yet): its counts may have moved meanwhile.
   * `completed`: a 200 stream that reached message_stop with no error event, a turn the deployment ran.
   */
  | {
      kind: "turn-sent";
      id: string;
      completed?: boolean;
      /** A completed turn whose stream carried output (a block that is not blank text): its session is recorded. */
      output?: boolean;
      /** Sent with `metadata.isolated` true (a throwaway sandbox: whether it records a session is not shown). */
      isolated?: boolean;
      /** A send the check expected the API to refuse (TurnOptions.refusalExpected): never a known turn. */
      refusalExpected?: boolean;
      /** The status it was answered with (unset: no answer yet, or none). */
      status?: number;
      /** The text of the newest user element it sent (Send a message: the one read), when it could be read. */
      prompt?: string;
      /** The nonces anywhere in its body (older `messages` elements, `system`, attachment names and data). */
      bodyNonces?: string[];
      started: number;
      ended: number;
    };

/** A stream a named check read, with what is needed to say which turn it was. */
export interface TurnRead {
  /** The check (or shared fixture) that sent the turn. */
  madeBy: string;
  agent: string;
  routed: boolean;
  conversationId?: string;
  /** `metadata.conversation_id` as sent, and `X-Conversation-Id` as answered. */
  asked?: string;
  header?: string;
  streamToolCalls: boolean;
  reading: TurnStreamReading;
}

/**
 * Statuses that say "not now" rather than judge the request: rate limits (429), overload (503, and 529 of
 * the messages API). The API shows no rate limit, so such an answer proves nothing about a rule: the call
 * is retried, and a deployment that keeps refusing makes the check inconclusive (skipped), never failed.
 */
export const LOAD_REFUSAL_STATUSES: ReadonlySet<number> = new Set([429, 503, 529]);

export interface RetryPolicy {
  /** Retries after the first refusal. */
  attempts: number;
  /** Backoff without a usable Retry-After: baseMs, 2×baseMs, 4×baseMs, ... */
  baseMs: number;
  /** Longest wait honoured from a Retry-After header. */
  maxWaitMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 3, baseMs: 1_000, maxWaitMs: 10_000 };

/** How long to wait before retry number `attempt` (0-based): Retry-After (seconds or a date), capped; else backoff. */
export function retryDelayMs(
  retryAfter: string | undefined,
  attempt: number,
  policy: RetryPolicy,
  now = Date.now(),
): number {
  const backoff = Math.min(policy.baseMs * 2 ** attempt, policy.maxWaitMs);
  const value = retryAfter?.trim();
  if (!value) return backoff;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.min(Number(value) * 1000, policy.maxWaitMs);
  const date = Date.parse(value);
  if (Number.isNaN(date)) return backoff;
  return Math.min(Math.max(0, date - now), policy.maxWaitMs);
}

interface FixtureOutcome<T> {
  value?: T;
  error?: unknown;
  exchanges: Exchange[];
  schemaFailures: FailureDetail[];
}

export interface ApiResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  /** Parsed JSON body; undefined when the body is not JSON. */
  body: unknown;
  exchange: Exchange;
  /** When each part of an event stream arrived. */
  timing?: StreamTiming;
}

export interface CallOptions {
  key?: string | null;
  agent?: string;
  /** How the key header's name is spelled (header names are case-insensitive; default X-Api-Key). */
  keyHeader?: string;
}

export interface TurnOptions extends CallOptions {
  /** The user message: a string, or text blocks (sent as the `content` array). */
  prompt?: string | Array<Record<string, unknown>>;
  /** Replaces the whole `messages` array (for the messages-array rules). */
  messages?: unknown[];
  /** A conversation id, or omitted to let the server generate one. */
  conversationId?: string;
  streamToolCalls?: boolean;
  model?: string;
  system?: string;
  /** Extra `metadata` fields. */
  metadata?: Record<string, unknown>;
  /** Extra top-level body fields (ignored-field checks); `stream` defaults to true. */
  extraBody?: Record<string, unknown>;
  /** Send through the model-routed endpoint instead of the agent's own. */
  routed?: boolean;
  /** The turn is asked to fail: an error event is its point, never retried as transient trouble. */
  expectFailure?: boolean;
  /**
   * The send is one the API refuses (delivery "async", say): if anything answers it as a turn, the check that
   * sent it fails, and the sweeps take no turn as known to have run or not (a proxy may have answered it).
   */
  refusalExpected?: boolean;
}

export interface Turn {
  status: number;
  conversationId: string | undefined;
  headers: Record<string, string>;
  /** Present when the response was a 200 event stream. */
  reading?: TurnStreamReading;
  /** The text of the turn's text blocks. */
  text: string;
  response: ApiResponse;
  /** When the headers, each block and the end arrived (event streams only). */
  timeline?: TurnTimeline;
  /**
   * Transient trouble the turn still showed after its retries (an error event that names load): the turn
   * could not show the fact its check is about, which makes that check inconclusive.
   */
  trouble?: string;
  /**
   * How many times the turn was sent again after an error event naming load. What a conversation holds of
   * the failed tries (a user message, a turn counted) is not shown, so its history is no longer known.
   */
  resent?: number;
}

/** A conversation as the spec describes it (checks read one only after its body was validated). */
export type ConversationRecord = components["schemas"]["Conversation"];

const POLL_INTERVAL_MS = 250;
/** waitForNoSession's least wait, however fast the deployment records a session. */
const NO_SESSION_MIN_WAIT_MS = 1_000;

export { isRecord };

export function createRunState(
  inputs: SuiteInputs,
  validator: SpecValidator,
  dispatcher: Dispatcher,
  options: {
    requestTimeoutMs?: number;
    retry?: RetryPolicy;
    connection?: ConnectionOptions;
    maxTurns?: number;
  } = {},
): RunState {
  return {
    inputs,
    runId: randomBytes(4).toString("hex"),
    validator,
    dispatcher,
    nextId: 0,
    fixtures: new Map(),
    created: new Map(),
    requestTimeoutMs: options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS,
    retry: options.retry ?? DEFAULT_RETRY,
    connection: options.connection ?? {},
    toolResults: createToolResultsSeen(),
    turns: new TurnMeter(options.maxTurns),
    resentInto: new Set(),
    turnsRead: [],
    conversationsRead: [],
    modelsRead: new Map(),
    sentOutside: new Set(),
    callSeq: 0,
  };
}

export class CheckContext {
  readonly run: RunState;
  readonly inputs: SuiteInputs;
  readonly exchanges: Exchange[] = [];
  readonly schemaFailures: FailureDetail[] = [];
  readonly notes: string[] = [];
  readonly timelines: Array<{ label: string; timeline: TurnTimeline }> = [];

  /** The check or fixture this context serves; unset for the explorer's and the cleanup's, whose turns are not kept. */
  readonly madeBy?: string;

  constructor(run: RunState, madeBy?: string) {
    this.run = run;
    this.inputs = run.inputs;
    this.madeBy = madeBy;
  }

  /** A conversation id that is unique to this run and recognisable as the suite's. */
  newConversationId(): string {
    this.run.nextId++;
    return `acc-${this.run.runId}-${this.run.nextId}`;
  }

  /** A word an agent can only know if it was told it in this run. */
  nonce(): string {
    return `n-${randomBytes(4).toString("hex")}`;
  }

  note(message: string): void {
    if (!this.notes.includes(message)) this.notes.push(message);
  }

  /** Puts a turn's timeline in the check's result, for every report to show. */
  showTimeline(label: string, turn: Turn): void {
    if (turn.timeline) this.timelines.push({ label, timeline: turn.timeline });
  }

  agentUrl(agent = this.inputs.agent): string {
    return `${this.inputs.baseUrl}/api/agents/${encodeURIComponent(agent)}`;
  }

  conversationUrl(id: string, agent = this.inputs.agent): string {
    return `${this.agentUrl(agent)}/conversations/${encodeURIComponent(id)}`;
  }

  /**
   * One API call; the response is validated against the spec entry of `op`. A refusal for load (429, 503,
   * 529) is retried, honouring Retry-After; when the deployment keeps refusing, the check is skipped as
   * inconclusive (the refusals are in the report's exchanges, and are not validated against the spec).
   */
  async call(op: OperationId, req: HttpRequest & { refusalExpected?: boolean }): Promise<ApiResponse> {
    const policy = this.run.retry;
    const bodyBytes = requestBodyBytes(req);
    // The one place a turn is sent: each is counted, and refused once --max-turns is spent.
    const sendsTurn = op === "sendMessage" || op === "sendRoutedMessage";
    const started = ++this.run.callSeq;
    const prompt = sendsTurn ? newestPrompt(req) : undefined;
    const bodyNonces = sendsTurn
      ? [...new Set(JSON.stringify(req.json ?? null).match(NONCE_PATTERN) ?? [])]
      : [];
    let turnInto = sendsTurn
      ? this.#recordTurnSent(namedConversation(req), started, prompt, bodyNonces)
      : undefined;
    const isolated = sendsTurn && sentFlag(req, "isolated");
    if (turnInto && isolated) turnInto.isolated = true;
    if (turnInto && req.refusalExpected) turnInto.refusalExpected = true;
    try {
      const res = await this.#callOnce(op, req, policy, bodyBytes, sendsTurn, started);
      // A turn that named no conversation made one: its id comes with the answer, and reads of it made
      // while the turn ran (it exists from the turn's start) fall inside the turn's span.
      const made = res.headers["x-conversation-id"];
      if (sendsTurn && turnInto === undefined && made) {
        turnInto = this.#recordTurnSent(made, started, prompt, bodyNonces);
        if (turnInto && isolated) turnInto.isolated = true;
        if (turnInto && req.refusalExpected) turnInto.refusalExpected = true;
      }
      if (turnInto) {
        turnInto.status = res.status;
        turnInto.completed = res.status === 200 && ranToStop(res.text);
        if (turnInto.completed)
          turnInto.output = carriesOutput(
            checkTurnStream(res.text, { streamToolCalls: sentFlag(req, "stream_tool_calls") }).blocks,
          );
      }
      return res;
    } finally {
      if (turnInto) turnInto.ended = ++this.run.callSeq;
    }
  }

  /**
   * A turn into a conversation, recorded by whoever sends it (a check, a fixture, with any answer, or none):
   * the sweeps take a conversation's counts as known only between its turns. Its end stays unknown (infinite)
   * until an answer came.
   */
  #recordTurnSent(
    id: unknown,
    started: number,
    prompt: string | undefined,
    bodyNonces: string[],
  ): Extract<ConversationRead, { kind: "turn-sent" }> | undefined {
    if (typeof id !== "string") return undefined;
    const record: Extract<ConversationRead, { kind: "turn-sent" }> = {
      kind: "turn-sent",
      id,
      ...(prompt !== undefined && { prompt }),
      ...(bodyNonces.length > 0 && { bodyNonces }),
      started,
      ended: Number.POSITIVE_INFINITY,
    };
    this.run.conversationsRead.push(record);
    return record;
  }

  async #callOnce(
    op: OperationId,
    req: HttpRequest,
    policy: RetryPolicy,
    bodyBytes: number | undefined,
    sendsTurn: boolean,
    started: number,
  ): Promise<ApiResponse> {
    let res: HttpResponse;
    for (let attempt = 0; ; attempt++) {
      if (sendsTurn && !this.run.turns.take()) {
        skip(
          `the run's turn bound is spent (--max-turns ${this.run.turns.cost.maxTurns}): this check needed one more turn`,
          "input",
        );
      }
      try {
        res =
          bodyBytes !== undefined && bodyBytes >= LARGE_BODY_BYTES
            ? await this.#sendOnOwnConnection(req)
            : await httpRequest(this.run.dispatcher, req, this.run.requestTimeoutMs);
      } catch (error) {
        if (sendsTurn) this.run.turns.settle(null);
        throw error;
      }
      if (sendsTurn) {
        this.run.turns.settle({
          status: res.status,
          contentType: res.headers["content-type"],
          text: res.text,
        });
      }
      this.exchanges.push(res.exchange);
      if (!isLoadRefusal(res.status, res.text)) break;
      if (attempt >= policy.attempts) {
        this.note(`${req.method} ${pathOf(req.url)} was refused ${attempt + 1} times with ${res.status}`);
        skip(`the deployment kept refusing with ${res.status} (rate limit or overload): inconclusive`);
      }
      await sleep(retryDelayMs(res.headers["retry-after"], attempt, policy));
    }
    const foreign = diagnoseForeignResponse(res.status, res.headers, res.text, {
      method: req.method,
      url: req.url,
      bodyBytes,
    });
    if (foreign) {
      const said = describeDiagnosis(foreign);
      throw new DeploymentPrevented(said, foreign, [{ message: said, evidence: excerpt(res.text, 500) }]);
    }
    const contentType = res.headers["content-type"];
    if (!contentType?.startsWith("text/event-stream")) {
      for (const failure of this.run.validator.validateResponse(op, res.status, contentType, res.text)) {
        this.schemaFailures.push({
          ...failure,
          message: `${req.method} ${pathOf(req.url)} → ${failure.message}`,
        });
      }
    }
    let body: unknown;
    try {
      body = res.text === "" ? undefined : JSON.parse(res.text);
    } catch {
      body = undefined;
    }
    if (this.madeBy !== undefined) this.#recordConversations(op, req, res.status, body, started);
    if (op === "listModels" && res.status === 200 && isRecord(body) && Array.isArray(body.data)) {
      const agent = decodeURIComponent(new URL(req.url).pathname.split("/").at(-3) ?? "");
      this.run.modelsRead.set(agent, body.data.filter(isRecord));
    }
    return {
      status: res.status,
      headers: res.headers,
      text: res.text,
      body,
      exchange: res.exchange,
      timing: res.timing,
    };
  }

  /**
   * A large upload on a connection of its own: a proxy that refuses it early (a 413 before the body is
   * read) may reset the connection, and over HTTP/2 a reset can end the whole session
   * (NGHTTP2_ENHANCE_YOUR_CALM), failing every other check's requests on it.
   */
  async #sendOnOwnConnection(req: HttpRequest): Promise<HttpResponse> {
    const own = createDispatcher(this.run.requestTimeoutMs, this.run.connection);
    try {
      return await httpRequest(own, req, this.run.requestTimeoutMs);
    } finally {
      await own.destroy();
    }
  }

  #key(options: CallOptions | undefined): string | undefined {
    if (options?.key === null) return undefined;
    return options?.key ?? this.inputs.key;
  }

  /**
   * Runs one turn; the stream is read whole and checked by the grammar; events are schema-validated. A turn
   * whose stream ends in an error event that names load (an upstream's overload or rate limit) is sent
   * again, as the API's guidance says, up to the run's retry policy; past it the turn carries its `trouble`.
   */
  async turn(options: TurnOptions): Promise<Turn> {
    const policy = this.run.retry;
    for (let attempt = 0; ; attempt++) {
      const turn = await this.#turnOnce(options);
      const trouble = options.expectFailure ? undefined : transientTrouble(turn);
      if (attempt > 0) {
        turn.resent = attempt;
        if (options.conversationId !== undefined) this.run.resentInto.add(options.conversationId);
      }
      if (trouble === undefined) return turn;
      if (attempt >= policy.attempts) {
        turn.trouble = `${trouble}, on each of ${attempt + 1} tries`;
        this.note(`a turn ended in ${turn.trouble}`);
        return turn;
      }
      this.note(`a turn ended in ${trouble}; it was sent again`);
      await sleep(retryDelayMs(undefined, attempt, policy));
    }
  }

  async #turnOnce(options: TurnOptions): Promise<Turn> {
    const metadata: Record<string, unknown> = { ...options.metadata };
    if (options.conversationId !== undefined) metadata.conversation_id = options.conversationId;
    if (options.streamToolCalls !== undefined) metadata.stream_tool_calls = options.streamToolCalls;
    const body: Record<string, unknown> = {
      stream: true,
      messages: options.messages ?? [{ role: "user", content: options.prompt ?? "Say hello." }],
      ...options.extraBody,
    };
    if (options.model !== undefined) body.model = options.model;
    if (options.system !== undefined) body.system = options.system;
    if (Object.keys(metadata).length > 0) body.metadata = metadata;
    const agent = options.agent ?? this.inputs.agent;
    const key = this.#key(options);
    const url = options.routed
      ? `${this.inputs.baseUrl}/api/agents/v1/messages`
      : `${this.agentUrl(agent)}/v1/messages`;
    const response = await this.call(options.routed ? "sendRoutedMessage" : "sendMessage", {
      method: "POST",
      url,
      key,
      keyHeader: options.keyHeader,
      json: body,
      refusalExpected: options.refusalExpected,
    });
    const conversationId = response.headers["x-conversation-id"];
    if (response.status === 200 && conversationId && key) this.track(conversationId, key, agent);
    if (response.status === 200 && typeof metadata.conversation_id === "string" && key) {
      this.track(metadata.conversation_id, key, agent);
    }
    const turn: Turn = {
      status: response.status,
      conversationId,
      headers: response.headers,
      text: "",
      response,
    };
    if (response.status === 200 && response.headers["content-type"]?.startsWith("text/event-stream")) {
      const reading = checkTurnStream(response.text, { streamToolCalls: options.streamToolCalls === true });
      turn.reading = reading;
      turn.text = replyText(reading);
      if (this.madeBy !== undefined)
        this.run.turnsRead.push({
          madeBy: this.madeBy,
          agent,
          routed: options.routed === true,
          conversationId: conversationId ?? options.conversationId,
          asked: options.conversationId,
          header: conversationId,
          streamToolCalls: options.streamToolCalls === true,
          reading,
        });
      recordToolResults(this.run.toolResults, reading.events);
      if (response.timing) {
        turn.timeline = turnTimeline(response.timing, reading);
        response.exchange.timeline = turn.timeline;
      }
      for (const event of reading.events) {
        for (const failure of this.run.validator.validateEvent(event.name, event.data)) {
          this.schemaFailures.push({ ...failure, evidence: event.frame });
        }
      }
      // Every stream any check reads is judged by the whole grammar, as every JSON body is by the spec: a
      // grammar fault fails the check that saw it, whichever rule that check is about. The layout of a frame's
      // lines is the one exception: the events read are the same, so only the framing check judges it.
      for (const v of reading.violations.filter(
        (x) => x.severity === "error" && !FRAMING_ONLY_CODES.has(x.code),
      )) {
        this.schemaFailures.push({
          message: `${url} → the event stream breaks the API's grammar (${v.code}): ${v.message}`,
          evidence: v.frame,
        });
      }
    }
    return turn;
  }

  /** What a named check's call showed of conversations, for the run's sweeps (conformance/sweeps/). */
  #recordConversations(
    op: OperationId,
    req: HttpRequest,
    status: number,
    body: unknown,
    started: number,
  ): void {
    if (!CONVERSATION_OPERATIONS.has(op)) return;
    const ended = ++this.run.callSeq;
    const log = this.run.conversationsRead;
    const madeBy = this.madeBy ?? "";
    const named = decodeURIComponent(new URL(req.url).pathname.split("/conversations/")[1] ?? "").split(
      "/",
    )[0];
    if (op === "deleteConversation") {
      if (named !== "" && (status === 204 || status === 200))
        log.push({ kind: "deleted", id: named, started, ended });
      return;
    }
    if (op === "setConversationSharing") {
      const json = isRecord(req.json) ? req.json : undefined;
      const exact =
        json !== undefined && Object.keys(json).length === 1 && typeof json.shared === "boolean"
          ? json.shared
          : undefined;
      const namesValue = json !== undefined && typeof json.shared === "boolean";
      if (named !== "")
        log.push({ kind: "share-sent", id: named, shared: exact, namesValue, status, started, ended });
      return;
    }
    if (status !== 200 || !isRecord(body)) return;
    const request = `${req.method} ${pathOf(req.url)}`;
    const read = (conversation: unknown) => {
      if (isRecord(conversation))
        log.push({ kind: "read", madeBy, request, key: req.key, conversation, started, ended });
    };
    if (op === "getLastCompaction") {
      if (named !== "" && typeof body.compacted === "boolean")
        log.push({
          kind: "compaction",
          madeBy,
          request,
          id: named,
          compacted: body.compacted,
          started,
          ended,
        });
      return;
    }
    if (op === "forkConversation") {
      if (typeof body.conversation_id === "string") {
        log.push({ kind: "fork-child", id: body.conversation_id, started, ended });
        const asked =
          isRecord(req.json) && typeof req.json.at_turn === "number" ? req.json.at_turn : undefined;
        if (named !== "")
          log.push({
            kind: "fork",
            madeBy,
            request,
            parent: named,
            child: body.conversation_id,
            atTurn: asked,
            forkedAt: body.forked_at_turn,
            started,
            ended,
          });
      }
    } else if (op === "listConversations") {
      if (!Array.isArray(body.conversations)) return;
      const conversations = body.conversations.filter(isRecord);
      log.push({ kind: "list", madeBy, url: req.url, key: req.key, conversations, started, ended });
      conversations.forEach(read);
    } else {
      if (op === "getTranscript" && Array.isArray(body.messages) && named !== "")
        log.push({
          kind: "transcript",
          madeBy,
          request,
          id: named,
          messages: body.messages.filter(isRecord),
          started,
          ended,
        });
      read(body.conversation);
    }
  }

  /** A conversation a check sends turns into through a client of its own: remembered for cleanup, and its turns unrecorded. */
  trackSentOutside(id: string, key: string, agent = this.inputs.agent): void {
    this.track(id, key, agent);
    this.run.sentOutside.add(id);
  }

  /** Remembers a conversation for the run's cleanup. */
  track(id: string, key: string, agent = this.inputs.agent): void {
    if (!this.run.created.has(id)) this.run.created.set(id, { agent, key });
  }

  async getConversation(id: string, options?: CallOptions): Promise<ApiResponse> {
    return this.call("getConversation", {
      method: "GET",
      url: this.conversationUrl(id, options?.agent),
      key: this.#key(options),
      keyHeader: options?.keyHeader,
    });
  }

  /** The conversation object of a 200 fetch; fails the check otherwise. */
  async conversation(id: string, options?: CallOptions): Promise<ConversationRecord> {
    const res = await this.getConversation(id, options);
    if (res.status !== 200 || !isRecord(res.body) || !isRecord(res.body.conversation)) {
      throw new CheckFailure(`GET conversation ${id} gave ${res.status}, not 200 with {conversation}`, [
        { message: "unexpected response", evidence: res.text.slice(0, 300) },
      ]);
    }
    return res.body.conversation as unknown as ConversationRecord;
  }

  async listModels(options?: CallOptions): Promise<ApiResponse> {
    return this.call("listModels", {
      method: "GET",
      url: `${this.agentUrl(options?.agent)}/v1/models`,
      key: this.#key(options),
      keyHeader: options?.keyHeader,
    });
  }

  async listConversations(query: Record<string, string>, options?: CallOptions): Promise<ApiResponse> {
    const qs = new URLSearchParams(query).toString();
    return this.call("listConversations", {
      method: "GET",
      url: `${this.agentUrl(options?.agent)}/conversations${qs ? `?${qs}` : ""}`,
      key: this.#key(options),
      keyHeader: options?.keyHeader,
    });
  }

  async transcript(id: string, options?: CallOptions): Promise<ApiResponse> {
    return this.call("getTranscript", {
      method: "GET",
      url: `${this.conversationUrl(id, options?.agent)}/messages`,
      key: this.#key(options),
      keyHeader: options?.keyHeader,
    });
  }

  async lastCompaction(id: string, options?: CallOptions): Promise<ApiResponse> {
    return this.call("getLastCompaction", {
      method: "GET",
      url: `${this.conversationUrl(id, options?.agent)}/last-compaction`,
      key: this.#key(options),
      keyHeader: options?.keyHeader,
    });
  }

  async share(id: string, body: unknown, options?: CallOptions): Promise<ApiResponse> {
    return this.call("setConversationSharing", {
      method: "POST",
      url: this.conversationUrl(id, options?.agent),
      key: this.#key(options),
      keyHeader: options?.keyHeader,
      json: body,
    });
  }

  /** A fork; `body` undefined sends none at all (the request body is optional, spec/paths/conversation-fork.yaml). */
  async fork(
    id: string,
    body: Record<string, unknown> | undefined,
    options?: CallOptions,
  ): Promise<ApiResponse> {
    const res = await this.call("forkConversation", {
      method: "POST",
      url: `${this.conversationUrl(id, options?.agent)}/fork`,
      key: this.#key(options),
      keyHeader: options?.keyHeader,
      ...(body !== undefined && { json: body }),
    });
    const key = this.#key(options);
    if (res.status === 200 && isRecord(res.body) && typeof res.body.conversation_id === "string" && key) {
      this.track(res.body.conversation_id, key, options?.agent);
    }
    return res;
  }

  async deleteConversation(id: string, options?: CallOptions): Promise<ApiResponse> {
    return this.call("deleteConversation", {
      method: "DELETE",
      url: this.conversationUrl(id, options?.agent),
      key: this.#key(options),
      keyHeader: options?.keyHeader,
    });
  }

  /**
   * The API's client guidance: poll the conversation every 0.25 s until `agent_session_id` is non-null,
   * bounded by --session-wait-ms. Resolves to the session id, or null when the wait expired.
   */
  async waitForSession(id: string, options?: CallOptions): Promise<string | null> {
    const started = Date.now();
    const deadline = started + this.inputs.sessionWaitMs;
    const record: Extract<ConversationRead, { kind: "session-wait" }> = {
      kind: "session-wait",
      id,
      found: false,
      started: ++this.run.callSeq,
      ended: Number.POSITIVE_INFINITY,
    };
    for (;;) {
      const conversation = await this.conversation(id, options);
      if (conversation.agent_session_id !== null && conversation.agent_session_id !== undefined) {
        const took = Date.now() - started;
        this.run.sessionRecordedMs = Math.max(this.run.sessionRecordedMs ?? 0, took);
        return conversation.agent_session_id;
      }
      if (Date.now() >= deadline) {
        record.ended = ++this.run.callSeq;
        this.run.conversationsRead.push(record);
        return null;
      }
      await sleep(POLL_INTERVAL_MS);
    }
  }

  /**
   * For a conversation whose turns produced no output, which must keep `agent_session_id` null: polls for a
   * pointer the deployment records anyway, and returns it, or null once recording would have shown. The API
   * says only that the pointer is "recorded a few seconds after the stream closes", so the wait is three times
   * the longest recording this run saw after a turn with output (at least a second), within --session-wait-ms;
   * the whole --session-wait-ms before any was seen. Without this bound, confirming an absence cost the full
   * wait (15 s by default) on every run.
   */
  async waitForNoSession(id: string, options?: CallOptions): Promise<string | null> {
    const seen = this.run.sessionRecordedMs;
    const wait =
      seen === undefined
        ? this.inputs.sessionWaitMs
        : Math.min(this.inputs.sessionWaitMs, Math.max(NO_SESSION_MIN_WAIT_MS, 3 * seen));
    const deadline = Date.now() + wait;
    for (;;) {
      const session = (await this.conversation(id, options)).agent_session_id;
      if (session !== null && session !== undefined) return session;
      if (Date.now() >= deadline) return null;
      await sleep(POLL_INTERVAL_MS);
    }
  }

  /** Polls until `agent_session_id` is null (an empty resumed turn clears it); false when the wait expired. */
  async waitForSessionCleared(id: string, options?: CallOptions): Promise<boolean> {
    const deadline = Date.now() + this.inputs.sessionWaitMs;
    for (;;) {
      const conversation = await this.conversation(id, options);
      if (conversation.agent_session_id === null) return true;
      if (Date.now() >= deadline) return false;
      await sleep(POLL_INTERVAL_MS);
    }
  }

  /**
   * A value computed once per run and shared by the checks that ask for it (one conversation read by
   * several checks). Its exchanges and schema failures count for every check that uses it.
   */
  async fixture<T>(name: string, make: (ctx: CheckContext) => Promise<T>): Promise<T> {
    let pending = this.run.fixtures.get(name) as Promise<FixtureOutcome<T>> | undefined;
    if (!pending) {
      const ctx = new CheckContext(this.run, `the shared ${name} turns`);
      pending = make(ctx).then(
        (value) => ({ value, exchanges: ctx.exchanges, schemaFailures: ctx.schemaFailures }),
        (error: unknown) => ({ error, exchanges: ctx.exchanges, schemaFailures: ctx.schemaFailures }),
      );
      this.run.fixtures.set(name, pending as Promise<FixtureOutcome<unknown>>);
    }
    const outcome = await pending;
    for (const e of outcome.exchanges) if (!this.exchanges.includes(e)) this.exchanges.push(e);
    for (const f of outcome.schemaFailures) if (!this.schemaFailures.includes(f)) this.schemaFailures.push(f);
    if (outcome.error !== undefined) {
      if (outcome.error instanceof CheckSkip || outcome.error instanceof CheckFailure) throw outcome.error;
      throw new CheckFailure(`shared set-up "${name}" failed: ${String(outcome.error)}`);
    }
    return outcome.value as T;
  }
}

/**
 * An error event's message that says "not now" rather than judging the turn: the API's error type is always
 * api_error, so the message is all there is (an upstream's overload, rate limit or unavailability).
 */
const LOAD_MESSAGE =
  /overload|rate.?limit|too many requests|capacity|try again|temporar|unavailable|\b(429|503|529)\b/i;

/**
 * A refusal for load: 429, 503 or 529, or another server error whose body names load (a gateway's 502 for
 * an overloaded upstream model, as a flow invocation may answer: its error statuses are not shown).
 */
export function isLoadRefusal(status: number, text: string): boolean {
  if (LOAD_REFUSAL_STATUSES.has(status)) return true;
  return status >= 500 && status <= 599 && LOAD_MESSAGE.test(excerpt(text, 1_000));
}

/** What transient trouble a turn showed, or undefined: its stream ended in an error event naming load. */
export function transientTrouble(turn: Turn): string | undefined {
  const reading = turn.reading;
  if (reading?.end !== "error" || !LOAD_MESSAGE.test(reading.errorMessage ?? "")) return undefined;
  return `an error event naming load (${JSON.stringify(excerpt(reading.errorMessage ?? "", 200))})`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Bytes of the body `req` sends, or undefined when it sends none. */
function requestBodyBytes(req: HttpRequest): number | undefined {
  if (req.json !== undefined) return Buffer.byteLength(JSON.stringify(req.json));
  return req.rawBody === undefined ? undefined : Buffer.byteLength(req.rawBody);
}

/** The operations whose answers the sweeps read (conformance/sweeps/). */
const CONVERSATION_OPERATIONS: ReadonlySet<OperationId> = new Set<OperationId>([
  "getConversation",
  "getTranscript",
  "getLastCompaction",
  "listConversations",
  "setConversationSharing",
  "forkConversation",
  "deleteConversation",
]);

function pathOf(url: string): string {
  try {
    const u = new URL(url);
    return u.pathname + u.search;
  } catch {
    return url;
  }
}

/** The `metadata.conversation_id` a send names, if any. */
function namedConversation(req: HttpRequest): unknown {
  return isRecord(req.json) && isRecord(req.json.metadata) ? req.json.metadata.conversation_id : undefined;
}

/**
 * The text of the newest `role: "user"` element a send carries (Endpoints/Send a message: the one read), its
 * text blocks joined; the first PROMPT_KEPT characters, enough for the sweeps to find a nonce in.
 */
function newestPrompt(req: HttpRequest): string | undefined {
  const messages = isRecord(req.json) && Array.isArray(req.json.messages) ? req.json.messages : [];
  const newest = messages.findLast((m) => isRecord(m) && m.role === "user");
  if (!isRecord(newest)) return undefined;
  const content = newest.content;
  const text =
    typeof content === "string"
      ? content
      : Array.isArray(content)
        ? content
            .filter((b) => isRecord(b) && b.type === "text" && typeof b.text === "string")
            .map((b) => (b as { text: string }).text)
            .join("\n\n")
        : undefined;
  return text?.slice(0, PROMPT_KEPT);
}

const PROMPT_KEPT = 4_000;

/** Whether a send's body sets a `metadata` flag to true (`isolated`, `stream_tool_calls`). */
function sentFlag(req: HttpRequest, flag: string): boolean {
  const body = req.json;
  return isRecord(body) && isRecord(body.metadata) && body.metadata[flag] === true;
}

/** A stream that reached message_stop and carried no error event, in any framing the SSE standard allows. */
function ranToStop(text: string): boolean {
  return (
    /(^|[\r\n])event: ?message_stop ?(\r\n|\r|\n)/.test(text) &&
    !/(^|[\r\n])event: ?error ?(\r\n|\r|\n)/.test(text)
  );
}
