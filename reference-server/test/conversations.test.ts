/**
 * The conversation endpoints over real HTTP: list (visibility, filters, order, limit), get, transcript
 * (authors, compaction), last compaction, share toggle, fork and delete. Conversations the API cannot
 * create (owned by a channel, of a notebook) are inserted into the server's own SQLite file through the
 * store, next to the server's connection.
 */

import { AgentApiError, type Conversation } from "@agent-api/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../store/sqlite/index.ts";
import { conversationRecord } from "../store/testing.ts";
import type { ConversationRecord } from "../store/types.ts";
import {
  ISO_MS,
  isErrorBody,
  KEYS,
  PHRASES,
  raw,
  runTurn,
  sleep,
  startTestServer,
  type TestServer,
  uid,
} from "./helpers.ts";

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
});

async function statusOf(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
    return 200;
  } catch (error) {
    if (error instanceof AgentApiError) return error.status;
    throw error;
  }
}

/** Inserts conversations straight into the server's SQLite file (a second connection; WAL allows it). */
async function insertDirectly(records: ConversationRecord[]): Promise<void> {
  const store = openSqliteStore(t.dbFile);
  try {
    for (const record of records) await store.insertConversation(record);
  } finally {
    await store.close();
  }
}

/** A channel-owned (SLACK) conversation seeded straight into the store, titled by its id. */
function record(fields: Partial<ConversationRecord> & Pick<ConversationRecord, "id" | "agent">) {
  const at = "2020-01-01T00:00:00.000Z";
  return conversationRecord({
    ownerMemberId: null,
    channel: "SLACK",
    title: fields.id,
    createdAt: at,
    updatedAt: at,
    ...fields,
  });
}

