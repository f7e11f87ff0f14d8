/**
 * The scripted upstream's only state, the count of transient failures per request: gone once the request
 * succeeds, and bounded when clients never retry (it grew by one entry per such request before).
 */
import { describe, expect, it } from "vitest";
import { createScriptedUpstream, MAX_TRACKED_FAILURES, serveScriptedModel } from "./scripted-transport.ts";

function call(upstream: ReturnType<typeof createScriptedUpstream>, prompt: string): Promise<Response> {
  return upstream.handle(
    new Request("http://scripted.local/v1/messages", {
      method: "POST",
      body: JSON.stringify({
        model: "demo-large",
        max_tokens: 100,
        messages: [{ role: "user", content: [{ type: "text", text: prompt }] }],
      }),
    }),
  );
}

describe("the scripted upstream's transient failures", () => {
  it("answer the first N identical calls with the failure, then succeed and forget the request", async () => {
    const upstream = createScriptedUpstream();
    const prompt = "Answer overloaded to the first 2 calls. Hi.";
    expect((await call(upstream, prompt)).status).toBe(529);
    expect((await call(upstream, prompt)).status).toBe(529);
    expect(upstream.trackedFailures).toBe(1);
    expect((await call(upstream, prompt)).status).toBe(200);
    expect(upstream.trackedFailures).toBe(0);
  });

  it("stay bounded when the clients give up before their retries run out", async () => {
    const upstream = createScriptedUpstream();
    const requests = MAX_TRACKED_FAILURES + 100;
    for (let i = 0; i < requests; i++) {
      const response = await call(upstream, `Answer rate limited to the first 9 calls. Request ${i}.`);
      expect(response.status).toBe(429);
      await response.body?.cancel();
    }
    expect(upstream.trackedFailures).toBe(MAX_TRACKED_FAILURES);
    // The newest are the ones kept: a request that just failed is still counted on its retry.
    const newest = `Answer rate limited to the first 2 calls. Request ${requests}.`;
    expect((await call(upstream, newest)).status).toBe(429);
    expect((await call(upstream, newest)).status).toBe(429);
    expect((await call(upstream, newest)).status).toBe(200);
  });
});

describe("the scripted upstream over HTTP (agent-api model)", () => {
  it("refuses a body over the server's 32 MiB limit with 413 instead of holding and parsing it", async () => {
    const server = await serveScriptedModel();
    try {
      const response = await fetch(`${server.url}/v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: `{"messages":[{"role":"user","content":"${"a".repeat(33 * 1024 * 1024)}"}]}`,
      }).catch((error: unknown) => error);
      // The upstream answers as soon as the limit is passed; a client still sending may see the socket close.
      if (response instanceof Response) {
        expect(response.status).toBe(413);
        expect(((await response.json()) as { error: { type: string } }).error.type).toBe("request_too_large");
      } else
        expect(String((response as Error).cause ?? response)).toMatch(/EPIPE|ECONNRESET|other side closed/);
      const small = await fetch(`${server.url}/v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", max_tokens: 10, messages: [{ role: "user", content: "hi" }] }),
      });
      expect(small.status).toBe(200);
      await small.text();
    } finally {
      await server.close();
    }
  });
});
