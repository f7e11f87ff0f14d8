/**
 * Every error the reference server answers, in one catalogue with stable codes (like Fastify's
 * lib/errors.js): a code fixes the status and the messages API's error type, so tests, logs and operators
 * can name an error without matching its text. The service raises them; the http layer alone turns one
 * into a response body (http/error-body.ts), and once a stream is open the same failure becomes an SSE
 * `error` event instead. reference-server/README.md lists them for operators.
 *
 * Failures after a turn's stream opened have codes of their own (`afterStreamOpens`). The API's `error`
 * event carries only `{type: "api_error", message}`, so the code never goes on the stream: the human message
 * does, and the code is in the turn's log line (`code`) and in the transcript's raw error event (whose shape
 * the API leaves to the server). Their status is never sent; its class says whose failure it was.
 */
import type { ErrorType } from "@agent-api/client/protocol";

export type { ErrorType };

interface CatalogueEntry {
  status: number;
  /** The messages API's error type name (the spec's `ErrorType`), so clients built for it recognise it. */
  type: ErrorType;
  /** The text when the API fixes it; otherwise each raise says what went wrong. */
  message?: string;
  /** Only ever a turn stream's `error` event (the stream is open by then, so the status is never sent). */
  afterStreamOpens?: true;
}

export const errorCatalogue = {
  AGENT_API_BAD_REQUEST: { status: 400, type: "invalid_request_error" },
  AGENT_API_UNAUTHORIZED: {
    status: 401,
    type: "authentication_error",
    message: "Missing or unrecognized API key",
  },
  // The API fixes this body exactly (see http/error-body.ts).
  AGENT_API_KEY_REVOKED: { status: 401, type: "authentication_error", message: "API key has been revoked" },
  AGENT_API_FORBIDDEN: { status: 403, type: "permission_error" },
  AGENT_API_NOT_FOUND: { status: 404, type: "not_found_error" },
  AGENT_API_CONVERSATION_NOT_FOUND: {
    status: 404,
    type: "not_found_error",
    message: "Conversation not found",
  },
  AGENT_API_CONFLICT: { status: 409, type: "invalid_request_error" },
  AGENT_API_BODY_TOO_LARGE: { status: 413, type: "request_too_large" },
  AGENT_API_HEAD_TOO_LARGE: {
    status: 431,
    type: "invalid_request_error",
    message: "The request head is larger than 16 KiB",
  },
  /** A cap on pending work of one key or one conversation (see http/admission.ts, coordination/locks.ts). */
  AGENT_API_TOO_MANY_REQUESTS: { status: 429, type: "rate_limit_error" },
  AGENT_API_NOT_IMPLEMENTED: { status: 501, type: "invalid_request_error" },
  /** A refusal of the HTTP framework (Fastify, the router, Node's parser) that has no code of its own. */
  AGENT_API_REQUEST_REFUSED: { status: 400, type: "invalid_request_error" },
  AGENT_API_FLOW_STEP_FAILED: { status: 502, type: "api_error" },
  /**
   * A repository agent's writable turn whose changes the server would not commit, push or check out (a nested
   * `.git`, more than the disk quota once checked out). Only ever the stream's `error` event: the stream is
   * open by then, so the status is never sent.
   */
  AGENT_API_REPO_REFUSED: { status: 409, type: "api_error", afterStreamOpens: true },
  /** The model's upstream could not be reached, or dropped the connection, past the retries. */
  AGENT_API_UPSTREAM_UNREACHABLE: { status: 502, type: "api_error", afterStreamOpens: true },
  /** The model's upstream answered overloaded (529, `overloaded_error`) past the retries. */
  AGENT_API_UPSTREAM_OVERLOADED: { status: 503, type: "api_error", afterStreamOpens: true },
  /** The model's upstream answered rate limited (429, `rate_limit_error`) past the retries. */
  AGENT_API_UPSTREAM_RATE_LIMITED: { status: 429, type: "api_error", afterStreamOpens: true },
  /** Any other failure of the model's upstream: an error status, an `error` event in its stream. */
  AGENT_API_UPSTREAM_FAILED: { status: 502, type: "api_error", afterStreamOpens: true },
  AGENT_API_TURN_TIMED_OUT: {
    status: 504,
    type: "api_error",
    message: "The turn timed out",
    afterStreamOpens: true,
  },
  /** The client went away (or left events unread too long): the event reaches the log and transcript only. */
  AGENT_API_CLIENT_DISCONNECTED: {
    status: 499,
    type: "api_error",
    message: "The client disconnected before the turn finished",
    afterStreamOpens: true,
  },
  /** A delete of the conversation, on this instance or another, ended its running turn. */
  AGENT_API_CONVERSATION_DELETED: {
    status: 410,
    type: "api_error",
    message: "The conversation was deleted during the turn",
    afterStreamOpens: true,
  },
  /** A shutdown past its grace period ended the running turn. */
  AGENT_API_SERVER_STOPPING: {
    status: 503,
    type: "api_error",
    message: "The server is shutting down",
    afterStreamOpens: true,
  },
  /** The process died during the turn; the next start (or another instance) recorded it. Transcript only. */
  AGENT_API_SERVER_STOPPED: {
    status: 503,
    type: "api_error",
    message: "The server stopped before the turn finished",
    afterStreamOpens: true,
  },
  /** The turn's lease on its conversation ran out and another instance took it: its writes were refused. */
  AGENT_API_TURN_LEASE_LOST: { status: 409, type: "api_error", afterStreamOpens: true },
  /** The store refused the finished turn's transcript for another reason. */
  AGENT_API_TURN_NOT_STORED: {
    status: 500,
    type: "api_error",
    message: "The turn could not be stored",
    afterStreamOpens: true,
  },
  AGENT_API_TURN_NO_OUTCOME: {
    status: 500,
    type: "api_error",
    message: "The turn ended without an outcome",
    afterStreamOpens: true,
  },
  /** The turn's signal was aborted for no reason the server knows (none of the above). */
  AGENT_API_TURN_INTERRUPTED: {
    status: 500,
    type: "api_error",
    message: "The turn was interrupted",
    afterStreamOpens: true,
  },
  /** The turn's sandbox could not be prepared (attachments, restore, clone) or finished (publish, push). */
  /**
   * Several instances: the conversation's working files are past the disk quota, so they are not saved to
   * the shared store (or stored ones are past this instance's quota, so not restored).
   */
  AGENT_API_FILES_OVER_QUOTA: { status: 507, type: "api_error", afterStreamOpens: true },
  AGENT_API_SANDBOX_FAILED: {
    status: 500,
    type: "api_error",
    message: "The agent's working directory could not be prepared or finished for this turn",
    afterStreamOpens: true,
  },
  /** Also a turn's failure the server has no code for (a fault of the server's own). */
  AGENT_API_INTERNAL: { status: 500, type: "api_error", message: "Internal server error" },
  /**
   * The server's disk (or the database's) is full: nothing of this request was stored. The request's own
   * error, before or after its stream opened; the server goes on, and each workspace's disk share
   * (service/disk-shares.ts) is what keeps one tenant from filling it.
   */
  AGENT_API_DISK_FULL: {
    status: 503,
    type: "overloaded_error",
    message: "The server's disk is full: nothing of this request was stored; try again later",
  },
  /** A cap on pending work of the whole server instance: every caller is refused alike, so it is a 503. */
  AGENT_API_OVERLOADED: { status: 503, type: "overloaded_error" },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof errorCatalogue;

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: ErrorType;
  /** Seconds for the `Retry-After` header of a refusal that passes with time (429, 503). */
  retryAfterSeconds?: number;
  /**
   * What the operator needs and the caller must not see (a host path, git's or the store's own words): it goes
   * to the log line only, never to a response, an event or the transcript.
   */
  detail?: string;

  /** `status` overrides the catalogue's only for AGENT_API_REQUEST_REFUSED (the framework's own 4xx). */
  constructor(code: ErrorCode, message?: string, status?: number) {
    const entry: CatalogueEntry = errorCatalogue[code];
    super(message ?? entry.message ?? code);
    this.name = "ApiError";
    this.code = code;
    this.status = code === "AGENT_API_REQUEST_REFUSED" && status !== undefined ? status : entry.status;
    this.type = entry.type;
  }
}

