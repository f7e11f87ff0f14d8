/**
 * Authentication, roles and the API's error table over real HTTP: every status of the table is
 * provoked at least once, the revoked-key body is compared byte for byte, and a key reaches only its
 * own workspace's agents.
 */
import { request as httpRequest } from "node:http";
import { AgentApiError, StreamErrorEventError } from "@agent-api/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  isErrorBody,
  KEYS,
  PHRASES,
  raw,
  runTurn,
  startTestServer,
  type TestServer,
  uid,
} from "./helpers.ts";

let t: TestServer;
let aliceConversation: string;

beforeAll(async () => {
  t = await startTestServer();
  aliceConversation = (await runTurn(t.client(), "alice's conversation")).conversationId;
  // Recorded a moment after the stream closes: a snapshot taken before that would change on its own.
  await t.client().waitForSession(aliceConversation, { intervalMs: 20, timeoutMs: 5000 });
});
afterAll(async () => {
  await t?.close();
});

interface Route {
  method: string;
  path: (agent: string, id: string) => string;
  body?: unknown;
}

/** Every authenticated operation of the API. */
const ROUTES: Record<string, Route> = {
  sendMessage: {
    method: "POST",
    path: (a) => `/api/agents/${a}/v1/messages`,
    body: { messages: [{ role: "user", content: "hi" }] },
  },
  sendRouted: {
    method: "POST",
    path: () => "/api/agents/v1/messages",
    body: { model: "agent-api--demo-agent", messages: [{ role: "user", content: "hi" }] },
  },
  listModels: { method: "GET", path: (a) => `/api/agents/${a}/v1/models` },
  listConversations: { method: "GET", path: (a) => `/api/agents/${a}/conversations` },
  getConversation: { method: "GET", path: (a, id) => `/api/agents/${a}/conversations/${id}` },
  transcript: { method: "GET", path: (a, id) => `/api/agents/${a}/conversations/${id}/messages` },
  lastCompaction: { method: "GET", path: (a, id) => `/api/agents/${a}/conversations/${id}/last-compaction` },
  share: { method: "POST", path: (a, id) => `/api/agents/${a}/conversations/${id}`, body: { shared: true } },
  fork: { method: "POST", path: (a, id) => `/api/agents/${a}/conversations/${id}/fork`, body: {} },
  delete: { method: "DELETE", path: (a, id) => `/api/agents/${a}/conversations/${id}` },
};

async function call(name: string, key: string | undefined, agent = "demo-agent", headers = {}) {
  const route = ROUTES[name];
  return raw(t.url, route.method, route.path(agent, encodeURIComponent(aliceConversation)), {
    key,
    body: route.body,
    headers,
  });
}

describe("401", () => {
  for (const name of Object.keys(ROUTES)) {
    it(`${name}: a missing, an empty, an unknown and a revoked key`, async () => {
      const missing = await call(name, undefined);
      expect(missing.status).toBe(401);
      expect(isErrorBody(missing.json)).toBe(true);
      expect(missing.headers.get("content-type")).toMatch(/^application\/json/);
      expect((await call(name, "")).status).toBe(401);
      const unknown = await call(name, "demo-admin-key-but-wrong");
      expect(unknown.status).toBe(401);
      expect(unknown.json).toEqual(missing.json);
      const revoked = await call(name, KEYS.revoked);
      expect(revoked.status).toBe(401);
      expect(revoked.text).toBe('{"message":"API key has been revoked"}');
      expect(revoked.headers.get("content-type")).toMatch(/^application\/json/);
    });
  }

  it("changes nothing: alice's conversation is exactly as it was after every refused call", async () => {
    const before = await t.client().getTranscript(aliceConversation);
    for (const name of Object.keys(ROUTES)) {
      await call(name, KEYS.revoked);
      await call(name, "nope");
    }
    expect(await t.client().getTranscript(aliceConversation)).toEqual(before);
  });

  it("a key is one exact string: neither case nor extra or missing characters make an unknown key valid", async () => {
    for (const key of ["DEMO-ADMIN-KEY", "demo-admin-key\tx", "xdemo-admin-key", "demo-admin-ke"]) {
      expect((await call("listModels", key)).status, JSON.stringify(key)).toBe(401);
    }
  });
});

