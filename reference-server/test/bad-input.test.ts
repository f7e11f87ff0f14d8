/**
 * Bad input over real HTTP: malformed JSON, wrong types, unknown paths, oversize bodies, out-of-range
 * query parameters and hostile ids. Each gets a clear 4xx JSON error (never a 5xx), and every group is
 * checked against a snapshot of everything stored (all SQLite rows, the sandbox file tree) taken before it.
 */

import { readdir } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BODY_LIMIT_BYTES } from "../http/request-limits.ts";
import {
  isErrorBody,
  KEYS,
  PHRASES,
  type RawRequest,
  raw,
  runTurn,
  snapshotStore,
  startTestServer,
  type TestServer,
  uid,
} from "./helpers.ts";

let t: TestServer;
let base: string;
let shared: string;

beforeAll(async () => {
  t = await startTestServer();
  const alice = t.client();
  base = (await runTurn(alice, PHRASES.remember("steady"))).conversationId;
  await alice.waitForSession(base, { intervalMs: 20, timeoutMs: 3000 });
  await runTurn(alice, PHRASES.recall, { conversation_id: base });
  shared = (await runTurn(t.client(KEYS.member), "bob shares this")).conversationId;
  await t.client(KEYS.member).setSharing(shared, true);
  await t.client(KEYS.member).waitForSession(shared, { intervalMs: 20, timeoutMs: 3000 });
  await t.client().fork(base, { conversation_id: uid("fork-of-base") });
});
afterAll(async () => {
  await t?.close();
});

/** Runs `work` and fails when anything stored differs afterwards. */
async function unchanged(work: () => Promise<void>): Promise<void> {
  const before = await snapshotStore(t);
  await work();
  expect(await snapshotStore(t)).toEqual(before);
}

/** A request that must be refused with `status` (or any 4xx when omitted) and the reference error body. */
async function refused(method: string, path: string, req: RawRequest, status?: number) {
  const response = await raw(t.url, method, path, req);
  const label = `${method} ${path.slice(0, 120)} ${req.rawBody ?? JSON.stringify(req.body)?.slice(0, 120)}`;
  if (status !== undefined) expect(response.status, label).toBe(status);
  expect(response.status, label).toBeGreaterThanOrEqual(400);
  expect(response.status, label).toBeLessThan(500);
  expect(response.headers.get("content-type"), label).toMatch(/^application\/json/);
  expect(isErrorBody(response.json), `${label} → ${response.text.slice(0, 200)}`).toBe(true);
  return response;
}

const SEND = "/api/agents/demo-agent/v1/messages";
const user = (content: unknown) => ({ messages: [{ role: "user", content }] });

describe("send-message", () => {
  it("malformed JSON and bodies that are not an object: 400", async () => {
    await unchanged(async () => {
      for (const rawBody of ["{bad", '{"messages": [', "", "   ", "null", "[]", "42", '"text"', "true"]) {
        await refused("POST", SEND, { key: KEYS.admin, rawBody }, 400);
      }
      // Any content type is read as JSON, and bad JSON stays bad whatever it is labelled.
      await refused(
        "POST",
        SEND,
        {
          key: KEYS.admin,
          rawBody: "messages=hi",
          headers: { "content-type": "application/x-www-form-urlencoded" },
        },
        400,
      );
    });
  });

  it("wrong types and shapes: 400", async () => {
    await unchanged(async () => {
      const bodies: unknown[] = [
        {},
        { messages: "hi" },
        { messages: [] },
        { messages: [{ role: "user" }] },
        { messages: [{ content: "x" }] },
        { messages: [{ role: "system", content: "x" }] },
        { messages: [{ role: "assistant", content: "only an assistant message" }] },
        user(5),
        user(null),
        user([{ text: "block without a type" }]),
        user([{ type: "text", text: 5 }]),
        { ...user("x"), stream: "yes" },
        { ...user("x"), model: 5 },
        { ...user("x"), system: ["x"] },
        { ...user("x"), metadata: "x" },
        { ...user("x"), metadata: { conversation_id: 5 } },
        { ...user("x"), metadata: { conversation_id: "" } },
        { ...user("x"), metadata: { delivery: "later" } },
        { ...user("x"), metadata: { stream_tool_calls: "yes" } },
        { ...user("x"), metadata: { read_only: "no" } },
        { ...user("x"), metadata: { isolated: 1 } },
        { ...user("x"), metadata: { automation: 5 } },
        { ...user("x"), metadata: { attachments: "not an array" } },
      ];
      for (const body of bodies) await refused("POST", SEND, { key: KEYS.admin, body }, 400);
      await refused("POST", "/api/agents/v1/messages", { key: KEYS.admin, body: user("x") }, 400);
      await refused(
        "POST",
        "/api/agents/v1/messages",
        { key: KEYS.admin, body: { ...user("x"), model: 5 } },
        400,
      );
    });
  });

  it("hostile metadata.conversation_id values: 400, nothing created", async () => {
    await unchanged(async () => {
      for (const id of [
        "x".repeat(257),
        "ü".repeat(257),
        "new\nline",
        "carriage\rreturn",
        "nul\u0000byte",
        "tab\tinside",
        "del\u007f",
        "c1\u0085control",
        "lone-\ud800-surrogate",
        ".",
        "..",
      ]) {
        await refused(
          "POST",
          SEND,
          { key: KEYS.admin, body: { ...user("x"), metadata: { conversation_id: id } } },
          400,
        );
      }
    });
  });
});

