/**
 * The scripted model as a Messages API upstream: `POST /v1/messages` answered with the scripted model's
 * event stream. The same handler plugs into the SDK in-process (its `fetch` option: no port, no socket)
 * and is served over HTTP by `agent-api model`, so the default engine and `--engine anthropic` pointed at
 * `agent-api model` run the very same loop against the very same model.
 *
 * The only state here is transport state: how many times an identical request was answered with a
 * transient failure (`Answer overloaded to the first N calls`), so a retried request can then succeed.
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { encodeSseEvent } from "@agent-api/client/sse";
import type Anthropic from "@anthropic-ai/sdk";
import { type ScriptedAnswer, type ScriptedModelOptions, scriptedAnswer } from "./scripted-model.ts";

export interface ScriptedUpstreamOptions extends ScriptedModelOptions {
  /** Wait before answering each call (time to first byte), in ms. */
  latencyMs?: number;
  /** Wait before each content block's stop, in ms (a block "being generated"). */
  blockDelayMs?: number;
  /** Deltas a block's content is split into (the official API sends many; the default is 1). */
  deltasPerBlock?: number;
  /**
   * `Retry-After` (seconds) sent with a transient 429/529. Unset, the answer says `retry-after-ms: 10`
   * instead (the SDK reads it first), so tests do not wait: the SDK ignores a `Retry-After` of 0 and falls
   * back to its own backoff of 0.5 s and more.
   */
  retryAfterSeconds?: number;
  /**
   * The model answering each request (default: the scripted model's plain answers); realistic-style.ts
   * wraps it to answer the way real models do.
   */
  answer?: (request: ScriptedRequest, options: ScriptedModelOptions, requestChars: number) => ScriptedAnswer;
  /**
   * Splits a block's streamed content into deltas, overriding `deltasPerBlock`: `salt` tells blocks apart,
   * `type` is the block's (a tool_use block's content is its input's JSON).
   */
  chunkText?: (value: string, block: { salt: string; type: string }) => string[];
  /** Sends a `ping` event after `message_start`, as the Messages API does. */
  ping?: boolean;
  /** Observer of each well-formed request, as it arrived (tests read what the model was sent). */
  onRequest?: (request: ScriptedRequest & { stream?: boolean }) => void;
  /** Observer of each `content_block_stop` as it is sent (bench/engine.ts measures from it). */
  onBlockStop?: (request: ScriptedRequest, index: number, at: number) => void;
}

export interface ScriptedUpstream {
  handle(request: Request): Promise<Response>;
  /** Requests answered with a transient failure and not yet retried to success (bounded). */
  readonly trackedFailures: number;
  /** A `fetch` for the SDK's `fetch` option. */
  fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
}

/** A Messages request, streaming or not (the transport reads `stream`). */
export type ScriptedRequest = Omit<Anthropic.Messages.MessageCreateParamsNonStreaming, "stream">;

/**
 * Transient failures remembered at most: a request whose client gave up before its retries ran out (the
 * SDK's budget is smaller than `first 9 calls`, a client left) is never retried to success, so its entry
 * would otherwise stay for the life of the process. The oldest go first; a retry comes within seconds.
 */
export const MAX_TRACKED_FAILURES = 1024;

/** A signal for calls made without one. */
const NEVER = new AbortController().signal;

