import { describe, expect, it } from "vitest";
import type { ConversationRead, RunState } from "../context.ts";
import { judgeConversationsRead } from "./conversations.ts";

// Only what the sweep reads of a run: its keys and who made which conversation.
const run = {
  inputs: { key: "owner-key", memberKey: "member-key", viewerKey: "viewer-key" },
  created: new Map([["c1", { agent: "demo-agent", key: "owner-key" }]]),
} as unknown as RunState;

const conversation = (fields: Record<string, unknown> = {}) => ({
  id: "c1",
  title: "Say hello",
  is_owner: true,
  shared: false,
  parent_conversation_id: null,
  forked_at_turn_index: null,
  created_at: "2026-12-02T07:00:00.000Z",
  updated_at: "2026-12-02T07:00:01.000Z",
  ...fields,
});

let seq = 0;
function read(key: string, fields: Record<string, unknown> = {}, request = "GET /c1"): ConversationRead {
  seq += 2;
  return {
    kind: "read",
    madeBy: "LIST-SHARED-VISIBLE",
    request,
    key,
    conversation: conversation(fields),
    started: seq - 1,
    ended: seq,
  };
}

describe("every conversation object the named checks read is judged (Resources/Conversation)", () => {
  it("passes objects that hold what the API says under each key", () => {
    const log = [
      read("owner-key"),
      read("member-key", { is_owner: false }),
      read("viewer-key", { is_owner: false }),
    ];
    expect(judgeConversationsRead(log, run)).toEqual([]);
  });

  it("fails is_owner true for a member's read of the owner's conversation, naming the route and key", () => {
    const [finding] = judgeConversationsRead([read("owner-key"), read("member-key", {}, "GET /list")], run);
    expect(finding.check).toBe("STATE-CREATED-PRIVATE");
    expect(finding.message).toMatch(/GET \/list with the member's key/);
  });

  it("fails a title that changes between reads, or a created_at that moves back", () => {
    const title = judgeConversationsRead([read("owner-key"), read("owner-key", { title: "Another" })], run);
    expect(title.map((f) => f.check)).toEqual(["GET-TITLE-STABLE"]);
    const created = judgeConversationsRead(
      [read("owner-key"), read("owner-key", { created_at: "2026-12-02T06:59:59.500Z" })],
      run,
    );
    expect(created.map((f) => f.check)).toEqual(["MEANING-TIMESTAMPS-MOVE"]);
  });

  it("fails updated_at before created_at", () => {
    const found = judgeConversationsRead(
      [read("owner-key", { updated_at: "2026-12-02T06:59:59.000Z" })],
      run,
    );
    expect(found.map((f) => f.check)).toEqual(["MEANING-TIMESTAMPS-MOVE"]);
  });

  it("takes reads after the id's delete began as another conversation's", () => {
    const before = read("owner-key");
    seq += 2;
    const deleted: ConversationRead = { kind: "deleted", id: "c1", started: seq - 1, ended: seq };
    const after = read("member-key", { title: "A new one", is_owner: true });
    expect(judgeConversationsRead([before, deleted, after], run)).toEqual([]);
  });

  it("takes a later creation as another conversation under the id, whose owner is unknown", () => {
    const earlier = read("owner-key");
    const remade = read("member-key", {
      title: "A new one",
      created_at: "2026-12-02T07:05:00.000Z",
      updated_at: "2026-12-02T07:05:01.000Z",
      is_owner: true,
    });
    expect(judgeConversationsRead([earlier, remade], run)).toEqual([]);
  });

  const toggle = (shared: boolean | undefined, status = 200): ConversationRead => {
    seq += 2;
    return { kind: "share-sent", id: "c1", shared, status, started: seq - 1, ended: seq };
  };

  it("fails a conversation of the run read shared although no toggle was sent, and lets a toggled one be", () => {
    const shared = judgeConversationsRead([read("member-key", { is_owner: false, shared: true })], run);
    expect(shared.map((f) => f.check)).toEqual(["STATE-SHARE-TRUE"]);
    expect(
      judgeConversationsRead([toggle(true), read("member-key", { is_owner: false, shared: true })], run),
    ).toEqual([]);
  });

  it("holds `shared` to the last toggle accepted: a reshare after an unshare, an unshare no later read shows", () => {
    const reshared = [toggle(true), toggle(false), toggle(true)];
    expect(judgeConversationsRead([...reshared, read("owner-key", { shared: false })], run)).toHaveLength(1);
    expect(judgeConversationsRead([...reshared, read("owner-key", { shared: true })], run)).toEqual([]);
    const unshared = [toggle(true), read("owner-key", { shared: true }), toggle(false)];
    expect(
      judgeConversationsRead([...unshared, read("owner-key", { shared: true })], run).map((f) => f.check),
    ).toEqual(["STATE-SHARE-TRUE"]);
  });

  it("takes a body naming no boolean as setting nothing, however it was answered", () => {
    seq += 2;
    const empty: ConversationRead = {
      kind: "share-sent",
      id: "c1",
      namesValue: false,
      status: 200,
      started: seq - 1,
      ended: seq,
    };
    expect(judgeConversationsRead([toggle(true), empty, read("owner-key", { shared: true })], run)).toEqual(
      [],
    );
    expect(
      judgeConversationsRead([toggle(true), empty, read("owner-key", { shared: false })], run).map(
        (f) => f.check,
      ),
    ).toEqual(["STATE-SHARE-TRUE"]);
  });

  it("takes a refused toggle as changing nothing, and names the owner-only rule when it took", () => {
    const refused = [toggle(true), toggle(false, 403)];
    expect(judgeConversationsRead([...refused, read("owner-key", { shared: true })], run)).toEqual([]);
    expect(
      judgeConversationsRead([...refused, read("owner-key", { shared: false })], run).map((f) => f.check),
    ).toEqual(["AUTH-OWNER-ONLY-SHARE"]);
  });

  it("judges nothing while a toggle is in flight, nor after one whose answer does not say whether it took", () => {
    seq += 2;
    const during: ConversationRead = {
      kind: "share-sent",
      id: "c1",
      shared: true,
      status: 200,
      started: seq - 1,
      ended: seq + 3,
    };
    expect(judgeConversationsRead([during, read("owner-key", { shared: false })], run)).toEqual([]);
    expect(judgeConversationsRead([toggle(true, 502), read("owner-key", { shared: false })], run)).toEqual(
      [],
    );
    expect(
      judgeConversationsRead([toggle(undefined, 200), read("owner-key", { shared: true })], run),
    ).toEqual([]);
  });

  it("fails a parent on a conversation a send made, and leaves a fork's child to the fork checks", () => {
    const parent = { parent_conversation_id: "c0", forked_at_turn_index: 0 };
    expect(judgeConversationsRead([read("owner-key", parent)], run).map((f) => f.check)).toEqual([
      "STATE-FORK-CHILD",
    ]);
    seq += 2;
    const child: ConversationRead = { kind: "fork-child", id: "c1", started: seq - 1, ended: seq };
    expect(judgeConversationsRead([child, read("owner-key", parent)], run)).toEqual([]);
  });

  it("judges no ownership when two roles were given the same key", () => {
    const same = { ...run, inputs: { ...run.inputs, memberKey: "owner-key" } } as unknown as RunState;
    expect(judgeConversationsRead([read("owner-key", { is_owner: true })], same)).toEqual([]);
  });

  it("fails a conversation visible although neither the caller's nor shared that says INTERACTIVE, and a channel that moves", () => {
    const channelOwned = (fields: Record<string, unknown>) => {
      const r = read("member-key", { id: "slack-1", is_owner: false, shared: false, ...fields });
      return r;
    };
    expect(judgeConversationsRead([channelOwned({ channel: "SLACK" })], run)).toEqual([]);
    expect(
      judgeConversationsRead([channelOwned({ channel: "INTERACTIVE" })], run).map((f) => f.check),
    ).toEqual(["LIST-CHANNEL-OWNED-VISIBLE"]);
    expect(
      judgeConversationsRead(
        [read("owner-key", { channel: "INTERACTIVE" }), read("owner-key", { channel: "NOTEBOOK" })],
        run,
      ).map((f) => f.check),
    ).toEqual(["LIST-CHANNEL-OWNED-VISIBLE"]);
  });

  it("fails two users owning one conversation, and a user owning one another user sees as a channel's", () => {
    const seeded = (key: string, fields: Record<string, unknown>) =>
      read(key, { id: "slack-2", channel: "SLACK", shared: false, ...fields });
    expect(
      judgeConversationsRead(
        [seeded("owner-key", { is_owner: false }), seeded("member-key", { is_owner: false })],
        run,
      ),
    ).toEqual([]);
    expect(
      judgeConversationsRead(
        [seeded("member-key", { is_owner: false }), seeded("owner-key", { is_owner: true })],
        run,
      ).map((f) => f.check),
    ).toEqual(["STATE-CREATED-PRIVATE"]);
    expect(
      judgeConversationsRead(
        [seeded("owner-key", { is_owner: true }), seeded("member-key", { is_owner: false })],
        run,
      ).map((f) => f.check),
    ).toEqual(["STATE-CREATED-PRIVATE"]);
    // A Viewer key may be the owner's own: its is_owner is not judged.
    expect(
      judgeConversationsRead(
        [seeded("viewer-key", { is_owner: true }), seeded("owner-key", { is_owner: true })],
        run,
      ),
    ).toEqual([]);
  });
});
