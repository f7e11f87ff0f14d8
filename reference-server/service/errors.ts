/**
 * Errors the service raises before a stream opens. The http layer maps them to a status and JSON body;
 * once a stream is open the same failures become an SSE `error` event instead.
 */
import type { ErrorType } from "../../generated/protocol.ts";

/** The messages API's error type names (the spec's `ErrorType`), so that clients built for it recognise every error. */
export type { ErrorType };

export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  /** Exact body to send instead of the standard shape (the seed fixes the revoked-key body). */
  readonly exactBody: Record<string, unknown> | undefined;

  constructor(status: number, type: ErrorType, message: string, exactBody?: Record<string, unknown>) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.type = type;
    this.exactBody = exactBody;
  }

  /**
   * The messages API's error envelope with the seed's `message` beside it (the seed leaves the shape open):
   * clients built on AI SDKs read `error.message`, the seed's callers read `message`.
   */
  toBody(): Record<string, unknown> {
    return (
      this.exactBody ?? {
        type: "error",
        error: { type: this.type, message: this.message },
        message: this.message,
      }
    );
  }
}

export const badRequest = (message: string) => new ApiError(400, "invalid_request_error", message);
export const unauthorized = () =>
  new ApiError(401, "authentication_error", "Missing or unrecognized API key");
export const revokedKey = () =>
  new ApiError(401, "authentication_error", "API key has been revoked", {
    message: "API key has been revoked",
  });
export const forbidden = (message: string) => new ApiError(403, "permission_error", message);
export const notFound = (message: string) => new ApiError(404, "not_found_error", message);
export const conversationNotFound = () => notFound("Conversation not found");
export const conflict = (message: string) => new ApiError(409, "invalid_request_error", message);
export const notImplemented = (message: string) => new ApiError(501, "invalid_request_error", message);
