/**
 * Each cap on pending work, one at a time, on a real server with small caps: turns waiting on one
 * conversation, requests in flight of one key and of the server, body bytes of one key (refused before the
 * body is sent, or as a chunked body arrives). Every refusal is fast, carries Retry-After and the error
 * envelope, leaves other keys alone, and everything held drains to 0 afterwards.
 */

import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfigFile, parseConfig } from "../config/load.ts";
import { DEFAULT_LIMITS } from "../index.ts";
import { KEYS, startTestServer, type TestServer } from "./helpers.ts";
import { sleep } from "./sandbox-server.ts";

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({
    unsafeNoIsolation: true,
    sandboxUser: "server",
    limits: {
      waitingTurnsPerConversation: 2,
      requestsPerKey: 6,
      requestsPerServer: 10,
      bodyBytesPerKey: 1024 * 1024,
    },
  });
});

afterAll(async () => {
  await t.close();
});

const SLEEP = (s: number) => `Use your tools to run the shell command: sleep ${s}`;

/** A turn request; resolves with its status, headers and whole body (the stream read to its end). */
async function send(prompt: string, metadata: Record<string, unknown> = {}, key: string = KEYS.admin) {
  const response = await fetch(`${t.url}/api/agents/demo-agent/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json" },
    body: JSON.stringify({ stream: true, messages: [{ role: "user", content: prompt }], metadata }),
  });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

/** Starts a turn and resolves once its stream opened (it runs on); `done` resolves at its end. */
async function open(prompt: string, metadata: Record<string, unknown> = {}) {
  const response = await fetch(`${t.url}/api/agents/demo-agent/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": KEYS.admin, "content-type": "application/json" },
    body: JSON.stringify({ stream: true, messages: [{ role: "user", content: prompt }], metadata }),
  });
  expect(response.status).toBe(200);
  return { id: response.headers.get("x-conversation-id") ?? "", done: response.text() };
}

function expectRefusal(
  reply: { status: number; headers: Headers; body: string },
  status: number,
  type: string,
  message: RegExp,
) {
  expect(reply.status).toBe(status);
  expect(Number(reply.headers.get("retry-after"))).toBeGreaterThan(0);
  expect(JSON.parse(reply.body)).toEqual({
    type: "error",
    error: { type, message: expect.stringMatching(message) },
    message: expect.stringMatching(message),
  });
}

async function drained() {
  for (let i = 0; i < 100; i++) {
    const live = t.server.live();
    if (live.requestsInFlight === 0 && live.waitingTurns === 0 && live.runningTurns === 0) break;
    await sleep(20);
  }
  return t.server.live();
}