describe("conversation routes", () => {
  it("share bodies other than exactly {shared: boolean}: 400", async () => {
    await unchanged(async () => {
      const path = `/api/agents/demo-agent/conversations/${encodeURIComponent(base)}`;
      for (const body of [
        {},
        { shared: "true" },
        { shared: 1 },
        { shared: null },
        { shared: true, extra: 1 },
        [true],
      ]) {
        await refused("POST", path, { key: KEYS.admin, body }, 400);
      }
      for (const rawBody of ["{bad", "", "null"])
        await refused("POST", path, { key: KEYS.admin, rawBody }, 400);
    });
  });

  it("fork bodies with wrong types or hostile child ids: 400", async () => {
    await unchanged(async () => {
      const path = `/api/agents/demo-agent/conversations/${encodeURIComponent(base)}/fork`;
      for (const body of [
        { at_turn: -1 },
        { at_turn: "1" },
        { at_turn: 1.5 },
        { at_turn: null },
        { extra: 1 },
        { conversation_id: "" },
        { conversation_id: 5 },
        { conversation_id: "x".repeat(257) },
        { conversation_id: "del\u007f" },
        { conversation_id: "line\nbreak" },
        { conversation_id: ".." },
        { model: 5 },
        { automation: ["x"] },
        [],
        "text",
      ]) {
        await refused("POST", path, { key: KEYS.admin, body }, 400);
      }
      await refused("POST", path, { key: KEYS.admin, rawBody: "{bad" }, 400);
    });
  });

  it("list query parameters out of range or of the wrong type: 400", async () => {
    await unchanged(async () => {
      for (const query of [
        "limit=0",
        "limit=201",
        "limit=abc",
        "limit=-1",
        "limit=1.5",
        "limit=",
        "limit=1e2",
        "limit=1&limit=2",
        "channel=BOGUS",
        "channel=slack",
        "since=yesterday",
        "since=2026-13-45T99:00:00Z",
      ]) {
        await refused("GET", `/api/agents/demo-agent/conversations?${query}`, { key: KEYS.admin }, 400);
      }
      for (const query of ["limit=1", "limit=200", "limit=050"]) {
        const ok = await raw(t.url, "GET", `/api/agents/demo-agent/conversations?${query}`, {
          key: KEYS.admin,
        });
        expect(ok.status, query).toBe(200);
      }
    });
  });

  it("hostile ids in the path: a JSON 4xx on every conversation route, never a 5xx", async () => {
    await unchanged(async () => {
      const ids = [
        "y".repeat(300),
        "y".repeat(3000),
        encodeURIComponent("ünïcødé"),
        "ünïcødé",
        encodeURIComponent("../../etc/passwd"),
        "..%2F..%2Fetc%2Fpasswd",
        "%2e%2e",
        "%00",
        "%252F",
        "%E0%A4%A",
        "%",
        encodeURIComponent("a\nb"),
        encodeURIComponent(base).toUpperCase(),
      ];
      for (const id of ids) {
        for (const [method, suffix, body] of [
          ["GET", "", undefined],
          ["GET", "/messages", undefined],
          ["GET", "/last-compaction", undefined],
          ["POST", "", { shared: true }],
          ["POST", "/fork", {}],
          ["DELETE", "", undefined],
        ] as const) {
          await refused(method, `/api/agents/demo-agent/conversations/${id}${suffix}`, {
            key: KEYS.admin,
            body,
          });
        }
      }
    });
  });

  it("unknown paths and methods: 404 with the error body", async () => {
    await unchanged(async () => {
      for (const [method, path] of [
        ["GET", "/"],
        ["GET", "/api"],
        ["GET", "/api/agents"],
        ["GET", "/api/agents/demo-agent"],
        ["POST", "/api/agents/demo-agent/v2/messages"],
        ["GET", "/api/agents/demo-agent/v1/messages"],
        ["GET", `/api/agents/demo-agent/conversations/${base}/messages/extra`],
        ["PUT", `/api/agents/demo-agent/conversations/${base}`],
        ["PATCH", `/api/agents/demo-agent/conversations/${base}`],
        ["DELETE", "/api/agents/demo-agent/conversations"],
        ["GET", "/apps/demo-flow"],
        ["GET", "/../../etc/passwd"],
      ]) {
        await refused(method, path, { key: KEYS.admin, body: method === "GET" ? undefined : {} }, 404);
      }
    });
  });

  it("flows: malformed bodies and missing inputs 400, unknown app 404, bad keys 401", async () => {
    await unchanged(async () => {
      const flow = { key: KEYS.flow };
      for (const rawBody of ["{bad", "", "null"])
        await refused("POST", "/apps/demo-flow", { ...flow, rawBody }, 400);
      for (const body of [
        {},
        { input_vars: "x" },
        { input_vars: { topic: 5 } },
        { input_vars: {} },
        { input_vars: null },
      ]) {
        await refused("POST", "/apps/demo-flow", { ...flow, body }, 400);
      }
      await refused("POST", "/apps/no-such-flow", { ...flow, body: { input_vars: { topic: "x" } } }, 404);
      await refused("POST", "/apps/demo-flow", { body: { input_vars: { topic: "x" } } }, 401);
      await refused(
        "POST",
        "/apps/demo-flow",
        { key: KEYS.admin, body: { input_vars: { topic: "x" } } },
        401,
      );
    });
  });
});