export function createScriptedUpstream(options: ScriptedUpstreamOptions = {}): ScriptedUpstream {
  const failures = new Map<string, number>();
  const handle = (request: Request) =>
    answer(request.method, request.url, () => request.text(), request.signal);
  const answer = async (
    method: string,
    href: string,
    body: () => Promise<string>,
    signal: AbortSignal,
  ): Promise<Response> => {
    const url = new URL(href);
    if (method !== "POST" || !url.pathname.endsWith("/v1/messages"))
      return errorResponse(404, "not_found_error", `No route ${method} ${url.pathname}`);
    let params: ScriptedRequest & { stream?: boolean };
    const raw = await body();
    try {
      params = JSON.parse(raw);
      if (typeof params.model !== "string" || !Array.isArray(params.messages)) throw new Error("shape");
    } catch {
      return errorResponse(400, "invalid_request_error", "The body must be a Messages request");
    }
    options.onRequest?.(params);
    const scripted = (options.answer ?? scriptedAnswer)(params, options, raw.length);
    await sleep(options.latencyMs ?? 0, signal);
    if (scripted.transient) {
      const key = createHash("sha256").update(raw).digest("hex");
      const seen = failures.get(key) ?? 0;
      if (seen < scripted.transient.times) {
        // Re-inserted, so the Map's order is oldest-first by last failure.
        failures.delete(key);
        failures.set(key, seen + 1);
        for (const oldest of failures.keys()) {
          if (failures.size <= MAX_TRACKED_FAILURES) break;
          failures.delete(oldest);
        }
        const retryAfter: Record<string, string> =
          options.retryAfterSeconds === undefined
            ? { "retry-after-ms": "10" }
            : { "retry-after": String(options.retryAfterSeconds) };
        if (scripted.transient.kind === "overloaded")
          return errorResponse(529, "overloaded_error", "Overloaded", retryAfter);
        if (scripted.transient.kind === "rate_limited")
          return errorResponse(429, "rate_limit_error", "Rate limited", retryAfter);
        return droppedStream(scripted);
      }
      failures.delete(key);
    }
    if (params.stream !== true) {
      const { message } = scripted;
      return Response.json({ type: "message", role: "assistant", stop_sequence: null, ...message });
    }
    return new Response(eventStream(scripted, options, signal, params), {
      status: 200,
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
    });
  };
  return {
    handle,
    get trackedFailures() {
      return failures.size;
    },
    fetch: (input, init) => {
      // The SDK's string body as it is: a Request would encode it to bytes for the model to decode again, two
      // passes over the whole history on every call.
      if (!(input instanceof Request) && typeof init?.body === "string") {
        const raw = init.body;
        return answer(init.method ?? "GET", String(input), async () => raw, init.signal ?? NEVER);
      }
      return handle(input instanceof Request ? input : new Request(input, init));
    },
  };
}

function errorResponse(
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
): Response {
  return Response.json({ type: "error", error: { type, message } }, { status, headers });
}

function frame(event: Record<string, unknown> & { type: string }): string {
  return encodeSseEvent(event.type, event);
}

/** The answer as Messages stream events, each block split into `deltasPerBlock` deltas. */
function* answerEvents(answer: ScriptedAnswer, options: ScriptedUpstreamOptions) {
  const { message } = answer;
  const parts = Math.max(1, options.deltasPerBlock ?? 1);
  const chunks = (value: string, index: number, type: string) =>
    options.chunkText
      ? options.chunkText(value, { salt: `${message.id}:${index}`, type })
      : split(value, parts);
  yield {
    type: "message_start",
    message: {
      id: message.id,
      type: "message",
      role: "assistant",
      model: message.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...message.usage, output_tokens: 1 },
    },
  };
  if (options.ping) yield { type: "ping" };
  for (const [index, block] of message.content.entries()) {
    if (answer.failAfterBlocks !== undefined && index >= answer.failAfterBlocks) {
      yield {
        type: "error",
        error: { type: "api_error", message: "The scripted model failed this turn, as the prompt asked" },
      };
      return;
    }
    switch (block.type) {
      case "text":
        yield { type: "content_block_start", index, content_block: { type: "text", text: "" } };
        for (const piece of chunks(block.text, index, "text"))
          yield { type: "content_block_delta", index, delta: { type: "text_delta", text: piece } };
        break;
      case "thinking":
        yield {
          type: "content_block_start",
          index,
          content_block: { type: "thinking", thinking: "", signature: "" },
        };
        for (const piece of chunks(block.thinking, index, "thinking"))
          yield { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: piece } };
        yield {
          type: "content_block_delta",
          index,
          delta: { type: "signature_delta", signature: block.signature },
        };
        break;
      case "redacted_thinking":
        yield { type: "content_block_start", index, content_block: block };
        break;
      case "tool_use":
        yield {
          type: "content_block_start",
          index,
          content_block: { type: "tool_use", id: block.id, name: block.name, input: {} },
        };
        for (const piece of chunks(JSON.stringify(block.input), index, "tool_use"))
          yield {
            type: "content_block_delta",
            index,
            delta: { type: "input_json_delta", partial_json: piece },
          };
        break;
      default:
        continue;
    }
    yield { type: "content_block_stop", index, delay: true };
  }
  if (answer.failAfterBlocks !== undefined) {
    yield {
      type: "error",
      error: { type: "api_error", message: "The scripted model failed this turn, as the prompt asked" },
    };
    return;
  }
  yield {
    type: "message_delta",
    delta: { stop_reason: message.stop_reason, stop_sequence: null },
    usage: message.usage,
  };
  yield { type: "message_stop" };
}

