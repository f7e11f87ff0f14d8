/**
 * What the fault proxy (proxy.ts) hands a mutation: the request as the proxy holds it, the answer, the
 * parsed event stream, the ledger of what the deployment answered, the tools a hook may use; and the shape
 * of a mutation itself. Mutations import these, and the proxy imports the mutations: one module each way
 * would be an import circle.
 */
import type { Dispatcher } from "undici";
import { encodeSseFrame, splitSseFrames } from "../../client/sse.ts";

/** Where a request goes, read from its path. */
export type RouteKind =
  | "send"
  | "routed"
  | "models"
  | "list"
  | "conversation"
  | "transcript"
  | "compaction"
  | "fork"
  | "flow"
  | "other";

export interface Route {
  kind: RouteKind;
  agent?: string;
  /** The conversation id of conversation routes (from the path). */
  id?: string;
}

export function routeOf(method: string, path: string): Route {
  const pathname = path.split("?")[0];
  const parts = pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "apps" && parts.length === 2 && method === "POST") return { kind: "flow" };
  if (parts[0] !== "api" || parts[1] !== "agents") return { kind: "other" };
  const rest = parts.slice(2);
  if (rest.length === 2 && rest[0] === "v1" && rest[1] === "messages") return { kind: "routed" };
  const [agent, a, b, c] = rest;
  if (rest.length === 3 && a === "v1" && b === "messages") return { kind: "send", agent };
  if (rest.length === 3 && a === "v1" && b === "models") return { kind: "models", agent };
  if (rest.length === 2 && a === "conversations") return { kind: "list", agent };
  if (rest.length === 3 && a === "conversations") return { kind: "conversation", agent, id: b };
  if (rest.length === 4 && a === "conversations" && c === "messages")
    return { kind: "transcript", agent, id: b };
  if (rest.length === 4 && a === "conversations" && c === "last-compaction")
    return { kind: "compaction", agent, id: b };
  if (rest.length === 4 && a === "conversations" && c === "fork") return { kind: "fork", agent, id: b };
  return { kind: "other", agent };
}

// biome-ignore lint/suspicious/noExplicitAny: bodies are arbitrary JSON that mutations poke at freely.
export type Json = any;

/** One request as the proxy holds it; every field may be rewritten by a mutation before it is forwarded. */
export class ProxyCall {
  method: string;
  /** Path and query, e.g. `/api/agents/demo-agent/conversations?limit=1`. */
  path: string;
  /** Lower-case header names. */
  headers: Record<string, string>;
  /** Header names as the client spelled them (mutations of case-sensitive servers read these). */
  sentHeaderNames: string[] = [];
  #body: Buffer;
  #json: { value: Json } | undefined;

  constructor(method: string, path: string, headers: Record<string, string>, body: Buffer) {
    this.method = method;
    this.path = path;
    this.headers = headers;
    this.#body = body;
  }

  get route(): Route {
    return routeOf(this.method, this.path);
  }

  get url(): URL {
    return new URL(this.path, "http://proxy.invalid");
  }

  get key(): string | undefined {
    return this.headers["x-api-key"];
  }

  set key(value: string | undefined) {
    if (value === undefined) delete this.headers["x-api-key"];
    else this.headers["x-api-key"] = value;
  }

  get body(): Buffer {
    return this.#body;
  }

  set body(value: Buffer) {
    this.#body = value;
    this.#json = undefined;
  }

  /** The body parsed as JSON (cached), or undefined when it is not JSON. */
  json(): Json {
    if (!this.#json) {
      let value: Json;
      try {
        value = this.#body.length === 0 ? undefined : JSON.parse(this.#body.toString("utf8"));
      } catch {
        value = undefined;
      }
      this.#json = { value };
    }
    return this.#json.value;
  }

  /** Replaces the body with `value` serialised as JSON. */
  setJson(value: Json): void {
    this.#body = Buffer.from(JSON.stringify(value));
    this.#json = { value };
  }