export const badRequest = (message: string) => new ApiError("AGENT_API_BAD_REQUEST", message);
export const unauthorized = () => new ApiError("AGENT_API_UNAUTHORIZED");
export const revokedKey = () => new ApiError("AGENT_API_KEY_REVOKED");
export const forbidden = (message: string) => new ApiError("AGENT_API_FORBIDDEN", message);
export const notFound = (message: string) => new ApiError("AGENT_API_NOT_FOUND", message);
export const conversationNotFound = () => new ApiError("AGENT_API_CONVERSATION_NOT_FOUND");
export const conflict = (message: string) => new ApiError("AGENT_API_CONFLICT", message);
export const notImplemented = (message: string) => new ApiError("AGENT_API_NOT_IMPLEMENTED", message);
/** Over a cap on pending work: a fast refusal the caller may retry after `retryAfterSeconds`. */
export function overCap(
  scope: "server" | "workspace" | "key" | "conversation",
  message: string,
  retryAfterSeconds = 1,
) {
  const error = new ApiError(
    scope === "server" ? "AGENT_API_OVERLOADED" : "AGENT_API_TOO_MANY_REQUESTS",
    message,
  );
  error.retryAfterSeconds = retryAfterSeconds;
  return error;
}
export const flowStepFailed = (message: string) => new ApiError("AGENT_API_FLOW_STEP_FAILED", message);
export const repoRefused = (message: string) => new ApiError("AGENT_API_REPO_REFUSED", message);
export const filesOverQuota = (message: string) => new ApiError("AGENT_API_FILES_OVER_QUOTA", message);

export function sandboxFailed(detail: string): ApiError {
  const error = new ApiError("AGENT_API_SANDBOX_FAILED");
  error.detail = detail;
  return error;
}

/** Whether a string is a code of the catalogue (one read back from the store or another instance). */
export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(errorCatalogue, value);
}
