/** Which answers are the API's and which a deployment's own, and what each of the latter is called. */
import { request } from "undici";
import { describe, expect, it } from "vitest";
import { diagnoseForeignResponse, diagnoseTransportError } from "./deployment-errors.ts";

const post = { method: "POST", url: "http://h/agentapi/api/agents/a/v1/messages" };

describe("diagnoseForeignResponse", () => {
  it("takes the API's JSON answers and event streams as the API's, whatever the status", () => {
    const json = { "content-type": "application/json" };
    expect(diagnoseForeignResponse(404, json, '{"error":{"type":"not_found"}}', post)).toBeNull();
    expect(diagnoseForeignResponse(413, json, '{"error":{}}', post)).toBeNull();
    expect(
      diagnoseForeignResponse(200, { "content-type": "text/event-stream" }, "event: x\n\n", post),
    ).toBeNull();
    expect(diagnoseForeignResponse(204, {}, "", post)).toBeNull();
  });

  it("names a page in front of the API, by status", () => {
    const text = { "content-type": "text/plain" };
    expect(diagnoseForeignResponse(504, text, "Gateway Time-out", post)?.cause).toContain(
      "proxy_read_timeout",
    );
    expect(diagnoseForeignResponse(502, {}, "", post)?.cause).toContain("upstream");
    expect(diagnoseForeignResponse(502, {}, "", post)?.cause).not.toContain("body size");
    // Caddy's request_body max_size answers a cut upload with 502: for a large body, the limit comes first.
    const large = diagnoseForeignResponse(502, {}, "", { ...post, bodyBytes: 14_700_000 });
    expect(large?.cause).toMatch(/^a proxy's request body size limit is below this request's 14\.7 MB body/);
    expect(large?.fix).toContain("request_body { max_size 16MB }");
    // A web app's catch-all answering the API's path with its index page.
    const spa = diagnoseForeignResponse(
      200,
      { "content-type": "text/html" },
      "<!doctype html><div id=app>",
      post,
    );
    expect(spa?.fix).toContain("before any catch-all route");
    const sso = diagnoseForeignResponse(403, {}, "<html><body>Sign in</body></html>", post);
    expect(sso?.cause).toContain("authentication layer");
  });
});

describe("diagnoseTransportError", () => {
  it("names a closed port with the fix, from undici's real error", async () => {
    const error = await request("http://127.0.0.1:1/api/agents").then(
      () => null,
      (e: unknown) => e,
    );
    const d = diagnoseTransportError(error, { method: "GET", url: "http://127.0.0.1:1/api/agents" });
    expect(d?.problem).toContain("ECONNREFUSED");
    expect(d?.fix).toContain("correct the host and port");
  });

  it("says nothing it cannot tell (a reset of a small request is no body limit)", () => {
    const reset = Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" });
    expect(diagnoseTransportError(reset, { method: "GET", url: "http://h/x" })).toBeNull();
    expect(diagnoseTransportError(reset, { ...post, bodyBytes: 14_000_000 })?.fix).toContain("16 MB");
  });
});
