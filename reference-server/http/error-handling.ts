/**
 * Every failure before a stream opens answers with the API's JSON error body: a thrown ApiError, Fastify's
 * own refusals (bad JSON, body too large, a malformed %-escape), an unknown route, and requests Node's HTTP
 * parser refuses before Fastify sees them.
 */
import type { Socket } from "node:net";
import type { FastifyInstance } from "fastify";
import { ApiError, notFound } from "../errors/catalogue.ts";
import { isDiskFull } from "../errors/disk-full.ts";
import { errorBody, shouldRetryHeader } from "./error-body.ts";
import { BODY_LIMIT_BYTES } from "./request-limits.ts";

/** Fastify's own errors (bad JSON, body too large, ...) carry a statusCode; map them to our error body. */
export function toApiError(error: unknown): ApiError {
  if (isDiskFull(error)) {
    const full = new ApiError("AGENT_API_DISK_FULL");
    full.retryAfterSeconds = 30;
    full.detail = error instanceof Error ? ((error as ApiError).detail ?? error.message) : String(error);
    return full;
  }
  if (error instanceof ApiError) return error;
  const status = (error as { statusCode?: number }).statusCode;
  const message = error instanceof Error ? error.message : String(error);
  if (status === 413)
    return new ApiError("AGENT_API_BODY_TOO_LARGE", `Request body is larger than ${BODY_LIMIT_BYTES} bytes`);
  // Bodies are read as JSON whatever their type; a Content-Type that is not even a media type is a bad request.
  if (status === 415)
    return new ApiError("AGENT_API_REQUEST_REFUSED", "Content-Type is not a valid media type");
  if (typeof status === "number" && status >= 400 && status < 500)
    return new ApiError("AGENT_API_REQUEST_REFUSED", message, status);
  return new ApiError("AGENT_API_INTERNAL");
}

/**
 * Requests Node's HTTP parser refuses (a head over 16 KiB: 431, garbage: 400, too slow: 408) get our error
 * body and an explicit Connection: close, so a keep-alive client knows the socket is done.
 */
export function clientErrorHandler(requestTimeout: number, headersTimeout: number) {
  return (error: Error, socket: Socket): void => {
    // Bytes already written belong to a response of this socket: adding ours would garble it.
    if (!socket.writable || socket.bytesWritten > 0) {
      socket.destroy();
      return;
    }
    const code = (error as { code?: string }).code;
    const [apiError, text] =
      code === "HPE_HEADER_OVERFLOW"
        ? [new ApiError("AGENT_API_HEAD_TOO_LARGE"), "Request Header Fields Too Large"]
        : code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? [
              new ApiError(
                "AGENT_API_REQUEST_REFUSED",
                `The request did not arrive within ${requestTimeout} ms (head within ${headersTimeout} ms)`,
                408,
              ),
              "Request Timeout",
            ]
          : [new ApiError("AGENT_API_REQUEST_REFUSED", "The request is not valid HTTP"), "Bad Request"];
    const body = JSON.stringify(errorBody(apiError));
    const retry = shouldRetryHeader(apiError) ? "x-should-retry: false\r\n" : "";
    socket.end(
      `HTTP/1.1 ${apiError.status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${retry}Connection: close\r\n\r\n${body}`,
    );
  };
}

/** Thrown errors and unknown routes, as the API's error body. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    const apiError = toApiError(error);
    if (apiError.status >= 500 && apiError.code !== "AGENT_API_OVERLOADED")
      request.log.error({ err: error }, "request failed");
    if (apiError.retryAfterSeconds !== undefined)
      reply.header("retry-after", String(apiError.retryAfterSeconds));
    // A refusal before the body was read: closing the connection spares reading the rest of it (Node
    // would otherwise read and discard it to keep the connection).
    if (!request.raw.complete) reply.header("connection", "close");
    reply
      .code(apiError.status)
      .headers(shouldRetryHeader(apiError) ?? {})
      .type("application/json")
      .send(errorBody(apiError));
  });

  app.setNotFoundHandler((request, reply) => {
    const error = notFound(`No route for ${request.method} ${request.url.split("?")[0]}`);
    reply
      .code(404)
      .headers(shouldRetryHeader(error) ?? {})
      .type("application/json")
      .send(errorBody(error));
  });
}
