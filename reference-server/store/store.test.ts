/**
 * The store's behaviour, the same on every engine: each test runs on SQLite and on PostgreSQL (the test run's
 * cluster; skipped with the reason where there is none). Engine-specific tests: sqlite.test.ts, postgres.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { conversationRecord, type OpenedStore, STORE_ENGINES, textTurn } from "./testing.ts";
import { ConversationExistsError, type SessionHistory, type Store, type TurnWrite } from "./types.ts";

const conversation = conversationRecord;
const turn = textTurn;

const historyConversation = (id: string) => conversationRecord({ id, title: "Long" });
const user = (text: string) => ({ role: "user", content: [{ type: "text", text }] });
const assistant = (text: string) => ({ role: "assistant", content: [{ type: "text", text }] });

function historyTurn(id: string, turnIndex: number, session: TurnWrite["session"]): TurnWrite {
  return {
    conversationId: id,
    turnIndex,
    messages: [
      {
        role: "user",
        text: `q${turnIndex}`,
        authorMemberId: "alice",
        authorName: "Alice",
        isCompactSummary: false,
      },
    ],
    events: [],
    compaction: null,
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, turnIndex)).toISOString(),
    session,
  };
}

async function history(store: Store, id: string): Promise<SessionHistory> {
  return (await store.getSession(id))?.context as SessionHistory;
}

const listAll = { workspaceId: "demo", agent: "demo-agent", viewerMemberId: "alice", limit: 200 };

describe.each(STORE_ENGINES)("$name store", (engine) => {
  let opened: OpenedStore;
  let store: Store;

  beforeEach(async (context) => {
    if (engine.skip) context.skip(engine.skip);
    opened = await engine.open();
    store = opened.store;
  });

  afterEach(async () => {
    await opened?.destroy();
  });

  describe("conversations", () => {
    it("inserts, reads back every field, and returns undefined for an unknown id", async () => {
      const record = conversation({
        channel: "NOTEBOOK",
        channelId: "ch",
        notebookPath: "nb/a.ipynb",
        automation: "nightly",
        shared: true,
        agentSessionId: "s1",
        parentConversationId: "p",
        forkedAtTurnIndex: 2,
        defaultModel: "m",
        defaultAutomation: "a",
        turnModel: "tm",
        turnAutomation: "ta",
        hidden: true,
        turnCount: 3,
      });
      const generation = await store.insertConversation(record);
      expect(generation).toBeGreaterThan(0);
      expect(await store.getConversation("c1")).toEqual({ ...record, generation });
      expect(await store.getConversation("nope")).toBeUndefined();
    });

    it("gives an id deleted and created again another generation, and reads generations in a batch", async () => {
      const first = await store.insertConversation(conversation());
      const other = await store.insertConversation(conversation({ id: "c2", workspaceId: "other" }));
      await store.deleteConversation("c1");
      const again = await store.insertConversation(conversation({ workspaceId: "other" }));
      expect(new Set([first, other, again]).size).toBe(3);
      expect(again).toBeGreaterThan(first);
      expect(await store.conversationGenerations(["c1", "c2", "gone"])).toEqual(
        new Map([
          ["c1", again],
          ["c2", other],
        ]),
      );
    });

    it("throws ConversationExistsError on a taken id and keeps the original", async () => {
      await store.insertConversation(conversation({ title: "first" }));
      await expect(store.insertConversation(conversation({ title: "second" }))).rejects.toThrow(
        ConversationExistsError,
      );
      expect((await store.getConversation("c1"))?.title).toBe("first");
    });

    it("keeps the API's free text verbatim, U+0000 and emoji included (title, messages, summary, pending turn)", async () => {
      const text = "a\u0000b 💥 \u0001 'x' \\";
      await store.insertConversation(conversation({ title: text }));
      await store.beginTurn({
        conversationId: "c1",
        turnIndex: 0,
        text,
        authorMemberId: "alice",
        authorName: "Alice",
        startedAt: "2026-01-01T00:00:00.000Z",
      });
      expect((await store.listPendingTurns())[0].text).toBe(text);
      const write = turn("c1", 0, { compaction: { summary: text }, events: [{ type: "text", text }] });
      write.messages[0].text = text;
      await store.commitTurn(write);
      expect((await store.getConversation("c1"))?.title).toBe(text);
      expect((await store.listMessages("c1"))[0].text).toBe(text);
      expect((await store.listEvents("c1"))[0].event).toEqual({ type: "text", text });
      expect((await store.getLastCompaction("c1"))?.summary).toBe(text);
    });

    it("updates only the patched fields, including back to null and false", async () => {
      const generation = await store.insertConversation(conversation({ shared: true, agentSessionId: "s1" }));
      await store.updateConversation("c1", {
        shared: false,
        agentSessionId: null,
        updatedAt: "2026-02-01T00:00:00.000Z",
      });
      const got = await store.getConversation("c1");
      expect(got).toEqual(
        conversation({
          shared: false,
          agentSessionId: null,
          updatedAt: "2026-02-01T00:00:00.000Z",
          generation,
        }),
      );
      await store.updateConversation("c1", {});
      await store.updateConversation("missing", { shared: true });
      expect(await store.getConversation("missing")).toBeUndefined();
    });

    it("stores hostile ids verbatim: unicode, 10 kB, path traversal, SQL", async () => {
      const ids = [
        "../../etc/passwd",
        "ünïcødé-💥-会話",
        "x".repeat(10 * 1024),
        "'; DROP TABLE conversations; --",
        "",
      ];
      for (const id of ids) await store.insertConversation(conversation({ id }));
      for (const id of ids) {
        expect((await store.getConversation(id))?.id).toBe(id);
        await store.commitTurn(turn(id, 0));
        expect(await store.listMessages(id)).toHaveLength(2);
      }
      expect(await store.listConversations(listAll)).toHaveLength(ids.length);
      expect(await store.deleteConversation(ids[0])).toBe(true);
      expect(await store.getConversation(ids[0])).toBeUndefined();
      expect((await store.getConversation(ids[1]))?.id).toBe(ids[1]);
    });
  });

  describe("listConversations", () => {
    it("shows own, shared and channel-owned conversations; hides others' private and hidden ones", async () => {
      await store.insertConversation(conversation({ id: "own" }));
      await store.insertConversation(conversation({ id: "bob-private", ownerMemberId: "bob" }));
      await store.insertConversation(conversation({ id: "bob-shared", ownerMemberId: "bob", shared: true }));
      await store.insertConversation(conversation({ id: "slack", ownerMemberId: null, channel: "SLACK" }));
      await store.insertConversation(conversation({ id: "own-hidden", hidden: true }));
      await store.insertConversation(conversation({ id: "other-agent", agent: "notes-agent" }));
      await store.insertConversation(conversation({ id: "other-ws", workspaceId: "other" }));
      const ids = async (viewer: string) =>
        (await store.listConversations({ ...listAll, viewerMemberId: viewer })).map((c) => c.id).sort();
      expect(await ids("alice")).toEqual(["bob-shared", "own", "slack"]);
      expect(await ids("bob")).toEqual(["bob-private", "bob-shared", "slack"]);
      expect(await ids("carol")).toEqual(["bob-shared", "slack"]);
    });

    it("orders by updatedAt, then createdAt, then id, newest first, and applies the limit", async () => {
      await store.insertConversation(conversation({ id: "a", updatedAt: "2026-01-03T00:00:00.000Z" }));
      await store.insertConversation(conversation({ id: "b", updatedAt: "2026-01-05T00:00:00.000Z" }));
      await store.insertConversation(
        conversation({
          id: "c",
          updatedAt: "2026-01-03T00:00:00.000Z",
          createdAt: "2026-01-02T00:00:00.000Z",
        }),
      );
      await store.insertConversation(conversation({ id: "d", updatedAt: "2026-01-03T00:00:00.000Z" }));
      expect((await store.listConversations(listAll)).map((c) => c.id)).toEqual(["b", "c", "d", "a"]);
      expect((await store.listConversations({ ...listAll, limit: 2 })).map((c) => c.id)).toEqual(["b", "c"]);
      // A committed turn is new activity.
      await store.commitTurn(turn("a", 0, { at: "2026-01-09T00:00:00.000Z" }));
      expect((await store.listConversations({ ...listAll, limit: 1 })).map((c) => c.id)).toEqual(["a"]);
    });

    it("filters by channel, channel id, notebook path, automation and since", async () => {
      await store.insertConversation(
        conversation({ id: "slack", ownerMemberId: null, channel: "SLACK", channelId: "C1" }),
      );
      await store.insertConversation(
        conversation({ id: "slack2", ownerMemberId: null, channel: "SLACK", channelId: "C2" }),
      );
      await store.insertConversation(
        conversation({ id: "nb", channel: "NOTEBOOK", notebookPath: "a/b.ipynb" }),
      );
      await store.insertConversation(
        conversation({ id: "auto", automation: "nightly-summary", updatedAt: "2026-03-01T12:00:00.000Z" }),
      );
      const ids = async (extra: object) =>
        (await store.listConversations({ ...listAll, ...extra })).map((c) => c.id).sort();
      expect(await ids({ channel: "SLACK" })).toEqual(["slack", "slack2"]);
      expect(await ids({ channelId: "C2" })).toEqual(["slack2"]);
      expect(await ids({ channel: "SLACK", channelId: "C1" })).toEqual(["slack"]);
      expect(await ids({ notebookPath: "a/b.ipynb" })).toEqual(["nb"]);
      expect(await ids({ automation: "nightly-summary" })).toEqual(["auto"]);
      expect(await ids({ automation: "unknown" })).toEqual([]);
      expect(await ids({ since: "2026-03-01T12:00:00.000Z" })).toEqual(["auto"]);
      // Other ISO 8601 spellings of the same instant compare as times, not as text.
      expect(await ids({ since: "2026-03-01T13:00:00+01:00" })).toEqual(["auto"]);
      expect(await ids({ since: "2026-03-01T12:00:00.001Z" })).toEqual([]);
    });
  });

  describe("turns", () => {
    it("commits messages, events and compaction in order and bumps turnCount and updatedAt", async () => {
      await store.insertConversation(conversation());
      await store.commitTurn(turn("c1", 0));
      await store.commitTurn(
        turn("c1", 1, {
          messages: [
            { role: "user", text: "summary", authorMemberId: null, authorName: null, isCompactSummary: true },
            {
              role: "user",
              text: "q",
              authorMemberId: "alice",
              authorName: "Alice",
              isCompactSummary: false,
            },
          ],
          events: [{ kind: "compaction", summary: "summary" }, { nested: { deep: [1, "two", null] } }],
          compaction: { summary: "summary" },
        }),
      );
      const c = await store.getConversation("c1");
      expect(c?.turnCount).toBe(2);
      expect(c?.updatedAt).toBe("2026-01-01T00:02:00.000Z");
      const messages = await store.listMessages("c1");
      expect(messages.map((m) => [m.turnIndex, m.seq, m.role, m.text, m.isCompactSummary])).toEqual([
        [0, 0, "user", "question 0", false],
        [0, 1, "assistant", "answer 0", false],
        [1, 2, "user", "summary", true],
        [1, 3, "user", "q", false],
      ]);
      expect(messages[0]).toMatchObject({
        authorMemberId: "alice",
        authorName: "Alice",
        conversationId: "c1",
      });
      expect((await store.listEvents("c1")).map((e) => [e.turnIndex, e.seq, e.event])).toEqual([
        [0, 0, { kind: "text", text: "answer 0" }],
        [1, 1, { kind: "compaction", summary: "summary" }],
        [1, 2, { nested: { deep: [1, "two", null] } }],
      ]);
      expect(await store.getLastCompaction("c1")).toEqual({
        conversationId: "c1",
        turnIndex: 1,
        summary: "summary",
        createdAt: "2026-01-01T00:02:00.000Z",
      });
    });

    it("returns the newest compaction, and undefined when there is none", async () => {
      await store.insertConversation(conversation());
      expect(await store.getLastCompaction("c1")).toBeUndefined();
      await store.commitTurn(turn("c1", 0, { compaction: { summary: "first" } }));
      await store.commitTurn(turn("c1", 1));
      await store.commitTurn(turn("c1", 2, { compaction: { summary: "second" } }));
      expect((await store.getLastCompaction("c1"))?.summary).toBe("second");
    });

    it("commitTurn is atomic: a failing write leaves nothing behind", async () => {
      await store.insertConversation(conversation());
      await store.commitTurn(turn("c1", 0));
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      // The failure comes after the conversation bump and the messages were written.
      await expect(
        store.commitTurn(turn("c1", 1, { events: [{ ok: 1 }, circular], compaction: { summary: "s" } })),
      ).rejects.toThrow();
      // A constraint failure inside SQLite (a role the schema refuses) also rolls everything back.
      const badRole = turn("c1", 1);
      (badRole.messages[1] as { role: string }).role = "system";
      await expect(store.commitTurn(badRole)).rejects.toThrow();
      const c = await store.getConversation("c1");
      expect(c?.turnCount).toBe(1);
      expect(c?.updatedAt).toBe("2026-01-01T00:01:00.000Z");
      expect(await store.listMessages("c1")).toHaveLength(2);
      expect(await store.listEvents("c1")).toHaveLength(1);
      expect(await store.getLastCompaction("c1")).toBeUndefined();
      // The store is still usable after the rollbacks.
      await store.commitTurn(turn("c1", 1));
      expect(await store.listMessages("c1")).toHaveLength(4);
    });

    it("commitTurn on an unknown conversation throws and writes nothing", async () => {
      await expect(store.commitTurn(turn("ghost", 0))).rejects.toThrow(/no conversation/);
      expect(await store.listMessages("ghost")).toEqual([]);
      expect(await store.listEvents("ghost")).toEqual([]);
    });

    it("copyTurns copies turns before uptoTurn to the child and leaves the parent unchanged", async () => {
      await store.insertConversation(conversation({ id: "parent" }));
      await store.commitTurn(turn("parent", 0, { compaction: { summary: "early" } }));
      await store.commitTurn(turn("parent", 1));
      await store.commitTurn(turn("parent", 2, { compaction: { summary: "late" } }));
      const parentMessages = await store.listMessages("parent");
      await store.insertConversation(
        conversation({ id: "child", ownerMemberId: "bob", parentConversationId: "parent" }),
      );
      await store.copyTurns("parent", "child", 2);
      const child = await store.listMessages("child");
      expect(child.map((m) => [m.turnIndex, m.seq, m.text])).toEqual([
        [0, 0, "question 0"],
        [0, 1, "answer 0"],
        [1, 2, "question 1"],
        [1, 3, "answer 1"],
      ]);
      expect(child.every((m) => m.conversationId === "child")).toBe(true);
      expect((await store.listEvents("child")).map((e) => e.turnIndex)).toEqual([0, 1]);
      expect((await store.getLastCompaction("child"))?.summary).toBe("early");
      expect(await store.listMessages("parent")).toEqual(parentMessages);
      expect((await store.getConversation("parent"))?.turnCount).toBe(3);
      // The child continues after the copied turns.
      await store.commitTurn(turn("child", 2));
      expect((await store.listMessages("child")).map((m) => m.seq)).toEqual([0, 1, 2, 3, 4, 5]);
      // uptoTurn beyond the length copies everything; 0 copies nothing.
      await store.insertConversation(conversation({ id: "all" }));
      await store.copyTurns("parent", "all", 99);
      expect(await store.listMessages("all")).toHaveLength(6);
      await store.insertConversation(conversation({ id: "none" }));
      await store.copyTurns("parent", "none", 0);
      expect(await store.listMessages("none")).toEqual([]);
    });

    it("copyTurns into a missing child fails and writes nothing", async () => {
      await store.insertConversation(conversation({ id: "parent" }));
      await store.commitTurn(turn("parent", 0));
      await expect(store.copyTurns("parent", "ghost", 1)).rejects.toThrow();
      expect(await store.listMessages("ghost")).toEqual([]);
    });
  });

  describe("sessions", () => {
    it("creates, reads, updates the JSON context; unknown id gives undefined", async () => {
      const context = [{ role: "user", text: "remember kiwi" }];
      await store.createSession({
        id: "s1",
        conversationId: "c1",
        context,
        createdAt: "2026-01-01T00:00:00.000Z",
        updatedAt: "2026-01-01T00:00:00.000Z",
      });
      expect(await store.getSession("s1")).toEqual({
        id: "s1",
        conversationId: "c1",
        context,
        createdAt: "2026-01-01T00:00:00.000Z",
        updatedAt: "2026-01-01T00:00:00.000Z",
      });
      const next = [...context, { role: "assistant", text: "OK" }];
      await store.updateSessionContext("s1", next, "2026-01-02T00:00:00.000Z");
      expect(await store.getSession("s1")).toMatchObject({
        context: next,
        updatedAt: "2026-01-02T00:00:00.000Z",
      });
      expect(await store.getSession("s2")).toBeUndefined();
    });
  });

  describe("deleteConversation", () => {
    it("removes the conversation with its messages, events, sessions and compactions, and nothing else", async () => {
      for (const id of ["gone", "kept"]) {
        await store.insertConversation(conversation({ id }));
        await store.commitTurn(turn(id, 0, { compaction: { summary: "s" } }));
        await store.createSession({
          id: `s-${id}`,
          conversationId: id,
          context: [],
          createdAt: "x",
          updatedAt: "x",
        });
      }
      expect(await store.deleteConversation("gone")).toBe(true);
      expect(await store.getConversation("gone")).toBeUndefined();
      expect(await store.listMessages("gone")).toEqual([]);
      expect(await store.listEvents("gone")).toEqual([]);
      expect(await store.getLastCompaction("gone")).toBeUndefined();
      expect(await store.getSession("s-gone")).toBeUndefined();
      expect(await store.deleteConversation("gone")).toBe(false);
      expect(await store.listMessages("kept")).toHaveLength(2);
      expect(await store.getSession("s-kept")).toBeDefined();
      expect(await store.getLastCompaction("kept")).toBeDefined();
      // The id is free again.
      await store.insertConversation(conversation({ id: "gone" }));
      expect(await store.listMessages("gone")).toEqual([]);
    });
  });

  describe("durability", () => {
    it("reopening the same file (a restart) finds everything intact", async () => {
      await store.insertConversation(conversation({ id: "c1", shared: true }));
      await store.commitTurn(turn("c1", 0, { compaction: { summary: "s" } }));
      await store.createSession({
        id: "s1",
        conversationId: "c1",
        context: [{ a: 1 }],
        createdAt: "t",
        updatedAt: "t",
      });
      const before = {
        conversation: await store.getConversation("c1"),
        messages: await store.listMessages("c1"),
        events: await store.listEvents("c1"),
        compaction: await store.getLastCompaction("c1"),
        session: await store.getSession("s1"),
      };
      store = await opened.reopen();
      expect({
        conversation: await store.getConversation("c1"),
        messages: await store.listMessages("c1"),
        events: await store.listEvents("c1"),
        compaction: await store.getLastCompaction("c1"),
        session: await store.getSession("s1"),
      }).toEqual(before);
      await store.commitTurn(turn("c1", 1));
      expect((await store.getConversation("c1"))?.turnCount).toBe(2);
    });

    it("keeps a begun turn until its commit or its conversation's delete, and after a reopen", async () => {
      await store.insertConversation(conversation({ id: "p1" }));
      await store.insertConversation(conversation({ id: "p2" }));
      const pending = (id: string, text: string) => ({
        conversationId: id,
        turnIndex: 0,
        text,
        authorMemberId: "alice",
        authorName: "Alice",
        startedAt: "2026-01-01T00:00:00.000Z",
      });
      await store.beginTurn(pending("p1", "first"));
      await store.beginTurn(pending("p1", "replaced"));
      await store.beginTurn(pending("p2", "second"));
      store = await opened.reopen();
      expect(await store.listPendingTurns()).toEqual([pending("p1", "replaced"), pending("p2", "second")]);
      await store.commitTurn(turn("p1", 0));
      await store.deleteConversation("p2");
      expect(await store.listPendingTurns()).toEqual([]);
    });
  });

  describe("session histories", () => {
    it("a session history: a prompt joined to a trailing message, a compaction, and a fork reading it as it stood after any turn", async () => {
      await store.insertConversation(historyConversation("c1"));
      await store.commitTurn(historyTurn("c1", 0, undefined));
      const start = [user("q0"), assistant("a0"), user("tool results")];
      await store.recordSession({
        id: "s1",
        conversationId: "c1",
        context: { messages: start, tokens: 5 },
        createdAt: "t",
        updatedAt: "t",
        turnIndex: 0,
      });
      const joined = [
        user("q0"),
        assistant("a0"),
        {
          role: "user",
          content: [
            { type: "text", text: "tool results" },
            { type: "text", text: "q1" },
          ],
        },
        assistant("a1"),
      ];
      await store.commitTurn(
        historyTurn("c1", 1, { append: { id: "s1", history: { messages: joined, tokens: 6 }, kept: 2 } }),
      );
      expect(await history(store, "s1")).toEqual({ messages: joined, tokens: 6 });

      const compacted = [user("summary\nq2"), assistant("a2")];
      await store.commitTurn(
        historyTurn("c1", 2, { append: { id: "s1", history: { messages: compacted, tokens: 2 }, kept: 0 } }),
      );
      expect(await history(store, "s1")).toEqual({ messages: compacted, tokens: 2 });
      const next = [...compacted, user("q3"), assistant("a3")];
      await store.commitTurn(
        historyTurn("c1", 3, { append: { id: "s1", history: { messages: next, tokens: 4 }, kept: 2 } }),
      );

      // Each fork gets the history its turn resumed: replaced rows are still there to be read.
      const asOf = [[], start, joined, compacted, next];
      for (const [upto, expected] of asOf.entries()) {
        const id = `fork-${upto}`;
        const found = await store.forkSession({
          parentConversationId: "c1",
          uptoTurn: upto,
          session: { id, conversationId: id, createdAt: "t", updatedAt: "t" },
        });
        expect(found).toBe(upto > 0);
        if (upto > 0) expect((await history(store, id)).messages).toEqual(expected);
        else expect(await store.hasSession(id)).toBe(false);
      }
      // The whole current history keeps the parent's measure; a prefix gets its share of it.
      expect((await history(store, "fork-4")).tokens).toBe(4);
      expect((await history(store, "fork-1")).tokens).toBeGreaterThan(0);
      // A fork's session keeps the turns its rows were written by, so a fork of the fork reads the same way.
      await store.insertConversation(historyConversation("fork-4"));
      const childHistory = [...next, user("q4"), assistant("a4")];
      await store.commitTurn(
        historyTurn("fork-4", 4, {
          append: { id: "fork-4", history: { messages: childHistory, tokens: 6 }, kept: 4 },
        }),
      );
      for (const [upto, expected] of [
        [5, childHistory],
        [4, next],
        [2, joined],
      ] as const) {
        const id = `grand-${upto}`;
        await store.forkSession({
          parentConversationId: "fork-4",
          uptoTurn: upto,
          session: { id, conversationId: id, createdAt: "t", updatedAt: "t" },
        });
        expect((await history(store, id)).messages).toEqual(expected);
      }
    });
  });
});
