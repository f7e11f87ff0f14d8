/**
 * The spec's examples that claim to be the reference server's body (every JSON error example, and every
 * example whose summary says "reference server's body") are compared with what the server sends, over real
 * HTTP. Error bodies must match exactly; success bodies, whose ids and times cannot match, must have the same
 * shape (the same keys, recursively, with values of the same JSON types). An example without a recipe here
 * fails the test, so a new one cannot go unchecked.
 */
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEYS, type RawResponse, raw, runTurn, sleep, startTestServer, type TestServer } from "./helpers.ts";

type Json = Record<string, unknown>;

const doc = JSON.parse(
  readFileSync(new URL("../../generated/openapi.json", import.meta.url), "utf8"),
) as Json;

function resolve(node: unknown): Json {
  const ref = (node as Json).$ref;
  if (typeof ref !== "string") return node as Json;
  return ref
    .slice(2)
    .split("/")
    .reduce<Json>((at, key) => at[key.replaceAll("~1", "/").replaceAll("~0", "~")] as Json, doc);
}

interface Example {
  operationId: string;
  status: string;
  name: string;
  summary: string;
  value: unknown;
}

/** The JSON examples that claim the reference server's body, once per operation and status. */
function referenceExamples(): Example[] {
  const out: Example[] = [];
  for (const item of Object.values(doc.paths as Record<string, Json>)) {
    for (const op of Object.values(item) as Json[]) {
      if (typeof op?.operationId !== "string") continue;
      for (const [status, response] of Object.entries(op.responses as Json)) {
        const json = (resolve(response).content as Json | undefined)?.["application/json"] as
          | Json
          | undefined;
        for (const [name, raw] of Object.entries((json?.examples ?? {}) as Json)) {
          const example = resolve(raw);
          const summary = String(example.summary ?? "");
          if (Number(status) >= 400 || /reference server's body/i.test(summary)) {
            out.push({ operationId: op.operationId, status, name, summary, value: example.value });
          }
        }
      }
    }
  }
  return out;
}

let t: TestServer;
/** A server with tiny caps on pending work, for the 429 and 503 bodies. */
let capped: TestServer;
const conv = (id: string, rest = "") =>
  `/api/agents/demo-agent/conversations/${encodeURIComponent(id)}${rest}`;
const hi = { messages: [{ role: "user", content: "hi" }] };

/** The example conversations, made real under the ids the examples use. */
const PARENT = "conv-2f6c1a";
const CHILD = "conv-2f6c1a-alt";
let bobsShared: string;

beforeAll(async () => {
  // A short turn time-out, for the flow step that fails by timing out.
  t = await startTestServer({ turnTimeoutMs: 1500 });
  await runTurn(t.client(), "Summarise the open issues", { conversation_id: PARENT });
  // The examples show a conversation whose session is recorded.
  await t.client().waitForSession(PARENT, { intervalMs: 25, timeoutMs: 5000 });
  await runTurn(t.client(), "the child", { conversation_id: CHILD });
  bobsShared = (await runTurn(t.client(KEYS.member), "bob shares")).conversationId;
  await t.client(KEYS.member).setSharing(bobsShared, true);
  capped = await startTestServer({
    unsafeNoIsolation: true,
    sandboxUser: "server",
    limits: { requestsPerKey: 3, requestsPerServer: 4, waitingTurnsPerConversation: 1 },
  });
});
afterAll(async () => {
  await t?.close();
  await capped?.close();
});

/** Requests of `keys` left in flight on `capped` (each head sent, its body never), until `end` is called. */
async function inFlight(keys: string[]): Promise<{ end(): Promise<void> }> {
  const { port } = new URL(capped.url);
  const sockets: Socket[] = keys.map((key) => {
    const socket = connect(Number(port), "127.0.0.1");
    socket.on("error", () => undefined);
    socket.write(
      `POST ${key === KEYS.flow ? "/apps/demo-flow" : "/api/agents/demo-agent/v1/messages"} HTTP/1.1\r\n` +
        `Host: x\r\nX-Api-Key: ${key}\r\n` +
        "Content-Type: application/json\r\nContent-Length: 10\r\n\r\n",
    );
    return socket;
  });
  for (let i = 0; i < 200 && capped.server.live().requestsInFlight < keys.length; i++) await sleep(10);
  return {
    end: async () => {
      for (const socket of sockets) socket.destroy();
      for (let i = 0; i < 200 && capped.server.live().requestsInFlight > 0; i++) await sleep(10);
    },
  };
}