describe("caps on pending work", () => {
  it("turns waiting on one conversation: past the cap a fast 429 with Retry-After; the waiting ones run", async () => {
    const running = await open(SLEEP(2));
    const waiting = [
      send("Say one.", { conversation_id: running.id }),
      send("Say two.", { conversation_id: running.id }),
    ];
    // Let both queue behind the running turn before the next one comes.
    for (let i = 0; i < 100 && t.server.live().waitingTurns < 2; i++) await sleep(10);
    const started = Date.now();
    const third = await send("Say three.", { conversation_id: running.id });
    expect(Date.now() - started).toBeLessThan(1_000);
    expectRefusal(third, 429, "rate_limit_error", /Too many turns are already waiting on this conversation/);
    // Another conversation is not held up by this one's queue.
    expect((await send("Say hello.")).status).toBe(200);
    await running.done;
    for (const reply of await Promise.all(waiting)) {
      expect(reply.status).toBe(200);
      expect(reply.body).toContain("event: message_stop");
    }
    expect(await drained()).toMatchObject({ requestsInFlight: 0, bodyBytesHeld: 0, waitingTurns: 0 });
  }, 30_000);

  it("requests in flight: 429 for the key past its cap, other keys still served", async () => {
    const turns = await Promise.all(Array.from({ length: 6 }, () => open(SLEEP(2))));
    const overKey = await fetch(`${t.url}/api/agents/demo-agent/v1/models`, {
      headers: { "x-api-key": KEYS.admin },
    });
    expectRefusal(
      { status: overKey.status, headers: overKey.headers, body: await overKey.text() },
      429,
      "rate_limit_error",
      /Too many requests of this key are already in flight/,
    );
    const member = await Promise.all(
      Array.from({ length: 4 }, () =>
        fetch(`${t.url}/api/agents/demo-agent/v1/models`, { headers: { "x-api-key": KEYS.member } }),
      ),
    );
    expect(member.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    await Promise.all(member.map((r) => r.arrayBuffer()));
    await Promise.all(turns.map((turn) => turn.done));
    expect(await drained()).toMatchObject({ requestsInFlight: 0, bodyBytesHeld: 0 });
  }, 30_000);

  it("503 once the server's requests in flight are at its cap, whatever the key", async () => {
    const turns = await Promise.all([
      ...Array.from({ length: 5 }, () => open(SLEEP(2))),
      ...Array.from({ length: 5 }, async () => {
        const response = await fetch(`${t.url}/api/agents/demo-agent/v1/messages`, {
          method: "POST",
          headers: { "x-api-key": KEYS.member, "content-type": "application/json" },
          body: JSON.stringify({ stream: true, messages: [{ role: "user", content: SLEEP(2) }] }),
        });
        expect(response.status).toBe(200);
        return { done: response.text() };
      }),
    ]);
    const other = await fetch(`${t.url}/api/agents/other-agent/v1/models`, {
      headers: { "x-api-key": KEYS.otherAdmin },
    });
    expectRefusal(
      { status: other.status, headers: other.headers, body: await other.text() },
      503,
      "overloaded_error",
      /Too many requests are already in flight on this server/,
    );
    await Promise.all(turns.map((turn) => turn.done));
    expect(await drained()).toMatchObject({ requestsInFlight: 0, bodyBytesHeld: 0 });
  }, 30_000);

  it("body bytes of one key: a declared body over the cap is refused before a byte of it is sent", async () => {
    const socket = connect(Number(new URL(t.url).port), "127.0.0.1");
    let answer = "";
    const closed = new Promise<void>((resolve) => {
      socket.on("data", (chunk) => {
        answer += chunk.toString("utf8");
      });
      socket.on("close", () => resolve());
    });
    // The head only: the answer must come without the body.
    socket.write(
      `POST /api/agents/demo-agent/v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${KEYS.admin}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${2 * 1024 * 1024}\r\n\r\n`,
    );
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 429 /);
    expect(answer.toLowerCase()).toContain("retry-after: 1");
    expect(answer).toContain("Too many request body bytes of this key are already in flight");
    expect(await drained()).toMatchObject({ requestsInFlight: 0, bodyBytesHeld: 0 });
  });

  it("a turn whose client left while it waits keeps its body counted until it leaves the queue", async () => {
    const running = await open(SLEEP(2));
    const body = JSON.stringify({
      messages: [{ role: "user", content: "x".repeat(600 * 1024) }],
      metadata: { conversation_id: running.id },
    });
    const socket = connect(Number(new URL(t.url).port), "127.0.0.1");
    socket.on("error", () => undefined);
    socket.write(
      `POST /api/agents/demo-agent/v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${KEYS.admin}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    for (let i = 0; i < 200 && t.server.live().waitingTurns < 1; i++) await sleep(10);
    socket.destroy();
    await sleep(100);
    // Gone client, parsed body still held by the waiting turn: still counted against the key.
    expect(t.server.live().bodyBytesHeld).toBeGreaterThanOrEqual(600 * 1024);
    const second = await send("x".repeat(600 * 1024));
    expectRefusal(second, 429, "rate_limit_error", /Too many request body bytes of this key/);
    await running.done;
    expect(await drained()).toMatchObject({ requestsInFlight: 0, bodyBytesHeld: 0, waitingTurns: 0 });
  }, 30_000);

  it("body bytes of one key: a chunked body is counted as it arrives and refused past the cap", async () => {
    const status = await new Promise<number>((resolve) => {
      const request = httpRequest(`${t.url}/api/agents/demo-agent/v1/messages`, {
        method: "POST",
        headers: {
          "x-api-key": KEYS.admin,
          "content-type": "application/json",
          "transfer-encoding": "chunked",
        },
      });
      request.on("response", (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      });
      request.on("error", () => resolve(0));
      const chunk = Buffer.alloc(64 * 1024, " ");
      let sent = 0;
      const pump = () => {
        while (sent < 4 * 1024 * 1024) {
          sent += chunk.length;
          if (!request.write(chunk)) return request.once("drain", pump);
        }
        request.end();
      };
      request.write('{"stream":true,');
      pump();
    });
    expect(status).toBe(429);
    expect(await drained()).toMatchObject({ requestsInFlight: 0, bodyBytesHeld: 0 });
  });
});

describe("limits in the config file", () => {
  it("the config README's example states the defaults", async () => {
    const readme = readFileSync(new URL("../config/README.md", import.meta.url), "utf8");
    const example = /```yaml\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
    const dir = await mkdtemp(join(tmpdir(), "limits-readme-"));
    try {
      await writeFile(join(dir, "readme.yaml"), example);
      expect((await loadConfigFile(join(dir, "readme.yaml"))).limits).toEqual(DEFAULT_LIMITS);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  const base = { workspaces: [{ id: "w", members: [{ id: "m" }] }] };

  it("maps `limits` to the server's caps", () => {
    const config = parseConfig(
      {
        ...base,
        limits: { requests_per_key: 5, body_bytes_per_server: 1048576, waiting_turns_per_conversation: 3 },
      },
      "/",
    );
    expect(config.limits).toEqual({
      requestsPerKey: 5,
      bodyBytesPerServer: 1048576,
      waitingTurnsPerConversation: 3,
    });
  });

  it("refuses a cap of 0 and an unknown limit, naming them", () => {
    expect(() => parseConfig({ ...base, limits: { requests_per_key: 0, per_tenant: 1 } }, "/")).toThrow(
      /limits\.requests_per_key: must be >= 1[\s\S]*limits: unknown property "per_tenant"|limits: unknown property "per_tenant"[\s\S]*limits\.requests_per_key/,
    );
  });
});
