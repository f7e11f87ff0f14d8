/**
 * The one place an error becomes a response body. The API fixes only the revoked-key body; every other
 * error gets the messages API's error envelope with the API's `message` beside it (the spec's ErrorBody):
 * clients built on AI SDKs read `error.message`, the API's callers read `message`.
 */
import type { ApiError } from "../errors/catalogue.ts";

export function errorBody(error: ApiError): Record<string, unknown> {
  if (error.code === "AGENT_API_KEY_REVOKED") return { message: error.message };
  return { type: "error", error: { type: error.type, message: error.message }, message: error.message };
}
