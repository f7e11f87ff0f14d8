import { describe, expect, it } from "vitest";
import type { ConversationRead } from "../context.ts";
import { judgeForksRead } from "./forks.ts";

let seq = 0;
const span = () => {
  seq += 2;
  return { started: seq - 1, ended: seq };
};
const read = (id: string, fields: Record<string, unknown>): ConversationRead => ({
  kind: "read",
  madeBy: "FORK-DEFAULT-ALL-TURNS",
  request: `GET /conversations/${id}`,
  conversation: { id, ...fields },
  ...span(),
});
const fork = (atTurn: number | undefined, forkedAt: number): ConversationRead => ({
  kind: "fork",
  madeBy: "STATE-FORK-CHILD",
  request: "POST /conversations/p/fork",
  parent: "p",
  child: "c",
  atTurn,
  forkedAt,
  ...span(),
});
const turn = (id: string): ConversationRead => ({ kind: "turn-sent", id, ...span() });
const checks = (log: ConversationRead[]) => judgeForksRead(log).map((f) => f.check);

describe("the forks sweep", () => {
  it("takes either end of the parent for a fork that copies all turns, and fails one cut at the start", () => {
    expect(checks([read("p", { turn_count: 3 }), fork(undefined, 2)])).toEqual([]);
    expect(checks([read("p", { turn_count: 3 }), fork(undefined, 3)])).toEqual([]);
    expect(checks([read("p", { turn_count: 3 }), fork(undefined, 0)])).toEqual(["FORK-AT-TURN-CUTS"]);
  });

  it("fails an at_turn past the end recorded unclamped, and judges nothing when a turn ran since the read", () => {
    expect(checks([read("p", { turn_count: 2 }), fork(9, 9)])).toEqual(["FORK-AT-TURN-CUTS"]);
    expect(checks([read("p", { turn_count: 2 }), fork(9, 2)])).toEqual([]);
    expect(checks([read("p", { turn_count: 2 }), turn("p"), fork(9, 9)])).toEqual([]);
  });

  it("leaves an at_turn inside the conversation to the named checks (0- or 1-based is not shown)", () => {
    expect(checks([read("p", { turn_count: 4 }), fork(1, 1)])).toEqual([]);
    expect(checks([read("p", { turn_count: 4 }), fork(1, 2)])).toEqual([]);
  });

  it("fails a child whose forked_at_turn_index is not the fork result's, and a parent whose count the fork moved", () => {
    expect(checks([fork(undefined, 2), read("c", { forked_at_turn_index: 0 })])).toEqual([
      "CONSIST-FORK-READBACK",
    ]);
    const before = read("p", { turn_count: 3 });
    expect(checks([before, fork(undefined, 3), read("p", { turn_count: 0 })])).toEqual(["STATE-FORK-CHILD"]);
    expect(checks([before, fork(undefined, 3), turn("p"), read("p", { turn_count: 4 })])).toEqual([]);
  });
});
