import { describe, expect, it } from "vitest";
import type { ConversationRead, RunState } from "../context.ts";
import { judgeActivityRead } from "./activity.ts";

const run = {
  created: new Map([["c1", { agent: "demo-agent", key: "owner-key" }]]),
} as unknown as RunState;

let seq = 0;
const span = () => {
  seq += 2;
  return { started: seq - 1, ended: seq };
};
const read = (updated: string, turns: number, fields: Record<string, unknown> = {}): ConversationRead => ({
  kind: "read",
  madeBy: "GET-SHAPE",
  request: "GET /conversations/c1",
  key: "owner-key",
  conversation: {
    id: "c1",
    created_at: "2026-12-02T07:00:00.000Z",
    updated_at: `2026-12-02T07:00:${updated}Z`,
    turn_count: turns,
    agent_session_id: "s1",
    ...fields,
  },
  ...span(),
});
const turn = (completed = true): ConversationRead => ({ kind: "turn-sent", id: "c1", completed, ...span() });
const checks = (log: ConversationRead[]) => judgeActivityRead(log, run).map((f) => f.check);

describe("the activity sweep", () => {
  it("takes a turn between two reads as activity: later updated_at, one more turn", () => {
    expect(checks([read("01.120", 1), turn(), read("02.340", 2)])).toEqual([]);
    expect(checks([read("01.120", 1), turn(), read("01.120", 2)])).toEqual(["MEANING-TIMESTAMPS-MOVE"]);
    expect(checks([read("01.120", 1), turn(), turn(), read("03.000", 2)])).toEqual(["GET-TURN-COUNT"]);
  });

  it("fails an updated_at that moves back, and judges no counts across a failed turn", () => {
    expect(checks([read("05.120", 1), read("01.120", 1)])).toEqual(["MEANING-TIMESTAMPS-MOVE"]);
    expect(checks([read("01.120", 1), turn(false), read("01.120", 1)])).toEqual([]);
  });

  it("judges only conversations the run made, up to their first delete", () => {
    const other = { ...run, created: new Map() } as unknown as RunState;
    expect(judgeActivityRead([read("01.120", 1), read("05.500", 1)], other)).toEqual([]);
    const deleted: ConversationRead = { kind: "deleted", id: "c1", ...span() };
    expect(checks([read("01.120", 1), deleted, read("05.500", 4)])).toEqual([]);
  });
});
