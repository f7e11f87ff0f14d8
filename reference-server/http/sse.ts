/**
 * Writes a turn's events as server-sent events on a raw Node response: `event: <type>` then `data: <JSON>`
 * per frame, no `[DONE]` sentinel. A client that goes away aborts the turn's signal; the turn still runs
 * its bookkeeping to the end (the generator is always drained) so the transcript is never half-written.
 */
import type { ServerResponse } from "node:http";
import { encodeSseEvent } from "../../client/sse.ts";
import { conversationIdHeader } from "../service/prompt.ts";
import type { TurnStreamItem } from "../service/stream-events.ts";

export function frame(event: TurnStreamItem): string {
  // A comment line: every SSE parser skips it, and it keeps idle-timing proxies from cutting the stream.
  if (event.type === "keep_alive") return ": keep-alive\n\n";
  return encodeSseEvent(event.type ?? "error", event);
}

/** How long a client may leave written events unread before it is dropped (default). */
export const STALL_MS = 30_000;

/** Resolves true once the socket drained, false when it closed or stalled past `ms`. */
function drained(res: ServerResponse, ms: number): Promise<boolean> {
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
  stallMs: number = STALL_MS,
): Promise<void> {
  const abort = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) abort.abort();
  };
  res.on("close", onClose);
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    connection: "keep-alive",
    "x-accel-buffering": "no",
    "x-conversation-id": conversationIdHeader(conversationId),
  });
  // No flushHeaders(): the headers go out with message_start, which follows at once, in one write.
  try {
    for await (const event of run(abort.signal)) {
      if (res.destroyed || res.writableEnded) continue;
      if (!res.write(frame(event)) && !(await drained(res, stallMs))) {
        // A client that stops reading must not hold the conversation's turn lock: drop it, finish the turn.
        res.destroy();
      }
    }
  } finally {
    res.off("close", onClose);
    if (!res.writableEnded) res.end();
  }
}
