import { describe, expect, it } from "vitest";
import type { ConversationRead, RunState } from "../context.ts";
import { judgeSessionsRead } from "./sessions.ts";

// Only what the sweep reads of a run: which conversations it made, which it sent into again or by other means.
const run = {
  created: new Map([
    ["c1", { agent: "demo-agent", key: "k" }],
    ["sdk", { agent: "demo-agent", key: "k" }],
  ]),
  sentOutside: new Set(["sdk"]),
  resentInto: new Set(),
  inputs: { sessionWaitMs: 3000 },
} as unknown as RunState;

let seq = 0;
const span = () => {
  seq += 2;
  return { started: seq - 1, ended: seq };
};
const turn = (id: string, fields: Partial<Extract<ConversationRead, { kind: "turn-sent" }>> = {}) =>
  ({
    kind: "turn-sent",
    id,
    status: 200,
    completed: true,
    output: true,
    ...span(),
    ...fields,
  }) as ConversationRead;
const wait = (id: string, found = false): ConversationRead => ({
  kind: "session-wait",
  id,
  found,
  ...span(),
});
const checks = (log: ConversationRead[]) => judgeSessionsRead(log, run).map((f) => f.check);

describe("the sessions sweep", () => {
  it("fails a wait that expired after a turn with output, on any conversation the run made", () => {
    expect(checks([turn("c1"), wait("c1")])).toEqual(["STATE-SESSION-RECORDED"]);
    expect(checks([turn("c1"), wait("c1", true)])).toEqual([]);
  });

  it("judges nothing after a turn without output, an isolated or unfinished one, or one fed by other means", () => {
    expect(checks([turn("c1", { output: false }), wait("c1")])).toEqual([]);
    expect(checks([turn("c1", { isolated: true }), wait("c1")])).toEqual([]);
    expect(checks([turn("c1", { completed: false }), wait("c1")])).toEqual([]);
    expect(checks([turn("sdk"), wait("sdk")])).toEqual([]);
    expect(checks([turn("other"), wait("other")])).toEqual([]);
  });

  it("judges nothing when another turn into the conversation overlapped the wait", () => {
    const first = turn("c1");
    const w = wait("c1");
    const overlapping = turn("c1", { started: w.started + 0.5, ended: w.ended + 5, output: false });
    expect(checks([first, w, overlapping])).toEqual([]);
  });
});
