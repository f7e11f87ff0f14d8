/**
 * Conversation ids as the API has them: any string the caller chooses, created verbatim. Over real HTTP,
 * ids outside printable ASCII are stored, listed and returned verbatim in JSON, travel percent-encoded in
 * X-Conversation-Id (the project's client decodes them), and work on every conversation route.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isErrorBody, KEYS, raw, runTurn, startTestServer, type TestServer, uid } from "./helpers.ts";

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
});

const SEND = "/api/agents/demo-agent/v1/messages";
const send = (id: string, content = "hello") =>
  raw(t.url, "POST", SEND, {
    key: KEYS.admin,
    body: { messages: [{ role: "user", content }], metadata: { conversation_id: id } },
  });

describe("any non-empty string without control characters", () => {
  const ids = [
    "héllo",
    "emoji-🙂-id",
    "日本語の会話",
    "  leading and trailing spaces  ",
    "50% done",
    "%41%2F",
    "zero\u200bwidth and \u202eright-to-left",
    "ü".repeat(256),
    "🙂".repeat(256),
  ];

  it("is created verbatim, listed and fetched verbatim, and works on every route", async () => {
    const alice = t.client();
    for (const id of ids) {
      const sent = await send(id);
      expect(sent.status, id).toBe(200);
      const header = sent.headers.get("x-conversation-id") ?? "";
      // Percent-decoding the header always gives the id back.
      expect(decodeURIComponent(header)).toBe(id);
      // HTTP carries only printable ASCII without stripping it: the header value is always that.
      expect(header).toMatch(/^[\x21-\x7e]+$/);

      const conversation = (await alice.getConversation(id)).conversation;
      expect(conversation.id).toBe(id);
      const listed = (await alice.listConversations({ limit: 200 })).conversations.map((c) => c.id);
      expect(listed).toContain(id);
      const transcript = await alice.getTranscript(id);
      expect(transcript.conversation.id).toBe(id);
      expect(transcript.messages).toHaveLength(2);
      // The raw JSON carries the id as a JSON string, not percent-encoded.
      const rawGet = await raw(
        t.url,
        "GET",
        `/api/agents/demo-agent/conversations/${encodeURIComponent(id)}`,
        {
          key: KEYS.admin,
        },
      );
      expect((rawGet.json as { conversation: { id: string } }).conversation.id).toBe(id);

      // The project's client decodes the header and resumes the same conversation.
      const resumed = await runTurn(alice, "again", { conversation_id: id });
      expect(resumed.conversationId).toBe(id);
      expect((await alice.getConversation(id)).conversation.turn_count).toBe(2);

      const childId = `${[...id].slice(0, 200).join("")}·fork·ß`;
      const child = await alice.fork(id, { conversation_id: childId });
      expect(child.conversation_id).toBe(childId);
      expect(child.parent_conversation_id).toBe(id);
      expect((await alice.getConversation(childId)).conversation.parent_conversation_id).toBe(id);
      await alice.setSharing(id, true);
      await alice.deleteConversation(childId);
      await alice.deleteConversation(id);
      expect((await send(id)).status).toBe(200);
      await alice.deleteConversation(id);
    }
  });

  it("ids of printable ASCII without % travel in the header exactly as sent", async () => {
    for (const id of [uid("plain"), `${uid("with")} inner spaces`, `${uid("sym")}~!@$&'()*+,;=:/?#[]`]) {
      const sent = await send(id);
      expect(sent.status).toBe(200);
      expect(sent.headers.get("x-conversation-id")).toBe(id);
    }
  });

  it("a generated id (none sent) comes back in the header and reads back", async () => {
    const sent = await raw(t.url, "POST", SEND, {
      key: KEYS.admin,
      body: { messages: [{ role: "user", content: "new" }] },
    });
    const header = sent.headers.get("x-conversation-id") ?? "";
    expect(header).toMatch(/^[\x21-\x7e]+$/);
    expect((await t.client().getConversation(header)).conversation.id).toBe(header);
  });
});

describe("the limits the spec states", () => {
  it("257 characters, control characters, a lone surrogate, '.' and '..': 400 naming the rule; nothing created", async () => {
    const cases: Array<[string, RegExp]> = [
      ["x".repeat(257), /must NOT have more than 256 characters|1 to 256 characters/],
      ["🙂".repeat(257), /must NOT have more than 256 characters|1 to 256 characters/],
      ["tab\there", /control characters/],
      ["c1\u0085", /control characters/],
      ["nul\u0000", /control characters/],
      ["lone\ud800", /lone surrogate/],
      [".", /"\."/],
      ["..", /"\.\."/],
    ];
    const before = (await t.client().listConversations({ limit: 200 })).conversations.length;
    for (const [id, message] of cases) {
      for (const response of [
        await send(id),
        await raw(
          t.url,
          "POST",
          `/api/agents/demo-agent/conversations/${encodeURIComponent(uid("p"))}/fork`,
          {
            key: KEYS.admin,
            body: { conversation_id: id },
          },
        ),
      ]) {
        expect([400, 404], JSON.stringify(id)).toContain(response.status);
        if (response.status === 400) {
          expect(isErrorBody(response.json)).toBe(true);
          expect((response.json as { message: string }).message, JSON.stringify(id)).toMatch(message);
        }
      }
    }
    expect((await t.client().listConversations({ limit: 200 })).conversations.length).toBe(before);
  });

  it("a fork's child id follows the same rules (400 on a valid parent)", async () => {
    const parent = (await runTurn(t.client(), "parent")).conversationId;
    const response = await raw(
      t.url,
      "POST",
      `/api/agents/demo-agent/conversations/${encodeURIComponent(parent)}/fork`,
      { key: KEYS.admin, body: { conversation_id: "bad\nchild" } },
    );
    expect(response.status).toBe(400);
    expect((response.json as { message: string }).message).toMatch(/control characters/);
  });
});
