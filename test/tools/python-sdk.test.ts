/**
 * The official Python SDK of the messages API (`anthropic`), unchanged, against the demo: both streaming
 * styles, resume through `metadata.conversation_id`, the X-Conversation-Id header through the SDK's response
 * objects, the models list, and its error classes. A 501 (async delivery) is raised once: the server's
 * `x-should-retry: false` keeps the SDK from sending it twice more, counted in the server's own request log.
 * The cases are Python (test/tools/python-sdk/cases.py), run in the venv of python-sdk-env.ts.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";
import { run } from "./matrix.ts";
import { pythonUnavailable, venvPython } from "./python-sdk-env.ts";

const skip = pythonUnavailable();
let demo: DemoServer;
/** The server's one log line per request (its `request` lines), as it wrote them. */
const requestLines: Array<{ method: string; url: string; status: number }> = [];

beforeAll(async () => {
  if (skip) return;
  demo = await startDemoServer(300, {
    logLevel: "info",
    logDestination: {
      write(line: string) {
        const entry = JSON.parse(line) as { msg?: string; method: string; url: string; status: number };
        if (entry.msg === "request") requestLines.push(entry);
      },
    },
  });
});
afterAll(async () => {
  await demo?.close();
});

async function pythonCase<T>(name: string): Promise<T> {
  const result = await run(
    venvPython,
    [join(import.meta.dirname, "python-sdk", "cases.py"), name, demo.url],
    {
      cwd: import.meta.dirname,
      // The SDK reads these from the environment; none of the caller's may change what it sends.
      env: { ANTHROPIC_API_KEY: "", ANTHROPIC_AUTH_TOKEN: "", ANTHROPIC_BASE_URL: "" },
      timeoutMs: 120_000,
    },
  );
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as T;
}

interface RaisedError {
  class: string;
  status: number;
  message: string;
}

describe.skipIf(skip !== null)(`the official Python SDK${skip ? ` (skipped: ${skip})` : ""}`, () => {
  it("messages.stream(): text as it arrives, the final message, X-Conversation-Id on stream.response", async () => {
    const out = await pythonCase<Record<string, unknown>>("stream_helper");
    expect(out.text).toContain("capital of France");
    expect(out.final_text).toBe(out.text);
    expect(out.stop_reason).toBe("end_turn");
    expect(out.output_tokens).toBeGreaterThan(0);
    expect(out.conversation_id).toEqual(expect.any(String));
  });

  it("messages.with_raw_response.create(stream=True): 200, an event stream, the header, the turn's events", async () => {
    const out = await pythonCase<{
      status: number;
      content_type: string;
      conversation_id: string;
      events: string[];
    }>("raw_events");
    expect(out.status).toBe(200);
    expect(out.content_type).toMatch(/^text\/event-stream/);
    expect(out.conversation_id).toEqual(expect.any(String));
    expect(out.events[0]).toBe("message_start");
    expect(out.events).toContain("content_block_delta");
    expect(out.events.slice(-2)).toEqual(["message_delta", "message_stop"]);
  });

  it("resumes through metadata.conversation_id: the header names the sent id and the agent remembers", async () => {
    const out = await pythonCase<Record<string, string | boolean>>("resume");
    expect(out.header).toBe(out.sent_id);
    expect(out.first).toBe("OK");
    expect(out.recorded).toBe(true);
    expect(out.second).toBe(out.word);
  });

  it("models.list(): the default model first, created_at parsed as a date-time", async () => {
    const out = await pythonCase<{ entries: Array<{ id: string; created_at: string }> }>("models");
    expect(out.entries.map((m) => m.id)).toEqual(["demo-large", "demo-small"]);
    for (const entry of out.entries) expect(entry.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T/);
  });

  it("raises the SDK's error classes: 404 NotFoundError, 401 AuthenticationError, 403 PermissionDeniedError, 400 BadRequestError", async () => {
    const out = await pythonCase<Record<string, RaisedError>>("errors");
    expect(out.unknown_agent).toMatchObject({ class: "NotFoundError", status: 404 });
    expect(out.unknown_agent.message).toContain("Agent not found: no-such-agent");
    expect(out.unknown_key).toMatchObject({ class: "AuthenticationError", status: 401 });
    expect(out.viewer).toMatchObject({ class: "PermissionDeniedError", status: 403 });
    expect(out.bad_model).toMatchObject({ class: "BadRequestError", status: 400 });
    expect(out.bad_model.message).toContain("/api/agents/demo-agent/v1/models");
  });

  it("raises the 501 of async delivery at once: the server saw one request, not the SDK's three", async () => {
    const before = requestLines.filter((line) => line.status === 501).length;
    const out = await pythonCase<{ max_retries: number; error: RaisedError }>("async_delivery");
    expect(out.max_retries).toBe(2);
    expect(out.error).toMatchObject({ class: "InternalServerError", status: 501 });
    expect(requestLines.filter((line) => line.status === 501).length - before).toBe(1);
  });
});
