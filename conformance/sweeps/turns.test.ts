import { encodeSseEvent } from "@agent-api/client/sse";
import { describe, expect, it } from "vitest";
import type { TurnRead } from "../context.ts";
import { checkTurnStream } from "../sse/grammar.ts";
import { judgeTurnsRead } from "./turns.ts";

/** A whole turn's stream as the API writes it: one text block, then the usage. */
function stream(messageId: string, usage: Record<string, number>, stopReason = "end_turn"): string {
  return [
    encodeSseEvent("message_start", {
      type: "message_start",
      message: { id: messageId, model: "demo-large", usage: { input_tokens: 3, output_tokens: 0 } },
    }),
    encodeSseEvent("content_block_start", {
      type: "content_block_start",
      index: 0,
      content_block: { type: "text", text: "" },
    }),
    encodeSseEvent("content_block_delta", {
      type: "content_block_delta",
      index: 0,
      delta: { type: "text_delta", text: "Hello." },
    }),
    encodeSseEvent("content_block_stop", { type: "content_block_stop", index: 0 }),
    encodeSseEvent("message_delta", { type: "message_delta", delta: { stop_reason: stopReason }, usage }),
    encodeSseEvent("message_stop", { type: "message_stop" }),
  ].join("");
}

// The five fields message_delta.usage carries (Events).
const counted = {
  input_tokens: 12,
  output_tokens: 5,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
  total_cost_usd: 0.0001,
};

function read(
  text: string,
  conversationId: string,
  madeBy = "STATE-MEMORY",
  header = conversationId,
): TurnRead {
  return {
    madeBy,
    agent: "demo-agent",
    routed: false,
    conversationId,
    asked: conversationId,
    header,
    streamToolCalls: false,
    reading: checkTurnStream(text, { streamToolCalls: false }),
  };
}

describe("every turn the named checks read is judged (Events)", () => {
  it("passes turns whose fields hold what the API says", () => {
    const turns = [read(stream("msg_1", counted), "c1"), read(stream("msg_2", counted), "c1")];
    expect(judgeTurnsRead(turns)).toEqual([]);
  });

  it("fails the message id check, naming the second turn of the conversation, when a resumed turn reuses an id", () => {
    const turns = [read(stream("msg_1", counted), "c1"), read(stream("msg_1", counted), "c1")];
    const [finding] = judgeTurnsRead(turns);
    expect(finding.check).toBe("MEANING-MESSAGE-START");
    expect(finding.message).toMatch(/turn 2 of conversation c1/);
    expect(finding.evidence).toMatch(/msg_1/);
  });

  it("fails the usage check when a deeper turn with output counts no output or no input", () => {
    const noOutput = [
      read(stream("msg_1", counted), "c1"),
      read(stream("msg_2", { ...counted, output_tokens: 0 }), "c1"),
    ];
    expect(judgeTurnsRead(noOutput).map((f) => f.check)).toEqual(["MEANING-USAGE-COUNTS"]);
    const noInput = [
      read(stream("msg_3", counted), "c2"),
      read(stream("msg_4", { ...counted, input_tokens: 0 }), "c2"),
    ];
    expect(judgeTurnsRead(noInput).map((f) => f.check)).toEqual(["MEANING-USAGE-COUNTS"]);
  });

  it("fails the usage check on a cost in cents", () => {
    const cents = [read(stream("msg_1", { ...counted, total_cost_usd: 4 }), "c1")];
    expect(judgeTurnsRead(cents).map((f) => f.check)).toEqual(["MEANING-USAGE-COUNTS"]);
  });

  it("fails an X-Conversation-Id other than the id sent, unless the id is one a header cannot carry as it is", () => {
    const other = [read(stream("msg_1", counted), "c1", "STATE-MEMORY", "c2")];
    expect(judgeTurnsRead(other).map((f) => f.check)).toEqual(["CONVID-UNKNOWN-VERBATIM"]);
    const unicode = [read(stream("msg_1", counted), "c1 größe", "STATE-MEMORY", "c1 gr%C3%B6%C3%9Fe")];
    expect(judgeTurnsRead(unicode)).toEqual([]);
  });

  it("leaves a stream that ended in an error event to the checks of that rule", () => {
    const broken = stream("msg_1", counted).replace(
      /event: message_stop[\s\S]*$/,
      encodeSseEvent("error", { type: "error", error: { type: "api_error", message: "down" } }),
    );
    const turns = [read(stream("msg_1", counted), "c1"), read(broken, "c2")];
    expect(judgeTurnsRead(turns)).toEqual([]);
  });

  it("fails a message_start that names a listed model by its display name, on any agent", () => {
    const listed = (entries: Array<Record<string, unknown>>) => new Map([["demo-agent", entries]]);
    const turns = [read(stream("msg_m1", counted), "c9")];
    expect(
      judgeTurnsRead(turns, listed([{ type: "model", id: "demo-large", display_name: "Demo Large" }])),
    ).toEqual([]);
    // "demo-large" is that entry's display name here, and no entry's id.
    const byName = listed([{ type: "model", id: "dl-1", display_name: "demo-large" }]);
    expect(judgeTurnsRead(turns, byName).map((f) => f.check)).toEqual(["MEANING-MESSAGE-START"]);
    // A model the list does not hold (a resolved, dated id) says nothing.
    expect(judgeTurnsRead(turns, listed([{ type: "model", id: "other", display_name: "Other" }]))).toEqual(
      [],
    );
  });
});
