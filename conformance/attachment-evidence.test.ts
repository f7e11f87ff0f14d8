/**
 * How the attachment checks read their evidence: file names in a reply normalised so one file mentioned
 * in several ways counts once, and a read tool's tool_result preferred over the reply text.
 */

import { encodeSseEvent } from "@agent-api/client/sse";
import { describe, expect, it } from "vitest";
import { distinctMentions, ensureAttachmentRead, normaliseName, toolCalls } from "./checks/replies.ts";
import type { CheckContext, Turn } from "./context.ts";
import { CheckFailure } from "./outcomes.ts";
import { checkTurnStream, replyText } from "./sse/grammar.ts";

describe("normaliseName / distinctMentions", () => {
  it("strips markdown, quotes, a directory part and trailing punctuation", () => {
    for (const written of [
      "acc-dup.txt",
      "**acc-dup.txt**",
      "`.uploads/acc-dup.txt`",
      "_acc-dup.txt_,",
      '".uploads/acc-dup.txt".',
      "(acc-dup.txt)",
      "[acc-dup.txt](.uploads/acc-dup.txt)",
      "/work/.uploads/acc-dup.txt:",
    ]) {
      expect(normaliseName(written), written).toBe("acc-dup.txt");
    }
    expect(normaliseName("acc-dup (1).txt")).toBe("acc-dup (1).txt");
    expect(normaliseName("(.uploads/acc-dup (1).txt)")).toBe("acc-dup (1).txt");
  });

  const DUP = /[^\s"'`,;]*acc-dup(?: \(\d+\))?[^\s"'`,;]*/;

  it("counts one file mentioned twice once", () => {
    const reply = "I see **acc-dup.txt** in `.uploads/acc-dup.txt`, and acc-dup.txt.";
    expect([...distinctMentions(reply, DUP)]).toEqual(["acc-dup.txt"]);
  });

  it("counts two de-duplicated names as two, a space in the name included", () => {
    expect(distinctMentions("Attached files: .uploads/acc-dup.txt, .uploads/acc-dup (1).txt", DUP).size).toBe(
      2,
    );
    expect(distinctMentions("- `acc-dup.txt`\n- `acc-dup-1.txt`", DUP).size).toBe(2);
  });

  it("a range phrase names only its ends", () => {
    const seen = distinctMentions("Files acc-att-01.txt through acc-att-10.txt", /acc-att-\d\d(?!\d)/);
    expect([...seen]).toEqual(["acc-att-01", "acc-att-10"]);
  });
});

/** A turn built from SSE frames, as ctx.turn reads it. */
function turnOf(blocks: Array<Record<string, unknown>>): Turn {
  const events: Array<[string, Record<string, unknown>]> = [
    ["message_start", { type: "message_start", message: { id: "m", model: "x", usage: {} } }],
  ];
  blocks.forEach((block, index) => {
    const { delta, ...start } = block;
    events.push(["content_block_start", { type: "content_block_start", index, content_block: start }]);
    if (delta) events.push(["content_block_delta", { type: "content_block_delta", index, delta }]);
    events.push(["content_block_stop", { type: "content_block_stop", index }]);
  });
  events.push(["message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: {} }]);
  events.push(["message_stop", { type: "message_stop" }]);
  const text = events.map(([name, data]) => encodeSseEvent(name, data)).join("");
  const reading = checkTurnStream(text, { streamToolCalls: true });
  return {
    status: 200,
    conversationId: "c",
    headers: {},
    reading,
    text: replyText(reading),
    response: undefined as unknown as Turn["response"],
  };
}

const use = (id: string, input: unknown) => ({
  type: "tool_use",
  id,
  name: "read_file",
  input: {},
  delta: { type: "input_json_delta", partial_json: JSON.stringify(input) },
});
const result = (id: string, content: unknown, isError = false) => ({
  type: "tool_result",
  tool_use_id: id,
  content,
  is_error: isError,
});
const text = (t: string) => ({ type: "text", text: "", delta: { type: "text_delta", text: t } });

function fakeContext(): CheckContext & { notes: string[] } {
  const notes: string[] = [];
  return { notes, note: (m: string) => notes.push(m) } as unknown as CheckContext & { notes: string[] };
}

describe("ensureAttachmentRead", () => {
  it("pairs tool_use and tool_result blocks", () => {
    const turn = turnOf([
      use("t1", { path: ".uploads/a.txt" }),
      result("t1", [{ type: "text", text: "n-1" }]),
    ]);
    expect(toolCalls(turn)).toMatchObject([
      { name: "read_file", result: { isError: false, content: "n-1" } },
    ]);
  });

  it("passes on a tool_result of .uploads/<name> holding the content", () => {
    const ctx = fakeContext();
    const turn = turnOf([use("t1", { path: ".uploads/a.txt" }), result("t1", "n-1"), text("It says n-1")]);
    expect(() => ensureAttachmentRead(ctx, turn, "a.txt", "n-1", "read")).not.toThrow();
    expect(ctx.notes).toEqual([]);
  });

  it("fails when the read of .uploads/<name> failed, whatever the reply says", () => {
    const turn = turnOf([
      use("t1", { path: ".uploads/a.txt" }),
      result("t1", "no such file", true),
      text("The file holds n-1"),
    ]);
    expect(() => ensureAttachmentRead(fakeContext(), turn, "a.txt", "n-1", "read")).toThrow(CheckFailure);
  });

  it("fails when the content was read from somewhere other than .uploads", () => {
    const turn = turnOf([use("t1", { command: "cat ../../a.txt" }), result("t1", "n-1"), text("n-1")]);
    expect(() => ensureAttachmentRead(fakeContext(), turn, "a.txt", "n-1", "read")).toThrow(CheckFailure);
  });

  it("falls back to the reply text, with a note, when the stream has no tool blocks", () => {
    const ctx = fakeContext();
    expect(() => ensureAttachmentRead(ctx, turnOf([text("n-1")]), "a.txt", "n-1", "read")).not.toThrow();
    expect(ctx.notes.join()).toContain("reply text alone");
    expect(() =>
      ensureAttachmentRead(fakeContext(), turnOf([text("nothing")]), "a.txt", "n-1", "read"),
    ).toThrow(CheckFailure);
  });
});