describe("list conversations", () => {
  it("lists own, shared and channel-owned conversations, newest activity first, and nothing else", async () => {
    const alice = t.client(KEYS.admin, "notes-agent");
    const bob = t.client(KEYS.member, "notes-agent");
    const slack = uid("slack");
    const email = uid("email");
    await insertDirectly([
      record({ id: slack, agent: "notes-agent", channel: "SLACK", channelId: "C-LIST" }),
      record({
        id: email,
        agent: "notes-agent",
        channel: "EMAIL",
        channelId: "ops@example.com",
        updatedAt: "2020-01-02T00:00:00.000Z",
      }),
      // Another workspace's channel conversation on an agent of the same name is never listed.
      record({ id: uid("foreign"), agent: "notes-agent", workspaceId: "other" }),
    ]);
    const own1 = (await runTurn(alice, "alice one")).conversationId;
    await sleep(3);
    const own2 = (await runTurn(alice, "alice two")).conversationId;
    await sleep(3);
    const bobPrivate = (await runTurn(bob, "bob private")).conversationId;
    await sleep(3);
    const bobShared = (await runTurn(bob, "bob shared")).conversationId;
    await bob.setSharing(bobShared, true);
    const hidden = (await runTurn(alice, "hidden test run", { test: true })).conversationId;
    const elsewhere = (await runTurn(t.client(), "on demo-agent")).conversationId;
    await sleep(3);
    // New activity on the oldest of alice's moves it to the front.
    await runTurn(alice, "alice one again", { conversation_id: own1 });

    const { conversations } = await alice.listConversations();
    const ids = conversations.map((c) => c.id);
    expect(ids).toEqual([own1, bobShared, own2, email, slack]);
    expect(ids).not.toContain(bobPrivate);
    expect(ids).not.toContain(hidden);
    expect(ids).not.toContain(elsewhere);
    const byId = new Map(conversations.map((c) => [c.id, c]));
    expect(byId.get(own1)?.is_owner).toBe(true);
    expect(byId.get(bobShared)?.is_owner).toBe(false);
    expect(byId.get(slack)?.is_owner).toBe(false);
    for (let i = 1; i < conversations.length; i++) {
      expect(conversations[i - 1].updated_at >= conversations[i].updated_at).toBe(true);
    }

    // Bob sees his own two, the channel ones, and none of alice's private ones.
    const bobIds = (await bob.listConversations()).conversations.map((c) => c.id);
    expect(bobIds).toEqual([bobShared, bobPrivate, email, slack]);
    // A channel-owned conversation is readable by any member, but nobody owns it.
    const { conversation } = await bob.getConversation(slack);
    expect(conversation.channel).toBe("SLACK");
    expect(conversation.is_owner).toBe(false);
    expect(await statusOf(bob.deleteConversation(slack))).toBe(403);
  });

  it("filters by channel, channel_id, notebook_path, automation and since", async () => {
    const alice = t.client();
    const nbA = uid("nb-a");
    const nbB = uid("nb-b");
    const slackX = uid("slack-x");
    const slackY = uid("slack-y");
    const bobNotebook = uid("nb-bob");
    await insertDirectly([
      record({
        id: nbA,
        agent: "demo-agent",
        ownerMemberId: "alice",
        channel: "NOTEBOOK",
        notebookPath: `${nbA}/report.ipynb`,
      }),
      record({
        id: nbB,
        agent: "demo-agent",
        ownerMemberId: "alice",
        channel: "NOTEBOOK",
        notebookPath: `${nbB}/other.ipynb`,
      }),
      // Bob's notebook conversation is private to bob: not in alice's notebook filter.
      record({
        id: bobNotebook,
        agent: "demo-agent",
        ownerMemberId: "bob",
        channel: "NOTEBOOK",
        notebookPath: `${nbA}/report.ipynb`,
      }),
      record({ id: slackX, agent: "demo-agent", channel: "SLACK", channelId: `${slackX}-chan` }),
      record({ id: slackY, agent: "demo-agent", channel: "SLACK", channelId: `${slackY}-chan` }),
    ]);
    const ids = async (query: Parameters<typeof alice.listConversations>[0]) =>
      (await alice.listConversations({ limit: 200, ...query })).conversations.map((c) => c.id);

    expect(await ids({ notebook_path: `${nbA}/report.ipynb` })).toEqual([nbA]);
    expect(await ids({ channel_id: `${slackY}-chan` })).toEqual([slackY]);
    const slackIds = await ids({ channel: "SLACK" });
    expect(slackIds).toEqual(expect.arrayContaining([slackX, slackY]));
    expect(slackIds).not.toContain(nbA);
    const notebookIds = await ids({ channel: "NOTEBOOK" });
    expect(notebookIds).toEqual(expect.arrayContaining([nbA, nbB]));
    expect(notebookIds).not.toContain(bobNotebook);
    expect(notebookIds).not.toContain(slackX);

    const automated = (await runTurn(alice, "automated", { automation: "nightly-summary" })).conversationId;
    const interactive = (await runTurn(alice, "interactive")).conversationId;
    const automationIds = await ids({ automation: "nightly-summary" });
    expect(automationIds).toContain(automated);
    expect(automationIds).not.toContain(interactive);
    const interactiveIds = await ids({ channel: "INTERACTIVE" });
    expect(interactiveIds).toEqual(expect.arrayContaining([automated, interactive]));
    expect(interactiveIds).not.toContain(slackX);

    // since: the inserted conversations (2020) are older than anything run now.
    const cut = new Date(Date.now() - 60_000).toISOString();
    const recent = await ids({ since: cut });
    expect(recent).toEqual(expect.arrayContaining([automated, interactive]));
    expect(recent).not.toContain(nbA);
    expect(recent).not.toContain(slackX);
    // An ISO 8601 time with an offset is the same instant.
    const later = await runTurn(alice, "after the cut");
    const { conversation } = await alice.getConversation(later.conversationId);
    const offsetForm = new Date(Date.parse(conversation.updated_at)).toISOString().replace("Z", "+00:00");
    expect(await ids({ since: offsetForm })).toContain(later.conversationId);
    expect(await ids({ since: "2019-12-31T00:00:00Z", channel: "NOTEBOOK" })).toEqual(
      expect.arrayContaining([nbA, nbB]),
    );
    // Any ISO 8601 form, a date alone included; what is not a time at all is a 400.
    expect(await ids({ since: "2019-12-31", channel: "NOTEBOOK" })).toEqual(
      expect.arrayContaining([nbA, nbB]),
    );
    const bad = await raw(t.url, "GET", "/api/agents/demo-agent/conversations?since=yesterday", {
      key: KEYS.admin,
    });
    expect(bad.status).toBe(400);
  });

  it("returns at most limit conversations: 1 to 200, default 50", async () => {
    const alice = t.client(KEYS.admin, "acme-widgets");
    const base = Date.parse("2021-01-01T00:00:00.000Z");
    await insertDirectly(
      Array.from({ length: 210 }, (_, i) =>
        record({
          id: uid(`bulk-${String(i).padStart(3, "0")}`),
          agent: "acme-widgets",
          ownerMemberId: "alice",
          channel: "INTERACTIVE",
          createdAt: new Date(base + i * 1000).toISOString(),
          updatedAt: new Date(base + i * 1000).toISOString(),
        }),
      ),
    );
    const all = (await alice.listConversations({ limit: 200 })).conversations;
    expect(all).toHaveLength(200);
    for (let i = 1; i < all.length; i++) expect(all[i - 1].updated_at > all[i].updated_at).toBe(true);
    const byDefault = (await alice.listConversations()).conversations;
    expect(byDefault).toHaveLength(50);
    expect(byDefault.map((c) => c.id)).toEqual(all.slice(0, 50).map((c) => c.id));
    const one = (await alice.listConversations({ limit: 1 })).conversations;
    expect(one.map((c) => c.id)).toEqual([all[0].id]);
    for (const bad of ["0", "201", "abc", "-1", "1.5"]) {
      const response = await raw(t.url, "GET", `/api/agents/acme-widgets/conversations?limit=${bad}`, {
        key: KEYS.admin,
      });
      expect(response.status, `limit=${bad}`).toBe(400);
      expect(isErrorBody(response.json)).toBe(true);
    }
  });
});

