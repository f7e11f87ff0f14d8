/**
 * Writes a turn's events as server-sent events on a raw Node response: `event: <type>` then `data: <JSON>`
 * per frame, no `[DONE]` sentinel. A client that goes away aborts the turn's signal; the turn still runs
 * its bookkeeping to the end (the generator is always drained) so the transcript is never half-written.
 * What reached the client is returned, so a stream cut before `message_stop` can be logged as such.
 */
import type { ServerResponse } from "node:http";
import { encodeSseEvent } from "@agent-api/client/sse";
import type { ErrorCode } from "../errors/catalogue.ts";
import { errorEvent, KEEP_ALIVE, type TurnStreamItem } from "../turn/events.ts";
import { conversationIdHeader } from "./conversation-id-header.ts";

export function frame(event: TurnStreamItem): string {
  // A comment line: every SSE parser skips it, and it keeps idle-timing proxies from cutting the stream.
  if (event.type === "keep_alive") return ": keep-alive\n\n";
  // The API's error event has a message and no code: the code goes to the log (StreamOutcome.code).
  if (event.type === "turn_failed") return encodeSseEvent("error", errorEvent(event.failure.message));
  return encodeSseEvent(event.type, event);
}

/** How long a client may leave written events unread before it is dropped (default). */
export const STALL_MS = 30_000;

/**
 * Longest silence on a turn's stream before a comment line is written (default). A proxy cuts a stream
 * that stays quiet past its idle time-out, so this must stay below the smallest one met in the field: 10 s
 * (load balancers and API gateways set it that low). Half of it leaves room for a busy event loop and for
 * the proxy's own timer granularity; the cost is 14 bytes every 5 s of a quiet turn.
 */
export const KEEP_ALIVE_MS = 5_000;

export interface StreamOptions {
  stallMs?: number;
  keepAliveMs?: number;
}

/** How a turn's stream ended, as far as the client was sent it. */
export interface StreamOutcome {
  /** `complete`: message_stop was sent; `error`: an error event ended it; `cut`: neither reached the client. */
  end: "complete" | "error" | "cut";
  /** Why a stream was cut (the client went away, stopped reading), or the error event's message. */
  reason?: string;
  /** The catalogue code of the turn's failure, also when its error event did not reach the client. */
  code?: ErrorCode;
  /** The failure's inside story for the operator (never sent): see ApiError.detail. */
  detail?: string;
  /** Events sent (comment lines not counted). */
  events: number;
  lastEvent?: string;
  /** Content blocks sent whole (their content_block_stop was sent). */
  blocks: number;
}

/** Resolves true once the socket drained, false when it closed or stalled past `ms`. */
export function drained(res: ServerResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      res.off("drain", onDrain);
      res.off("close", onClose);
      resolve(ok);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    const timer = setTimeout(() => done(false), ms);
    res.on("drain", onDrain);
    res.on("close", onClose);
  });
}

export async function writeEventStream(
  res: ServerResponse,
  conversationId: string,
  run: (signal: AbortSignal) => AsyncGenerator<TurnStreamItem, void, void>,
  options: StreamOptions = {},
): Promise<StreamOutcome> {
  const stallMs = options.stallMs ?? STALL_MS;
  const keepAliveMs = options.keepAliveMs ?? KEEP_ALIVE_MS;
  const outcome: StreamOutcome = { end: "cut", events: 0, blocks: 0 };
  const abort = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) {
      outcome.reason ??= "the client closed the connection";
      abort.abort();
    }
  };
  res.on("close", onClose);
  // no-transform: a proxy or CDN must not recompress or rewrite the stream (which buffers it). No
  // Connection header: Node picks keep-alive, or close for an HTTP/1.0 request (nginx's default upstream
  // protocol), where the end of the connection is the only end a response without a length can have.
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    "x-accel-buffering": "no",
    "x-conversation-id": conversationIdHeader(conversationId),
  });
  // Sent now: message_start waits for the upstream's first answer (it carries the input usage), and the
  // headers must not wait with it (a client and a proxy's first-byte time-out would see nothing for the
  // model's latency; reference-server/test/engine-loop.test.ts).
  res.flushHeaders();
  // Every silence is covered, not only the model's: attachments being written, a tool, the commit and push.
  let keepAlive: NodeJS.Timeout | undefined;
  const beat = () => {
    if (res.destroyed || res.writableEnded) return;
    res.write(frame(KEEP_ALIVE));
    keepAlive = setTimeout(beat, keepAliveMs);
  };
  const rearm = () => {
    clearTimeout(keepAlive);
    keepAlive = setTimeout(beat, keepAliveMs);
  };
  rearm();
  try {
    for await (const event of run(abort.signal)) {
      if (event.type === "turn_failed") {
        outcome.code = event.failure.code;
        if (event.failure.detail) outcome.detail = event.failure.detail;
      }
      if (res.destroyed || res.writableEnded) continue;
      rearm();
      const written = res.write(frame(event));
      if (event.type !== "keep_alive") {
        outcome.events++;
        outcome.lastEvent = event.type;
        if (event.type === "content_block_stop") outcome.blocks++;
        else if (event.type === "message_stop") outcome.end = "complete";
        else if (event.type === "turn_failed") {
          outcome.end = "error";
          outcome.reason = event.failure.message;
        }
      }
      if (!written && !(await drained(res, stallMs))) {
        // A client that stops reading must not hold the conversation's turn lock: drop it, finish the turn.
        if (!res.destroyed) outcome.reason = `the client left events unread for ${stallMs} ms`;
        res.destroy();
      }
    }
  } finally {
    clearTimeout(keepAlive);
    res.off("close", onClose);
    if (!res.writableEnded) res.end();
  }
  // The last event was written but may not have reached a client that left at that moment.
  if (outcome.end !== "cut" && res.destroyed && !res.writableFinished) {
    outcome.end = "cut";
    outcome.reason ??= "the connection closed before the last event was sent";
  }
  return outcome;
}
