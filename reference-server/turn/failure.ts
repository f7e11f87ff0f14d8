/**
 * A turn's failure after its stream opened, named by the error catalogue: the code goes to the turn's log line
 * and its transcript, the human message to the stream's `error` event. Every way a turn fails gets one code
 * here, from what was thrown (engine, sandbox, store) or from why the turn's signal fired.
 */
import { UpstreamError, type UpstreamFailureKind } from "../engine/index.ts";
import { ApiError, type ErrorCode, errorCatalogue } from "../errors/catalogue.ts";
import { isDiskFull } from "../errors/disk-full.ts";
import { TurnLeaseLostError } from "../store/types.ts";

export interface TurnFailure {
  code: ErrorCode;
  /** The stream's error event and the transcript carry this. */
  message: string;
  /** The log line's only: what went wrong inside the server (a host path, git's or the store's words). */
  detail?: string;
}

/** Codes whose message the catalogue fixes, so naming the code says it all. */
type FixedMessageCode = {
  [C in ErrorCode]: (typeof errorCatalogue)[C] extends { message: string } ? C : never;
}[ErrorCode];

/** The failure of a code whose text the catalogue fixes. */
export function fixedFailure(code: FixedMessageCode): TurnFailure {
  return { code, message: errorCatalogue[code].message };
}

const UPSTREAM_CODES: Record<UpstreamFailureKind, ErrorCode> = {
  unreachable: "AGENT_API_UPSTREAM_UNREACHABLE",
  overloaded: "AGENT_API_UPSTREAM_OVERLOADED",
  rate_limited: "AGENT_API_UPSTREAM_RATE_LIMITED",
  failed: "AGENT_API_UPSTREAM_FAILED",
};

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function detailOf(error: unknown): string {
  return error instanceof ApiError && error.detail ? error.detail : messageOf(error);
}

/**
 * What the engine or the sandbox threw, with the message it chose for the caller; a fault of the server's own
 * otherwise, whose words stay in the log.
 */
export function failureOf(error: unknown): TurnFailure {
  if (isDiskFull(error)) return { ...fixedFailure("AGENT_API_DISK_FULL"), detail: detailOf(error) };
  if (error instanceof ApiError) {
    return { code: error.code, message: error.message, ...(error.detail ? { detail: error.detail } : {}) };
  }
  if (error instanceof UpstreamError) return { code: UPSTREAM_CODES[error.kind], message: error.message };
  // The sandbox's save of the turn's files met the fence before the transcript's commit could.
  if (error instanceof TurnLeaseLostError) return storeFailureOf(error);
  return { ...fixedFailure("AGENT_API_INTERNAL"), detail: messageOf(error) };
}

/** What the store (or the check before it) threw when the finished turn was written. */
export function storeFailureOf(error: unknown): TurnFailure {
  if (isDiskFull(error)) return { ...fixedFailure("AGENT_API_DISK_FULL"), detail: detailOf(error) };
  if (error instanceof TurnLeaseLostError) {
    return { code: "AGENT_API_TURN_LEASE_LOST", message: `The turn could not be stored: ${error.message}` };
  }
  if (error instanceof ApiError) {
    return { code: error.code, message: `The turn could not be stored: ${error.message}` };
  }
  return { ...fixedFailure("AGENT_API_TURN_NOT_STORED"), detail: messageOf(error) };
}

/** Why the server may end a running turn early; what another instance publishes to end one of this instance. */
const INTERRUPT_CODES = [
  "AGENT_API_CONVERSATION_DELETED",
  "AGENT_API_SERVER_STOPPING",
  "AGENT_API_TURN_INTERRUPTED",
] as const satisfies readonly FixedMessageCode[];

export type InterruptCode = (typeof INTERRUPT_CODES)[number];

/** An interrupt's code as published between instances; one this instance does not know ends the turn all the same. */
export function interruptCode(published: string): InterruptCode {
  return (INTERRUPT_CODES as readonly string[]).includes(published)
    ? (published as InterruptCode)
    : "AGENT_API_TURN_INTERRUPTED";
}
