import { describe, expect, it } from "vitest";
import type { ConversationRead, RunState } from "../context.ts";
import { judgeListsRead } from "./lists.ts";

// Only what the sweep reads of a run: its keys, who made which conversation, the turns it read.
const run = {
  inputs: { key: "owner-key", memberKey: "member-key", viewerKey: "viewer-key" },
  created: new Map([
    ["mine", { agent: "demo-agent", key: "owner-key" }],
    ["notes", { agent: "notes-agent", key: "owner-key" }],
  ]),
  turnsRead: [],
} as unknown as RunState;

const BASE = "http://127.0.0.1:1/api/agents/demo-agent/conversations";

function conv(id: string, updated: string, fields: Record<string, unknown> = {}) {
  return {
    id,
    channel: "INTERACTIVE",
    created_at: "2026-12-02T07:00:00.000Z",
    updated_at: updated,
    ...fields,
  };
}

function page(
  query: string,
  conversations: Array<Record<string, unknown>>,
  key = "owner-key",
): ConversationRead {
  return {
    kind: "list",
    madeBy: "LIST-SHAPE-ORDER",
    url: `${BASE}${query}`,
    key,
    conversations,
    started: 1,
    ended: 2,
  };
}

const newer = conv("other-1", "2026-12-02T07:00:09.000Z");
const older = conv("other-2", "2026-12-02T07:00:05.000Z");

const checksOf = (log: ConversationRead[]) => judgeListsRead(log, run).map((f) => f.check);

describe("every list page the named checks read is judged (Endpoints/List conversations)", () => {
  it("passes a page within its limit, newest first, holding what its filters ask", () => {
    expect(checksOf([page("?limit=2&channel=INTERACTIVE", [newer, older])])).toEqual([]);
    expect(checksOf([page("?since=2026-12-02T07:00:04.000Z", [newer, older])])).toEqual([]);
  });

  it("fails a page over its limit, or over 50 without one", () => {
    expect(checksOf([page("?limit=1", [newer, older])])).toEqual(["LIMIT-LIST-RANGE"]);
    const many = Array.from({ length: 51 }, (_, i) => conv(`c${i}`, "2026-12-02T07:00:00.000Z"));
    expect(checksOf([page("", many)])).toEqual(["LIMIT-LIST-RANGE"]);
  });

  it("fails a page out of order, another channel under a channel filter, an older one under since", () => {
    expect(checksOf([page("", [older, newer])])).toEqual(["LIST-SHAPE-ORDER"]);
    expect(checksOf([page("?channel=SLACK", [newer])])).toEqual(["LIST-CHANNEL-FILTER"]);
    expect(checksOf([page("?since=2026-12-02T07:00:06.000Z", [newer, older])])).toEqual([
      "LIST-SINCE-FILTER",
    ]);
  });

  it("fails the run's conversation in another agent's list, in another user's list, or under a channel_id filter", () => {
    const notes = conv("notes", "2026-12-02T07:00:01.000Z");
    expect(checksOf([page("", [notes])])).toEqual(["LIST-VISIBILITY"]);
    const mine = conv("mine", "2026-12-02T07:00:01.000Z");
    expect(checksOf([page("", [mine], "member-key")])).toEqual(["LIST-VISIBILITY"]);
    expect(checksOf([page("?channel_id=C123", [mine])])).toEqual(["LIST-CHANNEL-ID-FILTER"]);
  });

  it("lets a conversation the last accepted toggle shared be in another user's list, not one it unshared", () => {
    const mine = conv("mine", "2026-12-02T07:00:01.000Z");
    const toggle = (shared: boolean, at: number): ConversationRead => ({
      kind: "share-sent",
      id: "mine",
      shared,
      status: 200,
      started: at - 0.5,
      ended: at - 0.25,
    });
    expect(checksOf([toggle(true, 0), page("", [mine], "member-key")])).toEqual([]);
    expect(checksOf([toggle(true, 0), toggle(false, 0.5), page("", [mine], "member-key")])).toEqual([
      "LIST-VISIBILITY",
    ]);
  });

  it("fails a page that leaves out the run's conversation newer than its oldest, or any when it has room", () => {
    const readMine = (updated: string): ConversationRead => ({
      kind: "read",
      madeBy: "GET-SHAPE",
      request: "GET /conversations/mine",
      key: "owner-key",
      conversation: conv("mine", updated),
      started: 0.25,
      ended: 0.5,
    });
    const fresh = readMine("2026-12-02T07:00:07.000Z");
    expect(checksOf([fresh, page("?limit=2", [newer, older])])).toEqual(["LIST-VISIBILITY"]);
    expect(checksOf([fresh, page("?limit=3", [newer])])).toEqual(["LIST-VISIBILITY"]);
    expect(
      checksOf([fresh, page("?limit=2", [newer, fresh.kind === "read" ? fresh.conversation : {}])]),
    ).toEqual([]);
    // Pushed below a full page by others; another key's page; another channel; before since: nothing owed.
    expect(checksOf([readMine("2026-12-02T07:00:01.000Z"), page("?limit=2", [newer, older])])).toEqual([]);
    expect(checksOf([fresh, page("?limit=3", [newer], "member-key")])).toEqual([]);
    expect(checksOf([fresh, page("?limit=3&channel=SLACK", [])])).toEqual([]);
    expect(checksOf([fresh, page("?limit=3&since=2026-12-02T07:00:08.000Z", [newer])])).toEqual([]);
  });
});
