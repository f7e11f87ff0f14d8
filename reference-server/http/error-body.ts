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

/**
 * Stock SDKs of the messages API retry 408, 409, 429 and every 5xx unless the answer says `x-should-retry:
 * false`. An answer that the same request will get again is marked so, to spare the caller's retries and
 * their waits: a 4xx says the request is wrong (its key, its role, its ids, its body), so it is marked,
 * except 408 (the request arrived too slowly: it may not next time) and 429 (a cap on pending work that
 * drains). The server's only 409 before a stream opens is a fork's taken id, which stays taken. A 501 (async
 * delivery) never changes. Other 5xx (500, 502, 503) may clear and carry no mark.
 */
export function shouldRetryHeader(error: ApiError): { "x-should-retry": "false" } | undefined {
  const { status } = error;
  const permanent = status === 501 || (status >= 400 && status < 500 && status !== 408 && status !== 429);
  return permanent ? { "x-should-retry": "false" } : undefined;
}
