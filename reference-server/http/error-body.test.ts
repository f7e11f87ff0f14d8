import { describe, expect, it } from "vitest";
import { ApiError, type ErrorCode, errorCatalogue, revokedKey } from "../errors/catalogue.ts";
import { errorBody, shouldRetryHeader } from "./error-body.ts";

describe("the error catalogue and its one body writer", () => {
  it("gives every code a 4xx/5xx status, and an error raised by code takes both from the catalogue", () => {
    for (const [code, entry] of Object.entries(errorCatalogue)) {
      expect(entry.status).toBeGreaterThanOrEqual(400);
      const error = new ApiError(code as ErrorCode, "why");
      expect([error.code, error.status, error.type]).toEqual([code, entry.status, entry.type]);
    }
  });

  it("writes the messages API's envelope with the API's message beside it", () => {
    expect(errorBody(new ApiError("AGENT_API_FORBIDDEN", "Viewers cannot send messages"))).toEqual({
      type: "error",
      error: { type: "permission_error", message: "Viewers cannot send messages" },
      message: "Viewers cannot send messages",
    });
    expect(errorBody(new ApiError("AGENT_API_CONVERSATION_NOT_FOUND")).message).toBe(
      "Conversation not found",
    );
  });

  it("writes the revoked-key body exactly as the API fixes it", () => {
    expect(errorBody(revokedKey())).toEqual({ message: "API key has been revoked" });
  });

  it("lets only the framework's refusal carry its own status", () => {
    expect(new ApiError("AGENT_API_REQUEST_REFUSED", "x", 405).status).toBe(405);
    expect(new ApiError("AGENT_API_FORBIDDEN", "x", 405).status).toBe(403);
  });
});

describe("x-should-retry: false on answers a retry cannot change", () => {
  const status = (s: number) => new ApiError("AGENT_API_REQUEST_REFUSED", "x", s);
  it("marks every 4xx but 408 and 429, and the 501", () => {
    for (const code of [
      "AGENT_API_BAD_REQUEST",
      "AGENT_API_UNAUTHORIZED",
      "AGENT_API_KEY_REVOKED",
      "AGENT_API_FORBIDDEN",
      "AGENT_API_NOT_FOUND",
      "AGENT_API_CONVERSATION_NOT_FOUND",
      "AGENT_API_CONFLICT",
      "AGENT_API_BODY_TOO_LARGE",
      "AGENT_API_HEAD_TOO_LARGE",
      "AGENT_API_NOT_IMPLEMENTED",
    ] as const)
      expect(shouldRetryHeader(new ApiError(code, "x")), code).toEqual({ "x-should-retry": "false" });
    expect(shouldRetryHeader(status(405))).toEqual({ "x-should-retry": "false" });
  });
  it("leaves unmarked what may clear: 408, 429 and the other 5xx", () => {
    expect(shouldRetryHeader(status(408))).toBeUndefined();
    expect(shouldRetryHeader(new ApiError("AGENT_API_TOO_MANY_REQUESTS", "x"))).toBeUndefined();
    for (const code of ["AGENT_API_INTERNAL", "AGENT_API_FLOW_STEP_FAILED", "AGENT_API_OVERLOADED"] as const)
      expect(shouldRetryHeader(new ApiError(code, "x")), code).toBeUndefined();
  });
});