describe("403", () => {
  it("a Viewer key sends a message: 403, no conversation created; it can still read", async () => {
    const carol = t.client(KEYS.viewer);
    const id = uid("viewer");
    const sent = await raw(t.url, "POST", "/api/agents/demo-agent/v1/messages", {
      key: KEYS.viewer,
      body: { messages: [{ role: "user", content: "hi" }], metadata: { conversation_id: id } },
    });
    expect(sent.status).toBe(403);
    expect(isErrorBody(sent.json)).toBe(true);
    const routed = await raw(t.url, "POST", "/api/agents/v1/messages", {
      key: KEYS.viewer,
      body: { model: "demo-agent", messages: [{ role: "user", content: "hi" }] },
    });
    expect(routed.status).toBe(403);
    expect(
      (await raw(t.url, "GET", `/api/agents/demo-agent/conversations/${id}`, { key: KEYS.admin })).status,
    ).toBe(404);
    expect(
      (await raw(t.url, "GET", `/api/agents/demo-agent/conversations/${id}`, { key: KEYS.viewer })).status,
    ).toBe(404);
    // Reading is allowed to a Viewer.
    expect((await carol.listConversations()).conversations).toEqual(expect.any(Array));
    const shared = (await runTurn(t.client(), "shared for carol")).conversationId;
    await t.client().setSharing(shared, true);
    expect((await carol.getTranscript(shared)).messages).toHaveLength(2);
  });

  it("sending a turn into another member's conversation shared with the workspace: 403", async () => {
    const shared = (await runTurn(t.client(), "alice shares")).conversationId;
    await t.client().setSharing(shared, true);
    const response = await raw(t.url, "POST", "/api/agents/demo-agent/v1/messages", {
      key: KEYS.member,
      body: { messages: [{ role: "user", content: "bob writes" }], metadata: { conversation_id: shared } },
    });
    expect(response.status).toBe(403);
    expect(isErrorBody(response.json)).toBe(true);
    expect((await t.client().getConversation(shared)).conversation.turn_count).toBe(1);
  });
});

describe("404", () => {
  it("an agent in another workspace, on every route, for both workspaces' keys", async () => {
    for (const name of Object.keys(ROUTES)) {
      if (name === "sendRouted") continue;
      const response = await call(name, KEYS.admin, "other-agent");
      expect(response.status, name).toBe(404);
      expect(isErrorBody(response.json)).toBe(true);
      const reverse = await call(name, KEYS.otherAdmin, "demo-agent");
      expect(reverse.status, name).toBe(404);
      // Indistinguishable from an agent that does not exist at all.
      const absent = await call(name, KEYS.admin, "no-such-agent");
      expect(absent.status, name).toBe(404);
    }
    const routed = await raw(t.url, "POST", "/api/agents/v1/messages", {
      key: KEYS.admin,
      body: { model: "agent-api--other-agent", messages: [{ role: "user", content: "hi" }] },
    });
    expect(routed.status).toBe(404);
  });

  it("a conversation on a different agent or workspace: message Conversation not found", async () => {
    for (const [key, agent] of [
      [KEYS.admin, "notes-agent"],
      [KEYS.otherAdmin, "other-agent"],
    ]) {
      for (const name of ["getConversation", "transcript", "lastCompaction", "share", "fork", "delete"]) {
        const response = await call(name, key, agent);
        expect(response.status, `${name} ${agent}`).toBe(404);
        expect((response.json as { message: string }).message).toBe("Conversation not found");
      }
    }
    expect((await t.client().getConversation(aliceConversation)).conversation.turn_count).toBe(1);
  });

  it("another user's unshared conversation: 404, never 403", async () => {
    for (const name of ["getConversation", "transcript", "lastCompaction", "share", "fork", "delete"]) {
      const response = await call(name, KEYS.member);
      expect(response.status, name).toBe(404);
      expect((response.json as { message: string }).message).toBe("Conversation not found");
    }
  });
});

