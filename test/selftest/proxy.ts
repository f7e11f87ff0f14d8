/**
 * A fault-injecting HTTP proxy for the suite's self-test: it sits in front of a deployment (the reference
 * server) and breaks exactly one rule of the API, chosen by mutation name. With `mutation: null` it
 * forwards every request and response byte for byte (hop-by-hop headers dropped), so the suite must pass
 * through it. Request bodies and JSON answers are read whole; an event stream is passed on chunk by chunk as
 * it arrives (the suite judges arrival times), unless a mutation reads or rewrites it, which buffers it.
 *
 * A request goes: read whole → `onRequest` (may rewrite it, or answer itself) → forwarded upstream →
 * the ledger learns from the upstream answer → `onEvents` (200 event streams: parsed, mutated,
 * re-serialised) → `onSseText` (raw bytes of the stream, for framing faults) → `onResponse` → the client.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent, type Dispatcher, request } from "undici";
import { encodeSseFrame, splitSseFrames } from "../../client/sse.ts";
import { type Mutation, mutationByName } from "./mutations.ts";

export interface FaultProxy {
  url: string;
  close(): Promise<void>;
}

export interface FaultProxyOptions {
  /** Base URL of the deployment, e.g. `http://127.0.0.1:3001`. */
  target: string;
  /** A mutation name from mutations.ts, or null to forward faithfully. */
  mutation: string | null;
}

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
interface OpenStream extends ProxyResponse {
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

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host",
  "content-length",
  // Bodies are read and rewritten as plain bytes: ask upstream for no content coding.
  "accept-encoding",
]);

function forwardableHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name.toLowerCase())) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const mutation: Mutation | undefined =
    options.mutation === null ? undefined : mutationByName(options.mutation);
  if (options.mutation !== null && !mutation) throw new Error(`unknown mutation ${options.mutation}`);
  const target = options.target.replace(/\/+$/, "");
  const upstream = new Agent({ connections: 64, keepAliveTimeout: 10_000 });
  const closeTasks: Array<() => Promise<void>> = [];

  const forward = async (call: ProxyCall): Promise<ProxyResponse> => {
    const res = await request(`${target}${call.path}`, {
      method: call.method as "GET",
      headers: call.headers,
      body: call.body.length > 0 || call.method === "POST" ? call.body : undefined,
      dispatcher: upstream,
    });
    const body = Buffer.from(await res.body.arrayBuffer());
    return { status: res.statusCode, headers: forwardableHeaders(res.headers), body };
  };

  const tools: ProxyTools = {
    forward,
    ledger: new Ledger(),
    state: new Map(),
    onClose: (task) => closeTasks.push(task),
  };

  /** An event stream goes through as it arrives when no hook of the mutation needs it whole. */
  const streamsThrough =
    !mutation || (!mutation.onEvents && !mutation.onSseText && !mutation.onResponse && !mutation.stream);

  /** Forwards `call`; a 200 event stream comes back unread, as `stream`, for the caller to pass on or hold. */
  const forwardOpen = async (call: ProxyCall): Promise<ProxyResponse | OpenStream> => {
    const res = await request(`${target}${call.path}`, {
      method: call.method as "GET",
      headers: call.headers,
      body: call.body.length > 0 || call.method === "POST" ? call.body : undefined,
      dispatcher: upstream,
    });
    const head = { status: res.statusCode, headers: forwardableHeaders(res.headers), body: Buffer.alloc(0) };
    if (isEventStream(head) && (streamsThrough || mutation?.stream === "buffered")) {
      return { ...head, stream: res.body };
    }
    return { ...head, body: Buffer.from(await res.body.arrayBuffer()) };
  };

  const handle = async (call: ProxyCall): Promise<ProxyResponse | OpenStream> => {
    const early = mutation?.onRequest ? await mutation.onRequest(call, tools) : undefined;
    const answer = early ?? (await forwardOpen(call));
    // The ledger reads a stream's headers only (which conversation a send created).
    if (!early) tools.ledger.observe(call, answer);
    if ("stream" in answer) return answer;
    let res = answer;
    if (mutation?.onEvents && isEventStream(res)) {
      const events = parseSse(res.body.toString("utf8"));
      const changed = mutation.onEvents(events, call, tools) ?? events;
      res = { ...res, body: Buffer.from(serialiseSse(changed)) };
    }
    if (mutation?.onSseText && isEventStream(res)) {
      res = { ...res, body: Buffer.from(mutation.onSseText(res.body.toString("utf8"), call)) };
    }
    if (mutation?.onResponse) res = (await mutation.onResponse(call, res, tools)) ?? res;
    return res;
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      try {
        const body = await readBody(req);
        const call = new ProxyCall(
          req.method ?? "GET",
          req.url ?? "/",
          forwardableHeaders(req.headers),
          body,
        );
        call.sentHeaderNames = req.rawHeaders.filter((_, i) => i % 2 === 0);
        const answer = await handle(call);
        const headers = { ...answer.headers };
        delete headers["content-length"];
        delete headers["transfer-encoding"];
        if ("stream" in answer) {
          res.writeHead(answer.status, headers);
          if (mutation?.stream === "buffered") {
            // A proxy that buffers: the headers at once, the body when the turn has ended.
            res.flushHeaders();
            res.end(Buffer.from(await answer.stream.arrayBuffer()));
            return;
          }
          for await (const chunk of answer.stream) {
            // A client that went away ends the pass-through (and, through it, the upstream request).
            if (res.destroyed) {
              answer.stream.destroy();
              return;
            }
            res.write(chunk);
          }
          res.end();
          return;
        }
        res.writeHead(answer.status, { ...headers, "content-length": String(answer.body.length) });
        res.end(answer.body);
      } catch (error) {
        if (!res.headersSent) {
          const message = `fault proxy: ${error instanceof Error ? error.message : String(error)}`;
          res.writeHead(502, { "content-type": "application/json" });
          res.end(JSON.stringify({ message }));
        } else {
          res.destroy();
        }
      }
    })();
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      for (const task of closeTasks.splice(0)) await task().catch(() => undefined);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await upstream.close();
    },
  };
}
