/** The one log line a request leaves: never headers or bodies (keys and prompts are secrets of the caller). */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { StreamOutcome } from "./sse.ts";

export function requestFields(request: FastifyRequest, status: number, ms: number) {
  return {
    method: request.method,
    url: request.url.length > 300 ? `${request.url.slice(0, 300)}…` : request.url,
    status,
    ms: Math.round(ms),
    key: request.caller?.keyLabel,
  };
}

/**
 * A turn's line: info when message_stop reached the client; warn, with how far it got and the code of its
 * failure, otherwise.
 */
export function logTurnStream(
  request: FastifyRequest,
  reply: FastifyReply,
  conversation: string,
  outcome: StreamOutcome,
): void {
  const { code, detail, ...stream } = outcome;
  // `code`: the error catalogue's name of the turn's failure (reference-server/README.md), which the
  // stream's error event, in the API's shape, does not carry.
  const fields = {
    ...requestFields(request, reply.raw.statusCode, reply.elapsedTime),
    conversation,
    ...(code ? { code } : {}),
    ...(detail ? { detail } : {}),
    stream,
  };
  if (outcome.end === "complete") request.log.info(fields, "request");
  else if (outcome.end === "error") request.log.warn(fields, "turn stream ended with an error event");
  else request.log.warn(fields, "turn stream incomplete: it ended before message_stop");
}
