import { describe, expect, it } from "vitest";
import type { ConversationRead } from "../context.ts";
import { judgeTitlesRead } from "./titles.ts";

let seq = 0;
const span = () => {
  seq += 2;
  return { started: seq - 1, ended: seq };
};
const sent = (id: string, prompt: string, status = 200, bodyNonces?: string[]): ConversationRead => ({
  kind: "turn-sent",
  id,
  prompt,
  ...(bodyNonces && { bodyNonces }),
  status,
  completed: status === 200,
  ...span(),
});
const read = (id: string, title: string): ConversationRead => ({
  kind: "read",
  madeBy: "GET-TITLE-STABLE",
  request: `GET /conversations/${id}`,
  conversation: { id, title },
  ...span(),
});
const deleted = (id: string): ConversationRead => ({ kind: "deleted", id, ...span() });
const fork = (parent: string, child: string): ConversationRead => ({
  kind: "fork",
  madeBy: "FORK-AT-TURN-CUTS",
  request: `POST /conversations/${parent}/fork`,
  parent,
  child,
  forkedAt: 1,
  ...span(),
});
const checks = (log: ConversationRead[]) => judgeTitlesRead(log).map((f) => f.check);

const A = "n-0000000a";
const B = "n-0000000b";
const C = "n-0000000c";

describe("the titles sweep", () => {
  it("takes a title from the first prompt, and from no later turn's", () => {
    expect(
      checks([sent("c1", `Remember ${A}`), sent("c1", `Then ${B}`), read("c1", `Remember ${A}`)]),
    ).toEqual([]);
    expect(checks([sent("c1", `Remember ${A}`), sent("c1", `Then ${B}`), read("c1", `Then ${B}`)])).toEqual([
      "GET-TITLE-FROM-PROMPT",
    ]);
  });

  it("takes the title of an id sent again after a delete from the new first prompt", () => {
    const before = [sent("c2", `Hello ${A}`), read("c2", `Hello ${A}`), deleted("c2")];
    expect(checks([...before, sent("c2", `Again ${B}`), read("c2", `Again ${B}`)])).toEqual([]);
    expect(checks([...before, sent("c2", `Again ${B}`), read("c2", `Hello ${A}`)])).toEqual([
      "GET-TITLE-FROM-PROMPT",
    ]);
  });

  it("lets a fork's child hold what was sent before the fork, and nothing sent after it", () => {
    const before = [sent("p", `Parent ${A}`), fork("p", "k")];
    expect(checks([...before, sent("k", `Child ${B}`), read("k", `Parent ${A}`)])).toEqual([]);
    expect(checks([...before, sent("k", `Child ${B}`), read("k", `Child ${B}`)])).toEqual([
      "GET-TITLE-FROM-PROMPT",
    ]);
  });

  it("fails a title taken from what the first send carried outside its prompt", () => {
    const withFile = sent("c5", `Colours ${A}`, 200, [A, B]);
    expect(checks([withFile, read("c5", `Colours ${A}`)])).toEqual([]);
    expect(checks([withFile, read("c5", `acc-colours-${B}.txt`)])).toEqual(["GET-TITLE-FROM-PROMPT"]);
  });

  it("judges nothing it cannot place: a conversation already there, a nonce no prompt sent", () => {
    // Read before the run's first send into it: the run did not make it.
    expect(checks([read("c3", "Old"), sent("c3", `Later ${A}`), read("c3", `Later ${A}`)])).toEqual([]);
    // Refused sends make nothing; a nonce of no prompt says nothing.
    expect(checks([sent("c4", `No ${A}`, 404), sent("c4", `Yes ${B}`), read("c4", `Yes ${C}`)])).toEqual([]);
  });
});
