/**
 * Writes a JSON body made in pieces on a raw Node response, each piece only once the client has read the
 * one before (the socket drained): a response holds at most a piece and the socket's buffer, however large
 * the body. A reader that leaves written bytes unread past `stallMs` is dropped, as a turn's stream is.
 * Reading stops once the client is gone (the pieces' signal is aborted), and the returned promise settles
 * only when the pieces have stopped: the request's admission slot is held until its work has ended.
 */
import type { ServerResponse } from "node:http";
import type { FastifyReply, FastifyRequest } from "fastify";
import { drained, STALL_MS } from "./sse.ts";

export interface JsonStreamOutcome {
  /** `complete`: every piece was written and the body ended; `cut`: the client left or stalled. */
  end: "complete" | "cut";
  bytes: number;
  reason?: string;
}

export async function writeJsonStream(
  res: ServerResponse,
  headers: Record<string, string | number | string[]>,
  pieces: (signal: AbortSignal) => AsyncGenerator<string>,
  options: { stallMs?: number } = {},
): Promise<JsonStreamOutcome> {
  const stallMs = options.stallMs ?? STALL_MS;
  const outcome: JsonStreamOutcome = { end: "cut", bytes: 0 };
  const abort = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) {
      outcome.reason ??= "the client closed the connection";
      abort.abort();
    }
  };
  res.on("close", onClose);
  res.writeHead(200, { ...headers, "content-type": "application/json; charset=utf-8" });
  try {
    for await (const piece of pieces(abort.signal)) {
      if (res.destroyed) break;
      outcome.bytes += Buffer.byteLength(piece);
      if (!res.write(piece) && !(await drained(res, stallMs))) {
        if (!res.destroyed) outcome.reason = `the client left the response unread for ${stallMs} ms`;
        abort.abort();
        res.destroy();
        break;
      }
    }
    if (!res.destroyed) {
      res.end();
      outcome.end = "complete";
    }
  } finally {
    res.off("close", onClose);
    if (!res.writableEnded && !res.destroyed) res.destroy();
  }
  return outcome;
}

/**
 * Answers a request with a JSON body made in pieces (writeJsonStream), with the headers hooks set on the
 * reply (CORS), and logs the request's line with how the body ended.
 */
export async function sendJsonPieces(
  request: FastifyRequest,
  reply: FastifyReply,
  pieces: (signal: AbortSignal) => AsyncGenerator<string>,
  options: { stallMs?: number } = {},
): Promise<void> {
  const headers: Record<string, string | number | string[]> = {};
  for (const [name, value] of Object.entries(reply.getHeaders()))
    if (value !== undefined) headers[name] = value;
  reply.hijack();
  const fields = { method: request.method, url: request.url.slice(0, 300), status: 200 };
  try {
    const outcome = await writeJsonStream(reply.raw, headers, pieces, options);
    const line = {
      ...fields,
      ms: Math.round(reply.elapsedTime),
      key: request.caller?.keyLabel,
      body: outcome,
    };
    if (outcome.end === "complete") request.log.info(line, "request");
    else request.log.warn(line, "response body cut before its end");
  } catch (error) {
    // The status and part of the body are out: all that is left is to cut the response.
    request.log.error({ ...fields, err: error }, "response body failed");
    reply.raw.destroy();
  }
}
