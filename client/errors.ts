/** Typed errors of the Agent Conversation API client. */
import type { components } from "../generated/api-types.ts";

type ErrorEvent = components["schemas"]["ErrorEvent"];

/** A non-2xx response: carries the HTTP status and the parsed body (JSON, else text, else undefined). */
export class AgentApiError extends Error {
  readonly status: number;
  readonly body: unknown;

  constructor(status: number, body: unknown, operation: string) {
    super(`${operation} failed with HTTP ${status}${describeBody(body)}`);
    this.name = "AgentApiError";
    this.status = status;
    this.body = body;
  }
}

/** An `error` event arrived on a turn stream (a failure after the 200 response was sent). */
export class StreamErrorEventError extends Error {
  readonly event: ErrorEvent;
  /** The error's `type` from the event data (the API uses `api_error`). */
  readonly errorType: string;

  constructor(event: ErrorEvent) {
    super(`turn failed after the stream opened: ${event.error.message}`);
    this.name = "StreamErrorEventError";
    this.event = event;
    this.errorType = event.error.type;
  }
}

/** The turn stream broke the event-stream format (bad JSON in `data:`, or it ended before `message_stop`). */
export class StreamProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StreamProtocolError";
  }
}

function describeBody(body: unknown): string {
  if (body && typeof body === "object") {
    const record = body as { message?: unknown; error?: { message?: unknown } };
    const message = record.message ?? record.error?.message;
    if (typeof message === "string") return `: ${message}`;
  }
  if (typeof body === "string" && body.length > 0) return `: ${body.slice(0, 200)}`;
  return "";
}
