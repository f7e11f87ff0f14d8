/**
 * Turns that do not run to their end: deleted under the agent, abandoned by their client, or left unread.
 * None may write into another conversation, wipe a session, or hold a conversation's lock forever.
 */
import { connect } from "node:net";
import { StreamErrorEventError } from "@agent-api/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEYS, PHRASES, raw, runTurn, sleep, startTestServer, type TestServer, uid } from "./helpers.ts";

const STALL_MS = 400;
let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({ sessionDelayMs: 100, sseStallMs: STALL_MS });
});
afterAll(async () => {
  await t?.close();
});

const path = (id: string, rest = "") =>
  `/api/agents/demo-agent/conversations/${encodeURIComponent(id)}${rest}`;

async function conversation(id: string, key: string = KEYS.admin) {
  const res = await raw(t.url, "GET", path(id), { key });
  return res.status === 200
    ? (res.json as { conversation: Record<string, unknown> }).conversation
    : undefined;
}

describe("a turn deleted under the agent", () => {
  // Needs a tool that runs for a while.
  it("ends with an error event and never writes into a conversation that later takes its id", {
    tags: ["sandbox"],
  }, async () => {
    const bobsId = uid("bob-parent");
    const id = uid("deleted");
    await runTurn(t.client(KEYS.member), "hello from bob", { conversation_id: bobsId });
    const running = runTurn(
      t.client(),
      "My secret is hunter2. Use your tools to run the shell command: sleep 2",
      {
        conversation_id: id,
      },
    ).catch((error: unknown) => error);
    await sleep(500);
    expect((await raw(t.url, "DELETE", path(id), { key: KEYS.admin })).status).toBe(204);
    // The id is free again: bob forks his conversation into it.
    const fork = await raw(t.url, "POST", path(bobsId, "/fork"), {
      key: KEYS.member,
      body: { conversation_id: id },
    });
    expect(fork.status).toBe(200);
    const ended = await running;
    expect(ended).toBeInstanceOf(StreamErrorEventError);
    expect(await t.turnFailure(id)).toBe("AGENT_API_CONVERSATION_DELETED");
    await sleep(300);
    const transcript = await raw(t.url, "GET", path(id, "/messages"), { key: KEYS.member });
    expect(transcript.text).not.toContain("hunter2");
    expect((transcript.json as { conversation: { turn_count: number } }).conversation.turn_count).toBe(1);
  });
});