  /** The conversation a request is about: the path's id, or a send's `metadata.conversation_id`. */
  get conversationId(): string | undefined {
    const route = this.route;
    if (route.id !== undefined) return route.id;
    if (route.kind === "send" || route.kind === "routed") {
      const id = this.json()?.metadata?.conversation_id;
      return typeof id === "string" ? id : undefined;
    }
    return undefined;
  }

  clone(): ProxyCall {
    return new ProxyCall(this.method, this.path, { ...this.headers }, Buffer.from(this.#body));
  }

  /** A request made up by a mutation (extra upstream calls: replays, reads, toggles). */
  static make(method: string, path: string, key: string | undefined, json?: Json): ProxyCall {
    const headers: Record<string, string> = { accept: "application/json, text/event-stream" };
    if (key !== undefined) headers["x-api-key"] = key;
    let body = Buffer.alloc(0);
    if (json !== undefined) {
      headers["content-type"] = "application/json";
      body = Buffer.from(JSON.stringify(json));
    }
    return new ProxyCall(method, path, headers, body);
  }
}

export interface ProxyResponse {
  status: number;
  /** Lower-case header names. */
  headers: Record<string, string>;
  body: Buffer;
}

export function isEventStream(res: ProxyResponse): boolean {
  return res.status === 200 && (res.headers["content-type"] ?? "").startsWith("text/event-stream");
}

/** A 200 event stream not read yet: passed on as it arrives, or held by a buffering mutation. */
export interface OpenStream extends ProxyResponse {
  stream: Dispatcher.ResponseData["body"];
}

/** The response body parsed as JSON, or undefined. */
export function jsonOf(res: ProxyResponse): Json {
  try {
    return JSON.parse(res.body.toString("utf8"));
  } catch {
    return undefined;
  }
}

/** A copy of `res` whose body is `value` as JSON. */
export function withJson(res: ProxyResponse, value: Json, status = res.status): ProxyResponse {
  return {
    status,
    headers: { ...res.headers, "content-type": "application/json; charset=utf-8" },
    body: Buffer.from(JSON.stringify(value)),
  };
}

/** A JSON answer made by the proxy itself, in the reference server's error body shape. */
export function jsonResponse(status: number, value: Json): ProxyResponse {
  return withJson({ status, headers: {}, body: Buffer.alloc(0) }, value, status);
}

export function errorResponse(status: number, type: string, message: string): ProxyResponse {
  return jsonResponse(status, { message, error: { type, message } });
}

/** One server-sent event as mutations see it. */
export interface SseEvent {
  event: string;
  data: Json;
}

/** Reads a stream through the kit's one SSE reader; data that is not JSON stays a string, for mutations to break. */
export function parseSse(text: string): SseEvent[] {
  return splitSseFrames(text)
    .filter((frame) => frame.event !== undefined || frame.data !== undefined)
    .map((frame) => {
      let data: Json = frame.data ?? "";
      try {
        data = JSON.parse(frame.data ?? "");
      } catch {}
      return { event: frame.event ?? "message", data };
    });
}

export function serialiseSse(events: SseEvent[]): string {
  return events
    .map((e) => encodeSseFrame(e.event, typeof e.data === "string" ? e.data : JSON.stringify(e.data)))
    .join("");
}

/** What the proxy learned from upstream answers; several mutations need it (owners, working keys). */
export class Ledger {
  /** Conversation id → its agent and the key that created it (its owner). */
  readonly conversations = new Map<string, { agent: string; owner: string }>();
  /** The last key that ran a turn (200 from send-message). */
  turnKey: string | undefined;
  #waiters: Array<(key: string) => void> = [];

  observe(call: ProxyCall, res: ProxyResponse): void {
    const route = call.route;
    const key = call.key;
    if (!key) return;
    if (route.kind === "send" && isEventStream(res)) {
      const id = res.headers["x-conversation-id"];
      if (id && route.agent && !this.conversations.has(id))
        this.conversations.set(id, { agent: route.agent, owner: key });
      this.turnKey = key;
      for (const wake of this.#waiters.splice(0)) wake(key);
    }
    if (route.kind === "fork" && res.status >= 200 && res.status < 300 && route.agent) {
      const child = jsonOf(res)?.conversation_id;
      if (typeof child === "string" && !this.conversations.has(child))
        this.conversations.set(child, { agent: route.agent, owner: key });
    }
  }

  /** A key known to run turns; waits (bounded) for the first one when none was seen yet. */
  async workingKey(timeoutMs = 10_000): Promise<string | undefined> {
    if (this.turnKey) return this.turnKey;
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(undefined), timeoutMs);
      this.#waiters.push((key) => {
        clearTimeout(timer);
        resolve(key);
      });
    });
  }
}