/** Sends `size` bytes with node:http (fetch cannot stream a body this size without buffering it twice). */
function sendLarge(size: number, chunked: boolean): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(SEND, t.url);
    const headers: Record<string, string | number> = {
      "x-api-key": KEYS.admin,
      "content-type": "application/json",
    };
    if (!chunked) headers["content-length"] = size;
    const req = httpRequest(url, { method: "POST", headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    // The server answers and closes while the body is still being written: a write error after that is expected.
    req.on("error", (error) => {
      if (!req.writableEnded) reject(error);
    });
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    let sent = 0;
    const pump = () => {
      while (sent < size) {
        const piece = chunk.subarray(0, Math.min(chunk.length, size - sent));
        sent += piece.length;
        if (!req.write(piece)) {
          req.once("drain", pump);
          return;
        }
      }
      req.end();
    };
    req.on("response", () => {
      sent = size;
    });
    pump();
  });
}

describe("oversize bodies", () => {
  it(`bodies over ${BODY_LIMIT_BYTES} bytes get 413 with the error body, with or without a content-length`, async () => {
    await unchanged(async () => {
      for (const chunked of [false, true]) {
        const response = await sendLarge(BODY_LIMIT_BYTES + 1024 * 1024, chunked);
        expect(response.status, chunked ? "chunked" : "content-length").toBe(413);
        expect(isErrorBody(JSON.parse(response.body))).toBe(true);
      }
    });
    // The server is still fine afterwards.
    expect((await runTurn(t.client(), "still alive")).text).toBe("You said: still alive");
  });
});

describe("legal but odd conversation ids", () => {
  it("travel back unchanged and work on every route, and no id reaches outside the data directory", async () => {
    const alice = t.client();
    const topBefore = (await readdir(t.dataDir)).sort();
    const sandboxesBefore = (await readdir(`${t.dataDir}/sandboxes`)).sort();
    const ids = [
      "../../../../escape-attempt",
      "a/b/c",
      "a?b#c",
      "%41%2F",
      "with spaces inside",
      "~!@$&'()*+,;=:",
      "-leading-dash",
      `${uid("long")}-${"z".repeat(200)}`.slice(0, 256),
    ];
    for (const id of ids) {
      const turn = await runTurn(alice, "Use your tools to create a file named odd.txt containing odd.", {
        conversation_id: id,
      });
      expect(turn.conversationId).toBe(id);
      expect((await alice.getConversation(id)).conversation.id).toBe(id);
      expect((await alice.getTranscript(id)).messages).toHaveLength(2);
      expect((await alice.getLastCompaction(id)).compacted).toBe(false);
      await alice.setSharing(id, true);
      expect((await alice.getConversation(id)).conversation.shared).toBe(true);
      const child = await alice.fork(id, { conversation_id: `${id.slice(0, 200)}#child` });
      expect((await alice.getConversation(child.conversation_id)).conversation.parent_conversation_id).toBe(
        id,
      );
      await alice.deleteConversation(child.conversation_id);
      await alice.deleteConversation(id);
      expect(
        (
          await raw(t.url, "GET", `/api/agents/demo-agent/conversations/${encodeURIComponent(id)}`, {
            key: KEYS.admin,
          })
        ).status,
      ).toBe(404);
    }
    expect((await readdir(t.dataDir)).sort()).toEqual(topBefore);
    // Every conversation's working directory was removed with it (names are hashes, never the id).
    const sandboxesAfter = (await readdir(`${t.dataDir}/sandboxes`)).sort();
    expect(sandboxesAfter).toEqual(sandboxesBefore);
  });
});