function split(value: string, parts: number): string[] {
  if (parts <= 1 || value.length <= 1) return [value];
  const size = Math.ceil(value.length / parts);
  const out: string[] = [];
  for (let at = 0; at < value.length; at += size) out.push(value.slice(at, at + size));
  return out;
}

function eventStream(
  answer: ScriptedAnswer,
  options: ScriptedUpstreamOptions,
  signal: AbortSignal,
  params: ScriptedRequest,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const events = answerEvents(answer, options);
  return new ReadableStream({
    async pull(controller) {
      const step = events.next();
      if (step.done) {
        controller.close();
        return;
      }
      const { delay, ...event } = step.value as Record<string, unknown> & { type: string; delay?: boolean };
      if (delay) await sleep(options.blockDelayMs ?? 0, signal);
      if (signal.aborted) {
        controller.error(signal.reason);
        return;
      }
      controller.enqueue(encoder.encode(frame(event)));
      if (event.type === "content_block_stop")
        options.onBlockStop?.(params, event.index as number, performance.timeOrigin + performance.now());
    },
  });
}

/** A stream that starts the message and then breaks, as a dropped upstream connection does. */
function droppedStream(answer: ScriptedAnswer): Response {
  const start = answerEvents(answer, {}).next().value as { type: string };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(frame(start)));
    },
    pull(controller) {
      controller.error(new Error("upstream connection dropped"));
    },
  });
  return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

export interface ScriptedModelServer {
  url: string;
  close(): Promise<void>;
}

/** Serves the scripted model over HTTP (`agent-api model`): a Messages upstream on `host:port`. */
export async function serveScriptedModel(
  options: ScriptedUpstreamOptions & { port?: number; host?: string } = {},
): Promise<ScriptedModelServer> {
  const upstream = createScriptedUpstream(options);
  const server: Server = createServer((req, res) => {
    bridge(upstream, req, res).catch(() => res.destroy());
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Largest request body the HTTP upstream reads (the reference server's body limit). */
const MAX_REQUEST_BYTES = 32 * 1024 * 1024;

async function bridge(upstream: ScriptedUpstream, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const abort = new AbortController();
  res.on("close", () => abort.abort());
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    // The same body limit as the server's: a caller cannot make the upstream hold or parse more.
    if (size > MAX_REQUEST_BYTES) {
      const body = JSON.stringify({
        type: "error",
        error: { type: "request_too_large", message: `Request body over ${MAX_REQUEST_BYTES} bytes` },
      });
      res.writeHead(413, { "content-type": "application/json", connection: "close" }).end(body);
      return;
    }
    chunks.push(chunk as Buffer);
  }
  const request = new Request(new URL(req.url ?? "/", "http://scripted.local"), {
    method: req.method,
    body: req.method === "POST" ? Buffer.concat(chunks) : undefined,
    signal: abort.signal,
  });
  const response = await upstream.handle(request);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (!response.body) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      // Waiting for each write to reach the socket keeps what was sent before a drop: destroy() discards
      // writes still buffered, which turned a drop mid-stream into a connection refused before any header.
      await new Promise<void>((resolve) => res.write(value, () => resolve()));
    }
    res.end();
  } catch {
    // The scripted stream broke on purpose (a dropped connection): the client must see the socket go.
    res.destroy();
  }
}