describe("a client that disconnects mid-turn", () => {
  it("leaves the session (memory) as it was; the turn is stored with its error", async () => {
    const id = uid("abandoned");
    const alice = t.client();
    await runTurn(alice, PHRASES.remember("zebra"), { conversation_id: id });
    const before = await alice.waitForSession(id, { intervalMs: 25, timeoutMs: 3000 });
    expect(before.agentSessionId).not.toBeNull();
    // A big attachment keeps the turn busy long enough to leave it after the headers arrived.
    const aborter = new AbortController();
    const response = await fetch(`${t.url}/api/agents/demo-agent/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": KEYS.admin, "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: "List the attached files." }],
        metadata: {
          conversation_id: id,
          attachments: [
            {
              name: "big.bin",
              mediaType: "application/octet-stream",
              dataBase64: Buffer.alloc(9 << 20).toString("base64"),
            },
          ],
        },
      }),
      signal: aborter.signal,
    });
    expect(response.status).toBe(200);
    aborter.abort();
    expect(await t.turnFailure(id)).toBe("AGENT_API_CLIENT_DISCONNECTED");
    const after = await conversation(id);
    expect(after?.agent_session_id).toBe(before.agentSessionId);
    expect((await runTurn(alice, PHRASES.recall, { conversation_id: id })).text).toBe("zebra");
  });
});

describe("a client that stops reading", () => {
  it("is dropped after the stall limit: the turn is stored and the conversation is free again", async () => {
    const id = uid("unread");
    const body = JSON.stringify({
      messages: [{ role: "user", content: PHRASES.repeatInstructions }],
      // Echoed back by the turn: far more than the socket buffers hold.
      system: "x".repeat(16 << 20),
      metadata: { conversation_id: id },
    });
    const { port } = new URL(t.url);
    const socket = connect(Number(port), "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(
      `POST /api/agents/demo-agent/v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${KEYS.admin}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`,
    );
    socket.write(body);
    socket.pause(); // never read
    try {
      // Bounds far above the cost (a 16 MiB body parsed and echoed, then 400 ms of stall): they catch a turn
      // that never ends, not a slow machine (the 10 s bound failed once at load 20).
      let stored: Record<string, unknown> | undefined;
      const deadline = Date.now() + 40_000;
      while (stored?.turn_count !== 1 && Date.now() < deadline) {
        await sleep(250);
        stored = await conversation(id);
      }
      expect(stored?.turn_count).toBe(1);
      // The lock is free: another turn on the conversation runs (a held lock would keep it waiting for good).
      const next = await Promise.race([
        runTurn(t.client(), "hi", { conversation_id: id }).then((r) => r.status),
        sleep(20_000).then(() => "still waiting for the lock"),
      ]);
      expect(next).toBe(200);
    } finally {
      socket.destroy();
    }
  }, 90_000);
});

describe("edge cases of a turn's inputs", () => {
  it("an empty model is no model: the agent's default runs", async () => {
    const turn = await runTurn(t.client(), {
      model: "",
      messages: [{ role: "user", content: PHRASES.whichModel }],
    });
    expect(turn.model).toBe("demo-large");
    expect(turn.text).toBe("demo-large");
  });

  it("a flow whose step fails answers 502 with the step's error, not 500", async () => {
    const res = await raw(t.url, "POST", "/apps/demo-flow", {
      headers: { "x-api-key": KEYS.flow },
      body: { input_vars: { topic: "x. Fail this turn after it starts." } },
    });
    expect(res.status).toBe(502);
    expect(res.json).toMatchObject({ error: { type: "api_error" } });
    expect(res.text).toContain("Flow step draft failed");
  });
});

describe("a shutdown with a request that never finishes sending its body", () => {
  it("still completes once the grace period is over (the client's socket is closed)", async () => {
    const s = await startTestServer({ shutdownGraceMs: 200 });
    const socket = connect(Number(new URL(s.url).port), "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    // Half a body, then silence: a client that hung, or a proxy that lost its own client mid-request.
    socket.write(
      `POST /api/agents/demo-agent/v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${KEYS.admin}\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n{"messages":`,
    );
    const socketClosed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.on("error", () => undefined);
    await sleep(100);
    // Node's own bound on a request is 300 s: before the fix, close() waited for it.
    const outcome = await Promise.race([
      s.close().then(() => "closed"),
      sleep(15_000).then(() => "still waiting after 15 s"),
    ]);
    expect(outcome).toBe("closed");
    await socketClosed;
  }, 30_000);
});

describe("a request reaching a draining server", () => {
  it("gets the API's 503 with Retry-After once the running turn has finished", {
    tags: ["sandbox"],
    timeout: 30_000,
  }, async () => {
    const s = await startTestServer({ shutdownGraceMs: 10_000 });
    const socket = connect(Number(new URL(s.url).port), "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    let received = "";
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("utf8");
    });
    socket.on("error", () => undefined);
    const socketClosed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    const body = JSON.stringify({
      messages: [{ role: "user", content: "Use your tools to run the shell command: sleep 1" }],
    });
    socket.write(
      `POST /api/agents/demo-agent/v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${KEYS.admin}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    while (!received.includes("event: message_start")) await sleep(20);
    // A restart's SIGTERM: the listener closes, the turn runs on; a request already on its way on this open
    // connection (a keep-alive client, a balancer's pooled connection) must learn to go elsewhere.
    const closed = s.close();
    await sleep(100);
    socket.write(
      `GET /api/agents/demo-agent/conversations HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${KEYS.admin}\r\n\r\n`,
    );
    await socketClosed;
    await closed;
    const [turn, refusal] = received.split(/(?=HTTP\/1\.1 503)/);
    expect(turn).toContain("event: message_stop");
    expect(refusal).toMatch(/^HTTP\/1\.1 503/);
    expect(refusal.toLowerCase()).toContain("retry-after: 1\r\n");
    expect(refusal.toLowerCase()).toContain("connection: close\r\n");
    expect(refusal).toContain('"type":"overloaded_error"');
    expect(refusal).toContain("shutting down");
  });
});

describe("a connection accepted just before a shutdown", () => {
  it("brings its request after the listener closed and gets it served, not a reset", async () => {
    const s = await startTestServer();
    // A balancer's connection: accepted, its request still on the way when the server is told to stop.
    const socket = connect(Number(new URL(s.url).port), "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    let received = "";
    let failure = "";
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("utf8");
    });
    socket.on("error", (error) => {
      failure = error.message;
    });
    const socketClosed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    await sleep(50);
    const closed = s.close();
    await sleep(100);
    socket.write(
      `GET /api/agents/demo-agent/conversations HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${KEYS.admin}\r\n\r\n`,
    );
    await socketClosed;
    await closed;
    expect(failure).toBe("");
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    expect(received).toContain('"conversations"');
    // A new connection is refused: the listener is closed.
    const refused = await new Promise<string>((resolve) => {
      const late = connect(Number(new URL(s.url).port), "127.0.0.1");
      late.once("connect", () => resolve("accepted"));
      late.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"));
    });
    expect(refused).toBe("ECONNREFUSED");
  });
});