describe("get a conversation", () => {
  it("returns {conversation} with every field of the API, timestamps in ISO 8601 UTC with ms", async () => {
    const alice = t.client();
    const turn = await runTurn(alice, "A title\nand a second line that is not part of it");
    const body = await alice.getConversation(turn.conversationId);
    expect(Object.keys(body)).toContain("conversation");
    const c = body.conversation;
    expect(c.title).toBe("A title");
    expect(c.created_at).toMatch(ISO_MS);
    expect(c.updated_at).toMatch(ISO_MS);
    expect(c.updated_at >= c.created_at).toBe(true);
    expect(Object.keys(c).sort()).toEqual(
      [
        "id",
        "title",
        "channel",
        "shared",
        "is_owner",
        "agent_session_id",
        "parent_conversation_id",
        "forked_at_turn_index",
        "created_at",
        "updated_at",
        "turn_count",
      ].sort(),
    );
    // The title is derived from the first prompt and never changes afterwards.
    await runTurn(alice, "Another prompt", { conversation_id: turn.conversationId });
    expect((await alice.getConversation(turn.conversationId)).conversation.title).toBe("A title");
  });

  it("is 404 for a missing id, another agent's, another workspace's and another member's private one", async () => {
    const alice = t.client();
    const turn = await runTurn(alice, "mine");
    expect(await statusOf(alice.getConversation(uid("nope")))).toBe(404);
    expect(await statusOf(t.client(KEYS.admin, "notes-agent").getConversation(turn.conversationId))).toBe(
      404,
    );
    expect(
      await statusOf(t.client(KEYS.otherAdmin, "other-agent").getConversation(turn.conversationId)),
    ).toBe(404);
    expect(await statusOf(t.client(KEYS.member).getConversation(turn.conversationId))).toBe(404);
  });
});

