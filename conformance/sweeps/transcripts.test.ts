import { describe, expect, it } from "vitest";
import type { ConversationRead, RunState } from "../context.ts";
import { judgeCompactionsRead, judgeTranscriptsRead } from "./transcripts.ts";

// Only what the sweep reads of a run: its keys and who made which conversation.
const run = {
  inputs: { key: "owner-key", memberKey: "member-key", viewerKey: "viewer-key" },
  created: new Map([
    ["a", { agent: "demo-agent", key: "owner-key" }],
    ["b", { agent: "demo-agent", key: "owner-key" }],
    ["m", { agent: "demo-agent", key: "member-key" }],
  ]),
} as unknown as RunState;

const user = (author: string | undefined, text = "hi") => ({
  role: "user",
  content: [{ type: "text", text }],
  ...(author !== undefined && { author_user_id: author, author_name: `name of ${author}` }),
});
const assistant = { role: "assistant", content: [{ type: "text", text: "hello" }] };

let seq = 0;
function transcript(id: string, messages: Array<Record<string, unknown>>): ConversationRead {
  seq += 2;
  return {
    kind: "transcript",
    madeBy: "TRANSCRIPT-SHAPE",
    request: `GET /${id}/messages`,
    id,
    messages,
    started: seq - 1,
    ended: seq,
  };
}

const checksOf = (log: ConversationRead[]) => judgeTranscriptsRead(log, run).map((f) => f.check);

describe("every transcript the named checks read is judged (Resources/Transcript)", () => {
  it("passes transcripts whose user messages carry their sender's author id", () => {
    const log = [
      transcript("a", [user("u1"), assistant, user("u1"), assistant]),
      transcript("b", [user("u1"), assistant]),
      transcript("m", [user("u2"), assistant]),
      transcript("channel-owned", [user("slack-u9"), assistant]),
    ];
    expect(checksOf(log)).toEqual([]);
  });

  it("fails a user message without an author, at any depth, but not a compaction summary", () => {
    expect(checksOf([transcript("a", [user("u1"), assistant, user(undefined), assistant])])).toEqual([
      "MEANING-TRANSCRIPT-AUTHOR",
    ]);
    const summary = { ...user(undefined, "summary"), is_compact_summary: true };
    expect(checksOf([transcript("a", [summary, user("u1"), assistant])])).toEqual([]);
  });

  it("fails one user's turns under two author ids, or two users under one", () => {
    expect(
      checksOf([transcript("a", [user("u1"), assistant]), transcript("b", [user("u3"), assistant])]),
    ).toEqual(["MEANING-TRANSCRIPT-AUTHOR"]);
    expect(
      checksOf([transcript("a", [user("u1"), assistant]), transcript("m", [user("u1"), assistant])]),
    ).toEqual(["MEANING-TRANSCRIPT-AUTHOR"]);
  });

  it("judges no sender for a fork's child, whose copied turns may be another user's", () => {
    const child: ConversationRead = { kind: "fork-child", id: "m", started: 0, ended: 0 };
    expect(
      checksOf([child, transcript("a", [user("u1"), assistant]), transcript("m", [user("u1"), assistant])]),
    ).toEqual([]);
  });

  it("judges a fork child's turns sent since the fork as its owner's", () => {
    const child: ConversationRead = { kind: "fork-child", id: "m", started: 0, ended: 0 };
    const own: ConversationRead = {
      kind: "turn-sent",
      id: "m",
      completed: true,
      status: 200,
      started: 1,
      ended: 2,
    };
    const owner = transcript("a", [user("u1"), assistant]);
    const copiedThenOwn = (author: string) =>
      transcript("m", [user("u1"), assistant, user(author), assistant]);
    expect(checksOf([child, own, owner, copiedThenOwn("u2")])).toEqual([]);
    expect(checksOf([child, own, owner, copiedThenOwn("u1")])).toEqual(["MEANING-TRANSCRIPT-AUTHOR"]);
    // A turn still in flight when the transcript was read: how many are the owner's is not known.
    const inFlight: ConversationRead = { ...own, ended: Number.POSITIVE_INFINITY };
    expect(checksOf([child, inFlight, owner, copiedThenOwn("u1")])).toEqual([]);
  });
});

describe("every last compaction the run read agrees with the transcript", () => {
  const compaction = (compacted: boolean): ConversationRead => {
    seq += 2;
    return {
      kind: "compaction",
      madeBy: "STATE-FORK-CHILD",
      request: "GET /k/last-compaction",
      id: "k",
      compacted,
      started: seq - 1,
      ended: seq,
    };
  };
  const summary = { ...user(undefined, "Summary"), is_compact_summary: true };
  it("fails compacted true where the transcript holds no summary, with no turn between", () => {
    expect(
      judgeCompactionsRead([compaction(true), transcript("k", [user("u1"), assistant])]).map((f) => f.check),
    ).toEqual(["COMPACTION-NOT-EMPTY-TURN"]);
    expect(
      judgeCompactionsRead([compaction(true), transcript("k", [summary, user("u1"), assistant])]),
    ).toEqual([]);
    expect(judgeCompactionsRead([compaction(false), transcript("k", [user("u1"), assistant])])).toEqual([]);
    const between: ConversationRead = {
      kind: "turn-sent",
      id: "k",
      completed: true,
      status: 200,
      started: 1e6,
      ended: 1e6 + 1,
    };
    const late = { ...transcript("k", [user("u1"), assistant]), started: 1e6 + 2, ended: 1e6 + 3 };
    expect(judgeCompactionsRead([compaction(true), between, late])).toEqual([]);
  });
});