describe("409, 501 and the error event", () => {
  it("409: a fork with a conversation_id already taken", async () => {
    const response = await raw(
      t.url,
      "POST",
      `/api/agents/demo-agent/conversations/${encodeURIComponent(aliceConversation)}/fork`,
      { key: KEYS.admin, body: { conversation_id: aliceConversation } },
    );
    expect(response.status).toBe(409);
    expect(isErrorBody(response.json)).toBe(true);
  });

  it('501: metadata.delivery "async"', async () => {
    const response = await raw(t.url, "POST", "/api/agents/demo-agent/v1/messages", {
      key: KEYS.admin,
      body: { messages: [{ role: "user", content: "hi" }], metadata: { delivery: "async" } },
    });
    expect(response.status).toBe(501);
    expect(isErrorBody(response.json)).toBe(true);
  });

  it("200 with an error event: a failure after the stream opened", async () => {
    const id = uid("failing");
    const turn = await t.client().sendMessage({
      messages: [{ role: "user", content: PHRASES.fail }],
      metadata: { conversation_id: id },
    });
    expect(turn.response.status).toBe(200);
    const seen: string[] = [];
    let thrown: unknown;
    try {
      for await (const event of turn) seen.push(event.type);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(StreamErrorEventError);
    expect((thrown as StreamErrorEventError).errorType).toBe("api_error");
    expect(seen[0]).toBe("message_start");
    expect(seen).not.toContain("message_stop");
    // The raw stream ends with the error frame and no message_stop.
    const rawTurn = await raw(t.url, "POST", "/api/agents/demo-agent/v1/messages", {
      key: KEYS.admin,
      body: { messages: [{ role: "user", content: PHRASES.fail }] },
    });
    expect(rawTurn.status).toBe(200);
    const frames = rawTurn.text.trim().split("\n\n");
    expect(frames.at(-1)).toMatch(
      /^event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":".+"\}\}$/,
    );
    expect(rawTurn.text).not.toContain("message_stop");
    // The failed turn is stored, and the conversation goes on.
    expect((await t.client().getConversation(id)).conversation.turn_count).toBe(1);
    expect((await runTurn(t.client(), "after the failure", { conversation_id: id })).text).toBe(
      "You said: after the failure",
    );
  });
});

describe("key transport", () => {
  it("X-Api-Key is read case-insensitively; a bearer token works when X-Api-Key is absent", async () => {
    expect(
      (await raw(t.url, "GET", "/api/agents/demo-agent/v1/models", { headers: { "X-API-KEY": KEYS.admin } }))
        .status,
    ).toBe(200);
    const bearer = await raw(t.url, "GET", "/api/agents/demo-agent/v1/models", {
      headers: { authorization: `Bearer ${KEYS.admin}` },
    });
    expect(bearer.status).toBe(200);
    // X-Api-Key wins over the bearer token: a bad X-Api-Key is not rescued by a good bearer.
    const both = await raw(t.url, "GET", "/api/agents/demo-agent/v1/models", {
      key: "wrong",
      headers: { authorization: `Bearer ${KEYS.admin}` },
    });
    expect(both.status).toBe(401);
  });

  it("the client surfaces a 401 as AgentApiError with the body", async () => {
    try {
      await t.client(KEYS.revoked).listConversations();
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(AgentApiError);
      expect((error as AgentApiError).status).toBe(401);
      expect((error as AgentApiError).body).toEqual({ message: "API key has been revoked" });
    }
  });
});

describe("authentication before anything else", () => {
  /** Bodies that would each get a 400 with a valid key. */
  const BAD_BODIES: Array<{ rawBody: string } | { body: unknown }> = [
    { rawBody: "{bad json" },
    { rawBody: "" },
    { body: null },
    { body: {} },
    { body: { messages: "not an array", model: 5 } },
    { body: { shared: "yes" } },
    { body: { at_turn: "x", conversation_id: "" } },
  ];
  const BODY_ROUTES = ["sendMessage", "sendRouted", "share", "fork"];

  it("a missing, unknown or revoked key gets 401 (and the revoked body) whatever the body, on every body route", async () => {
    for (const name of BODY_ROUTES) {
      const route = ROUTES[name];
      const path = route.path("demo-agent", encodeURIComponent(aliceConversation));
      for (const bad of BAD_BODIES) {
        // With a valid key each of these bodies is refused as a bad request (or, for fork, accepted as {}).
        for (const key of [undefined, "no-such-key", KEYS.revoked]) {
          const response = await raw(t.url, route.method, path, { key, ...bad });
          expect(response.status, `${name} ${JSON.stringify(bad)} ${key}`).toBe(401);
          if (key === KEYS.revoked) expect(response.text).toBe('{"message":"API key has been revoked"}');
          else expect(isErrorBody(response.json)).toBe(true);
        }
      }
    }
    // The same bodies with a good key are a 400: the 401 above did come first.
    const malformed = await raw(t.url, "POST", ROUTES.sendMessage.path("demo-agent", ""), {
      key: KEYS.admin,
      rawBody: "{bad json",
    });
    expect(malformed.status).toBe(400);
  });

  it("a body over the size limit without a valid key: 401, not 413", async () => {
    const response = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const url = new URL(ROUTES.sendMessage.path("demo-agent", ""), t.url);
      // Announce 64 MiB, send a few bytes: the answer must not wait for (or depend on) the body.
      const request = httpRequest(url, {
        method: "POST",
        headers: { "content-type": "application/json", "content-length": 64 * 1024 * 1024 },
      });
      request.on("response", (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => {
          body += chunk;
        });
        res.on("end", () => {
          request.destroy();
          resolve({ status: res.statusCode ?? 0, body });
        });
      });
      request.on("error", reject);
      request.write('{"messages":');
    });
    expect(response.status).toBe(401);
    expect(isErrorBody(JSON.parse(response.body))).toBe(true);
  });

  it("the flow route: a missing or wrong key gets 401 whatever the body; an unknown app 404", async () => {
    for (const bad of BAD_BODIES) {
      for (const key of [undefined, "no-such-key", KEYS.admin, KEYS.revoked]) {
        const response = await raw(t.url, "POST", "/apps/demo-flow", { key, ...bad });
        expect(response.status, `${JSON.stringify(bad)} ${key}`).toBe(401);
        if (key === KEYS.revoked) expect(response.text).toBe('{"message":"API key has been revoked"}');
        else expect(isErrorBody(response.json)).toBe(true);
      }
      expect((await raw(t.url, "POST", "/apps/no-such-flow", { key: KEYS.flow, ...bad })).status).toBe(404);
      expect((await raw(t.url, "POST", "/apps/demo-flow", { key: KEYS.flow, ...bad })).status).toBe(400);
    }
  });
});