describe("transcript", () => {
  it("has the conversation, messages with author fields on user messages, and the raw events", async () => {
    const alice = t.client();
    const bob = t.client(KEYS.member);
    const turn = await runTurn(bob, "Bob asks something.");
    await runTurn(bob, PHRASES.think, { conversation_id: turn.conversationId });
    const transcript = await bob.getTranscript(turn.conversationId);
    expect(transcript.conversation.id).toBe(turn.conversationId);
    expect(transcript.conversation.turn_count).toBe(2);
    expect(transcript.messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
    for (const m of transcript.messages) {
      expect(m.is_compact_summary ?? false).toBe(false);
      for (const block of m.content) {
        expect(block.type).toBe("text");
        expect(typeof block.text).toBe("string");
      }
      if (m.role === "user") {
        expect(m.author_user_id).toBe("bob");
        expect(m.author_name).toBe("Bob Operator");
      } else {
        expect(m.author_user_id).toBeUndefined();
        expect(m.author_name).toBeUndefined();
      }
    }
    expect(transcript.messages[0].content[0].text).toBe("Bob asks something.");
    expect(transcript.messages[1].content[0].text).toBe("You said: Bob asks something.");
    expect(Array.isArray(transcript.events)).toBe(true);
    // The thinking block of the second turn is in the raw events, not in the messages.
    expect(JSON.stringify(transcript.events)).toContain("thinking");

    // Shared, alice reads bob's transcript with bob's authorship; unshared again, it is gone for her.
    await bob.setSharing(turn.conversationId, true);
    const seen = await alice.getTranscript(turn.conversationId);
    expect(seen.messages).toEqual(transcript.messages);
    expect(seen.conversation.is_owner).toBe(false);
    await bob.setSharing(turn.conversationId, false);
    expect(await statusOf(alice.getTranscript(turn.conversationId))).toBe(404);
  });

  it("marks an automatic compaction as a user message with is_compact_summary, and last-compaction returns it", async () => {
    // Tools (their outputs fill the budget) run unisolated where bubblewrap does not work.
    const small = await startTestServer({ compactionBudgetTokens: 500, unsafeNoIsolation: true });
    try {
      const alice = small.client();
      const id = uid("compact");
      const words = ["w-alpha", "w-bravo", "w-charlie", "w-delta"];
      const pad = " Padding to grow the context.".repeat(2);
      let compactedAfter = -1;
      for (const [i, word] of words.entries()) {
        await runTurn(alice, `${PHRASES.remember(word)}${pad}`, { conversation_id: id });
        await alice.waitForSession(id, { intervalMs: 25, timeoutMs: 3000 });
        const last = await alice.getLastCompaction(id);
        if (compactedAfter < 0) {
          if (last.compacted) compactedAfter = i;
          else expect(last).toEqual({ compacted: false, summary: "" });
        }
      }
      expect(compactedAfter).toBeGreaterThan(0);
      const transcript = await alice.getTranscript(id);
      const summaries = transcript.messages.filter((m) => m.is_compact_summary === true);
      expect(summaries.length).toBeGreaterThanOrEqual(1);
      // A user message like any other: it carries the author of the turn that compacted.
      for (const s of summaries) {
        expect(s.role).toBe("user");
        expect(s.author_user_id).toBe("alice");
        expect(s.author_name).toBe("Alice Admin");
      }
      const last = await alice.getLastCompaction(id);
      expect(last.compacted).toBe(true);
      expect(last.summary).toBe(summaries.at(-1)?.content[0].text);
      // Every user prompt is still in the transcript next to the summary, and memory survived compaction.
      expect(transcript.messages.filter((m) => m.role === "user" && !m.is_compact_summary)).toHaveLength(4);
      const recall = await runTurn(alice, PHRASES.recall, { conversation_id: id });
      expect(recall.text).toBe("w-delta");
      // A conversation never compacted says so.
      const fresh = await runTurn(alice, "short");
      expect(await alice.getLastCompaction(fresh.conversationId)).toEqual({ compacted: false, summary: "" });
    } finally {
      await small.close();
    }
  });
});

describe("share toggle", () => {
  it("shares and unshares with exactly {shared: boolean}; readers are members of the workspace only", async () => {
    const alice = t.client();
    const bob = t.client(KEYS.member);
    const carol = t.client(KEYS.viewer);
    const turn = await runTurn(alice, "to be shared");
    // The response body is "not shown" by the API; the reference server answers {conversation}.
    const shared = (await alice.setSharing(turn.conversationId, true)) as { conversation: Conversation };
    expect(shared.conversation).toMatchObject({ id: turn.conversationId, shared: true, is_owner: true });
    expect((await alice.getConversation(turn.conversationId)).conversation.shared).toBe(true);
    expect((await bob.getConversation(turn.conversationId)).conversation.shared).toBe(true);
    expect((await carol.getTranscript(turn.conversationId)).messages).toHaveLength(2);
    expect(
      await statusOf(t.client(KEYS.otherAdmin, "other-agent").getConversation(turn.conversationId)),
    ).toBe(404);
    await alice.setSharing(turn.conversationId, false);
    expect((await alice.getConversation(turn.conversationId)).conversation.shared).toBe(false);
    expect(await statusOf(bob.getConversation(turn.conversationId))).toBe(404);
    for (const body of [{}, { shared: "true" }, { shared: true, title: "x" }, { shared: null }, []]) {
      const response = await raw(
        t.url,
        "POST",
        `/api/agents/demo-agent/conversations/${encodeURIComponent(turn.conversationId)}`,
        { key: KEYS.admin, body },
      );
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(isErrorBody(response.json)).toBe(true);
    }
    expect((await alice.getConversation(turn.conversationId)).conversation.shared).toBe(false);
  });

  it("is owner only: 403 for a member who can see it (even an Admin), 404 for one who cannot", async () => {
    const alice = t.client();
    const bob = t.client(KEYS.member);
    const bobs = (await runTurn(bob, "bob's")).conversationId;
    expect(await statusOf(alice.setSharing(bobs, true))).toBe(404);
    await bob.setSharing(bobs, true);
    expect(await statusOf(alice.setSharing(bobs, false))).toBe(403);
    expect(await statusOf(t.client(KEYS.viewer).setSharing(bobs, false))).toBe(403);
    expect((await bob.getConversation(bobs)).conversation.shared).toBe(true);
    expect(await statusOf(alice.setSharing(uid("missing"), true))).toBe(404);
  });
});

describe("fork", () => {
  it("a fork's recorded model beats its recorded automation's model; this turn's automation beats both", async () => {
    const alice = t.client();
    const parentId = (await runTurn(alice, PHRASES.remember("fork-model"))).conversationId;
    // nightly-summary runs on demo-small; the fork records demo-large as the child's model.
    const child = await alice.fork(parentId, { model: "demo-large", automation: "nightly-summary" });
    const asked = (metadata?: { automation: string }) =>
      runTurn(alice, PHRASES.whichModel, { conversation_id: child.conversation_id, ...metadata });
    expect((await asked()).text).toContain("demo-large");
    expect((await asked({ automation: "nightly-summary" })).text).toContain("demo-small");
  });

  it("copies history up to at_turn (clamped), makes a private child owned by the caller, leaves the parent unchanged", async () => {
    const alice = t.client();
    const bob = t.client(KEYS.member);
    const parentId = uid("parent");
    await runTurn(alice, PHRASES.remember("fork-kiwi"), { conversation_id: parentId });
    await alice.waitForSession(parentId, { intervalMs: 25, timeoutMs: 3000 });
    await runTurn(alice, PHRASES.remember("fork-mango"), { conversation_id: parentId });
    await alice.waitForSession(parentId, { intervalMs: 25, timeoutMs: 3000 });
    await alice.setSharing(parentId, true);
    const parentBefore = await alice.getTranscript(parentId);

    // Bob may read it, so he may fork it; the child is his and private.
    const whole = await bob.fork(parentId, { at_turn: 99 });
    expect(whole.parent_conversation_id).toBe(parentId);
    expect(whole.forked_at_turn).toBe(2);
    expect(typeof whole.agent_session_id).toBe("string");
    const child = await bob.getTranscript(whole.conversation_id);
    expect(child.conversation).toMatchObject({
      id: whole.conversation_id,
      shared: false,
      is_owner: true,
      parent_conversation_id: parentId,
      forked_at_turn_index: 2,
      turn_count: 2,
    });
    expect(child.messages).toEqual(parentBefore.messages);
    expect(await statusOf(alice.getConversation(whole.conversation_id))).toBe(404);
    // The child answers from the parent's context at once.
    expect((await runTurn(bob, PHRASES.recall, { conversation_id: whole.conversation_id })).text).toBe(
      "fork-mango",
    );

    const first = await bob.fork(parentId, { at_turn: 1 });
    expect(first.forked_at_turn).toBe(1);
    expect((await bob.getTranscript(first.conversation_id)).messages).toEqual(
      parentBefore.messages.slice(0, 2),
    );
    expect((await runTurn(bob, PHRASES.recall, { conversation_id: first.conversation_id })).text).toBe(
      "fork-kiwi",
    );

    const none = await bob.fork(parentId, { at_turn: 0 });
    expect(none.forked_at_turn).toBe(0);
    expect((await bob.getTranscript(none.conversation_id)).messages).toEqual([]);
    expect((await runTurn(bob, PHRASES.recall, { conversation_id: none.conversation_id })).text).toBe(
      "I don't know",
    );

    // Nothing about the parent changed (bob's turns went to the children).
    expect(await alice.getTranscript(parentId)).toEqual(parentBefore);
  });

  it("takes the child's id, and answers 409 when that id is taken (by anyone, anywhere)", async () => {
    const alice = t.client();
    const parent = (await runTurn(alice, "parent of named forks")).conversationId;
    const childId = uid("named-child");
    const fork = await alice.fork(parent, { conversation_id: childId });
    expect(fork.conversation_id).toBe(childId);
    const again = await raw(
      t.url,
      "POST",
      `/api/agents/demo-agent/conversations/${encodeURIComponent(parent)}/fork`,
      {
        key: KEYS.admin,
        body: { conversation_id: childId },
      },
    );
    expect(again.status).toBe(409);
    expect(isErrorBody(again.json)).toBe(true);
    expect(await statusOf(alice.fork(parent, { conversation_id: parent }))).toBe(409);
    const bobs = (await runTurn(t.client(KEYS.member), "bob's private")).conversationId;
    expect(await statusOf(alice.fork(parent, { conversation_id: bobs }))).toBe(409);
    // The taken conversation was not touched.
    expect((await t.client(KEYS.member).getTranscript(bobs)).messages).toHaveLength(2);
  });

  it("records model and automation on the child as defaults for its future turns", async () => {
    const alice = t.client();
    const parent = (await runTurn(alice, "parent")).conversationId;
    const withModel = await alice.fork(parent, { model: "demo-small" });
    expect(
      (await runTurn(alice, PHRASES.whichModel, { conversation_id: withModel.conversation_id })).text,
    ).toBe("demo-small");
    // The body still wins over the recorded default.
    const bodyWins = await runTurn(alice, {
      model: "demo-large",
      messages: [{ role: "user", content: PHRASES.whichModel }],
      metadata: { conversation_id: withModel.conversation_id },
    });
    expect(bodyWins.text).toBe("demo-large");
    // And the default stays for the turn after.
    expect(
      (await runTurn(alice, PHRASES.whichModel, { conversation_id: withModel.conversation_id })).text,
    ).toBe("demo-small");

    const withAutomation = await alice.fork(parent, { automation: "nightly-summary" });
    const automated = await runTurn(alice, "", { conversation_id: withAutomation.conversation_id });
    expect(automated.text).toContain("AUTOMATION-PROMPT-USED");
    expect(automated.model).toBe("demo-small");

    // Inherited: a fork of the fork keeps the recorded model.
    const grandchild = await alice.fork(withModel.conversation_id);
    expect(
      (await runTurn(alice, PHRASES.whichModel, { conversation_id: grandchild.conversation_id })).text,
    ).toBe("demo-small");
  });

  it("inherits the model and automation the parent's request named, not only an earlier fork's", async () => {
    const alice = t.client();
    const asked = async (id: string) =>
      (await runTurn(alice, PHRASES.whichModel, { conversation_id: id })).text;
    // The parent ran with a model from its request body (not the agent default, demo-large).
    const withModel = uid("parent-model");
    await runTurn(alice, {
      model: "demo-small",
      messages: [{ role: "user", content: "parent" }],
      metadata: { conversation_id: withModel },
    });
    const modelChild = await alice.fork(withModel);
    expect(await asked(modelChild.conversation_id)).toBe("demo-small");
    // And the grandchild through the child's recorded default.
    expect(await asked((await alice.fork(modelChild.conversation_id)).conversation_id)).toBe("demo-small");

    // The parent was started by an automation named in its request: the child runs under it.
    const withAutomation = uid("parent-automation");
    await runTurn(alice, "", { conversation_id: withAutomation, automation: "nightly-summary" });
    const automationChild = await alice.fork(withAutomation);
    const automated = await runTurn(alice, "", { conversation_id: automationChild.conversation_id });
    expect(automated.text).toContain("AUTOMATION-PROMPT-USED");
    expect(automated.model).toBe("demo-small");

    // The latest turn counts: a parent whose last turn named no model gives the child the defaults.
    await runTurn(alice, "back to defaults", { conversation_id: withModel });
    expect(await asked((await alice.fork(withModel)).conversation_id)).toBe("demo-large");
    // The fork body still wins over what is inherited.
    const overridden = await alice.fork(withAutomation, { model: "demo-large" });
    expect(await asked(overridden.conversation_id)).toBe("demo-large");
  });

  it("is 404 for a conversation the caller cannot read", async () => {
    const bobs = (await runTurn(t.client(KEYS.member), "bob's private")).conversationId;
    expect(await statusOf(t.client().fork(bobs))).toBe(404);
    expect(await statusOf(t.client(KEYS.otherAdmin, "other-agent").fork(bobs))).toBe(404);
    expect(await statusOf(t.client().fork(uid("missing")))).toBe(404);
  });
});

describe("delete", () => {
  it("is owner only with no admin override, answers 204, and removes the conversation", async () => {
    const alice = t.client();
    const bob = t.client(KEYS.member);
    const bobs = (await runTurn(bob, PHRASES.remember("deleted-word"))).conversationId;
    await bob.waitForSession(bobs, { intervalMs: 25, timeoutMs: 3000 });
    expect(await statusOf(alice.deleteConversation(bobs))).toBe(404);
    await bob.setSharing(bobs, true);
    // Alice is an Admin, and still not allowed.
    expect(await statusOf(alice.deleteConversation(bobs))).toBe(403);
    const child = await alice.fork(bobs);

    const response = await raw(
      t.url,
      "DELETE",
      `/api/agents/demo-agent/conversations/${encodeURIComponent(bobs)}`,
      {
        key: KEYS.member,
      },
    );
    expect(response.status).toBe(204);
    expect(response.text).toBe("");
    expect(await statusOf(bob.getConversation(bobs))).toBe(404);
    expect(await statusOf(bob.getTranscript(bobs))).toBe(404);
    expect(await statusOf(bob.getLastCompaction(bobs))).toBe(404);
    expect((await bob.listConversations({ limit: 200 })).conversations.map((c) => c.id)).not.toContain(bobs);
    expect(await statusOf(bob.deleteConversation(bobs))).toBe(404);
    // The fork made from it is untouched.
    expect((await alice.getTranscript(child.conversation_id)).messages).toHaveLength(2);

    // The id is free again: a new conversation with no memory of the deleted one.
    const reused = await runTurn(bob, PHRASES.recall, { conversation_id: bobs });
    expect(reused.text).toBe("I don't know");
    expect((await bob.getConversation(bobs)).conversation.turn_count).toBe(1);
  });
});