/** The operation's request on the capped server while `keys` hold requests in flight. */
async function whileInFlight(ex: Example, keys: string[]): Promise<RawResponse> {
  // The flow's own key is the caller of the flow operation; the others take alice's.
  const key = ex.operationId === "invokeFlow" ? KEYS.flow : KEYS.admin;
  const held = await inFlight(keys.map((k) => (k === KEYS.admin ? key : k)));
  try {
    const op = OPERATIONS[ex.operationId];
    return await raw(capped.url, op.method, op.path, { key, body: op.body });
  } finally {
    await held.end();
  }
}

/** A turn waiting behind a running one on the capped server, then one more on that conversation. */
async function pastConversationQueue(ex: Example): Promise<RawResponse> {
  const op = OPERATIONS[ex.operationId];
  const running = await fetch(`${capped.url}/api/agents/demo-agent/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": KEYS.admin, "content-type": "application/json" },
    body: JSON.stringify({
      messages: [{ role: "user", content: "Use your tools to run the shell command: sleep 1" }],
    }),
  });
  const id = running.headers.get("x-conversation-id") ?? "";
  const onIt = { ...(op.body as Json), metadata: { conversation_id: id } };
  // alice's next turn waits for the lock (another member's would be refused before it waits: authorization first).
  const waiting = raw(capped.url, op.method, op.path, { key: KEYS.admin, body: onIt });
  for (let i = 0; i < 200 && capped.server.live().waitingTurns < 1; i++) await sleep(10);
  const refused = await raw(capped.url, op.method, op.path, { key: KEYS.admin, body: onIt });
  await Promise.all([running.text(), waiting]);
  return refused;
}

/** A body over the limit, announced by Content-Length: the answer needs only the head. */
function oversized(path: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(new URL(path, t.url), {
      method: "POST",
      headers: { "x-api-key": KEYS.admin, "content-type": "application/json", "content-length": 40 << 20 },
    });
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        text += chunk;
      });
      res.on("end", () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, headers: new Headers(), text, json: JSON.parse(text) });
      });
    });
    req.on("error", reject);
    req.write("{");
  });
}

const OPERATIONS: Record<string, { method: string; path: string; body?: unknown }> = {
  sendMessage: { method: "POST", path: "/api/agents/demo-agent/v1/messages", body: hi },
  sendRoutedMessage: {
    method: "POST",
    path: "/api/agents/v1/messages",
    body: { ...hi, model: "demo-agent" },
  },
  listModels: { method: "GET", path: "/api/agents/demo-agent/v1/models" },
  listConversations: { method: "GET", path: "/api/agents/demo-agent/conversations" },
  getConversation: { method: "GET", path: conv(PARENT) },
  setConversationSharing: { method: "POST", path: conv(PARENT), body: { shared: true } },
  deleteConversation: { method: "DELETE", path: conv("conv-missing") },
  getTranscript: { method: "GET", path: conv(PARENT, "/messages") },
  getLastCompaction: { method: "GET", path: conv(PARENT, "/last-compaction") },
  forkConversation: { method: "POST", path: conv(PARENT, "/fork"), body: {} },
  invokeFlow: { method: "POST", path: "/apps/demo-flow", body: { input_vars: { topic: "x" } } },
};

/** How to make the server send each example's body: by `status name`, or `operationId status name`. */
const RECIPES: Record<string, (ex: Example) => Promise<RawResponse>> = {
  "400 invalid": () =>
    raw(t.url, "GET", "/api/agents/demo-agent/conversations/%E0%A4%A", { key: KEYS.admin }),
  "401 missingOrUnknown": (ex) => {
    const op = OPERATIONS[ex.operationId];
    return raw(t.url, op.method, op.path, { body: op.body });
  },
  "401 revoked": (ex) => {
    const op = OPERATIONS[ex.operationId];
    return raw(t.url, op.method, op.path, { key: KEYS.revoked, body: op.body });
  },
  "403 viewer": (ex) =>
    raw(t.url, "POST", OPERATIONS[ex.operationId].path, {
      key: KEYS.viewer,
      body: OPERATIONS[ex.operationId].body,
    }),
  "403 sharedConversation": (ex) =>
    raw(t.url, "POST", OPERATIONS[ex.operationId].path, {
      key: KEYS.admin,
      body: { ...(OPERATIONS[ex.operationId].body as Json), metadata: { conversation_id: bobsShared } },
    }),
  "404 conversationNotFound": () => raw(t.url, "GET", conv("conv-missing"), { key: KEYS.admin }),
  "404 agentNotFound": () => raw(t.url, "GET", "/api/agents/acme-support-bot/v1/models", { key: KEYS.admin }),
  "413 tooLarge": (ex) => oversized(OPERATIONS[ex.operationId].path),
  "429 keyRequests": (ex) => whileInFlight(ex, [KEYS.admin, KEYS.admin, KEYS.admin]),
  "429 conversationQueue": pastConversationQueue,
  "503 serverBusy": (ex) => whileInFlight(ex, [KEYS.admin, KEYS.admin, KEYS.admin, KEYS.member]),
  "501 asyncDelivery": (ex) =>
    raw(t.url, "POST", OPERATIONS[ex.operationId].path, {
      key: KEYS.admin,
      body: { ...(OPERATIONS[ex.operationId].body as Json), metadata: { delivery: "async" } },
    }),
  "setConversationSharing 200 reference": () =>
    raw(t.url, "POST", conv(PARENT), { key: KEYS.admin, body: { shared: true } }),
  "setConversationSharing 403 notOwner": () =>
    raw(t.url, "POST", conv(bobsShared), { key: KEYS.admin, body: { shared: false } }),
  "deleteConversation 403 notOwner": () => raw(t.url, "DELETE", conv(bobsShared), { key: KEYS.admin }),
  "forkConversation 409 taken": () =>
    raw(t.url, "POST", conv(PARENT, "/fork"), { key: KEYS.admin, body: { conversation_id: CHILD } }),
  "invokeFlow 200 reference": () =>
    raw(t.url, "POST", "/apps/demo-flow", { key: KEYS.flow, body: { input_vars: { topic: "otters" } } }),
  "invokeFlow 404 noFlow": () =>
    raw(t.url, "POST", "/apps/no-such-flow", { key: KEYS.flow, body: { input_vars: { topic: "x" } } }),
  // The draft step's prompt carries a command that outlives the turn's time-out.
  "invokeFlow 502 stepFailed": () =>
    raw(t.url, "POST", "/apps/demo-flow", {
      key: KEYS.flow,
      body: { input_vars: { topic: "x.\nUse your tools to run the shell command: sleep 5\n" } },
    }),
};

/** Keys and JSON types, recursively (an array by its first element): what ids and times cannot spoil. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.length === 0 ? [] : [shape(value[0])];
  if (value !== null && typeof value === "object")
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, shape((value as Json)[k])]),
    );
  return value === null ? "null" : typeof value;
}

describe("spec examples that claim the reference server's body", () => {
  const examples = referenceExamples();

  it("are many, and each has a recipe here", () => {
    expect(examples.length).toBeGreaterThan(40);
    const missing = examples
      .filter(
        (ex) => !RECIPES[`${ex.operationId} ${ex.status} ${ex.name}`] && !RECIPES[`${ex.status} ${ex.name}`],
      )
      .map((ex) => `${ex.operationId} ${ex.status} ${ex.name}`);
    expect(missing).toEqual([]);
  });

  for (const ex of examples) {
    // stepFailed needs a tool that outlives the turn time-out.
    const tags = ex.name === "stepFailed" ? ["sandbox"] : [];
    it(`${ex.operationId} ${ex.status} ${ex.name}: ${ex.summary}`, { tags }, async () => {
      const recipe =
        RECIPES[`${ex.operationId} ${ex.status} ${ex.name}`] ?? RECIPES[`${ex.status} ${ex.name}`];
      const live = await recipe(ex);
      expect(live.status, live.text).toBe(Number(ex.status));
      if (Number(ex.status) >= 400) expect(live.json).toEqual(ex.value);
      else expect(shape(live.json)).toEqual(shape(ex.value));
    });
  }
});