/** What a mutation's hooks may use besides the call itself. */
export interface ProxyTools {
  /** Sends a request upstream (not through the mutation) and returns the answer. */
  forward(call: ProxyCall): Promise<ProxyResponse>;
  ledger: Ledger;
  /** Per-proxy scratch state of the mutation. */
  state: Map<string, Json>;
  /** Registers work to do when the proxy closes (undoing what a mutation held back). */
  onClose(task: () => Promise<void>): void;
}

/** Which part of the API a mutation breaks. */
export type Area =
  | "status"
  | "headers"
  | "sse"
  | "delivery"
  | "shapes"
  | "state"
  | "send"
  | "silent"
  | "consistency"
  | "meaning";

export type Maybe<T> = T | undefined;

export interface Mutation {
  name: string;
  area: Area;
  /** The one rule broken, in the API's words where possible. */
  description: string;
  /** Check ids of which at least one must fail when this mutation is applied. */
  breaks: string[];
  /**
   * Set when the suite is known not to catch this mutation (a gap of the suite, reported, not hidden):
   * why. The self-test then asserts it is still not caught, so a fixed suite says "remove this".
   */
  knownGap?: string;
  /**
   * Set when no named check catches the row but the explorer does, with the sequences `agent-api check` draws
   * by default from a fixed seed (EXPLORER_CATCH in score.ts): why only it does. The catalogue runs such a row
   * with that exploration even when it runs the others without, so it stays a row the suite must catch.
   */
  caughtByExplorer?: string;
  /**
   * Checks whose traffic the mutation feeds on, run beside `breaks` in the self-test: a mutation that
   * serves a request "as a key that works" learns that key from a turn some other check ran.
   */
  needs?: string[];
  /**
   * How the proxy delivers event streams: "buffered" sends the headers at once and the body when the turn has
   * ended; "held" sends nothing until then (any body hook holds a stream the same way). Unset, and with no
   * body hook, a stream goes through as it arrives.
   */
  stream?: "buffered" | "held";
  /** Set on rows generated from a table (table-mutations.ts) rather than written for a check. */
  table?: "field × route" | "rule × input";
  /**
   * Set on breakages written from the API's text by someone who had not read the checks (outside round N):
   * `breaks` stays empty and the row is judged as `agent-api check` judges a deployment (harness.ts).
   */
  outsideRound?: number;
  /** A table row `npm test` runs; the others run in `npm run mutation-score`. */
  sample?: boolean;
  onRequest?(call: ProxyCall, tools: ProxyTools): Maybe<ProxyResponse> | Promise<Maybe<ProxyResponse>>;
  onEvents?(events: SseEvent[], call: ProxyCall, tools: ProxyTools): Maybe<SseEvent[]>;
  onSseText?(text: string, call: ProxyCall): string;
  onResponse?(
    call: ProxyCall,
    res: ProxyResponse,
    tools: ProxyTools,
  ): Maybe<ProxyResponse> | Promise<Maybe<ProxyResponse>>;
}
