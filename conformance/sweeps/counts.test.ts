import { describe, expect, it } from "vitest";
import type { ConversationRead, RunState } from "../context.ts";
import { judgeCountsRead } from "./counts.ts";

// Only what the sweep reads of a run: who made which conversation, and which a client of a check's own fed.
const run = {
  created: new Map([
    ["c1", { agent: "demo-agent", key: "k" }],
    ["sdk", { agent: "demo-agent", key: "k" }],
  ]),
  sentOutside: new Set(["sdk"]),
} as unknown as RunState;

let seq = 0;
const span = () => {
  seq += 2;
  return { started: seq - 1, ended: seq };
};
const sent = (id: string, status = 200): ConversationRead => ({
  kind: "turn-sent",
  id,
  status,
  completed: true,
  ...span(),
});
const read = (id: string, turns: number): ConversationRead => ({
  kind: "read",
  madeBy: "GET-TURN-COUNT",
  request: `GET /conversations/${id}`,
  conversation: { id, turn_count: turns },
  ...span(),
});
const user = { role: "user", content: [{ type: "text", text: "hi" }] };
const transcript = (id: string, users: number): ConversationRead => ({
  kind: "transcript",
  madeBy: "TRANSCRIPT-SHAPE",
  request: `GET /conversations/${id}/messages`,
  id,
  messages: Array.from({ length: users }, () => user),
  ...span(),
});
const checks = (log: ConversationRead[]) => judgeCountsRead(log, run).map((f) => f.check);

describe("the counts sweep", () => {
  it("bounds turn_count and the transcript's user messages by the turns sent", () => {
    expect(checks([sent("c1"), read("c1", 1), transcript("c1", 1), sent("c1"), read("c1", 1)])).toEqual([]);
    expect(checks([sent("c1"), read("c1", 2)])).toEqual(["GET-TURN-COUNT"]);
    expect(checks([sent("c1"), transcript("c1", 2)])).toEqual(["MEANING-TRANSCRIPT-ORDER"]);
  });

  it("leaves out refused sends, and judges no conversation fed by a client of the check's own", () => {
    expect(checks([sent("c1"), sent("c1", 403), read("c1", 2)])).toEqual(["GET-TURN-COUNT"]);
    expect(checks([sent("c1"), sent("c1", 503), read("c1", 2)])).toEqual([]);
    expect(checks([sent("sdk"), read("sdk", 5)])).toEqual([]);
  });
});
