import { describe, expect, it } from "vitest";
import type { ConversationRead } from "../context.ts";
import { judgeDeletesRead } from "./deletes.ts";

let seq = 0;
const span = () => {
  seq += 2;
  return { started: seq - 1, ended: seq };
};
const read = (created: string, updated: string, turns: number): ConversationRead => ({
  kind: "read",
  madeBy: "CONSIST-DELETED-EVERYWHERE",
  request: "GET /conversations/c1",
  conversation: {
    id: "c1",
    created_at: `2026-12-02T07:00:${created}Z`,
    updated_at: `2026-12-02T07:00:${updated}Z`,
    turn_count: turns,
  },
  ...span(),
});
const deleted = (): ConversationRead => ({ kind: "deleted", id: "c1", ...span() });
const turn = (): ConversationRead => ({ kind: "turn-sent", id: "c1", completed: true, ...span() });
const checks = (log: ConversationRead[]) => judgeDeletesRead(log).map((f) => f.check);

describe("the deletes sweep", () => {
  it("takes what is read under a deleted id as new: made after the delete, counting its own turns", () => {
    const old = read("01.000", "04.000", 3);
    expect(checks([old, deleted(), turn(), read("05.000", "05.500", 1)])).toEqual([]);
    expect(checks([old, deleted(), turn(), read("01.000", "05.500", 1)])).toEqual([
      "CONSIST-DELETED-EVERYWHERE",
    ]);
    expect(checks([old, deleted(), turn(), read("05.000", "05.500", 4)])).toEqual([
      "CONSIST-DELETED-EVERYWHERE",
    ]);
  });

  it("judges nothing for an id never read before its delete", () => {
    expect(checks([deleted(), turn(), read("01.000", "01.000", 9)])).toEqual([]);
  });
});
