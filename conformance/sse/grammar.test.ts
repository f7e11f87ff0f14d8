import { encodeSseEvent, encodeSseFrame, splitSseFrames as splitFrames } from "@agent-api/client/sse";
import { describe, expect, it } from "vitest";
import { checkTurnStream, type GrammarCode, replyText, wholeBlock } from "./grammar.ts";

/** One SSE frame as the API writes it. */
function frame(event: string, data: unknown): string {
  return typeof data === "string" ? encodeSseFrame(event, data) : encodeSseEvent(event, data);
}

const usage = {
  input_tokens: 3,
  output_tokens: 5,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
  total_cost_usd: 0.001,
};

const start = frame("message_start", {
  type: "message_start",
  message: { id: "msg_1", model: "demo-large", usage: { input_tokens: 3, output_tokens: 0 } },
});
const textBlock = (index: number, text: string) =>
  frame("content_block_start", {
    type: "content_block_start",
    index,
    content_block: { type: "text", text: "" },
  }) +
  frame("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text } }) +
  frame("content_block_stop", { type: "content_block_stop", index });
const thinkingBlock = (index: number) =>
  frame("content_block_start", {
    type: "content_block_start",
    index,
    content_block: { type: "thinking", thinking: "" },
  }) +
  frame("content_block_delta", {
    type: "content_block_delta",
    index,
    delta: { type: "thinking_delta", thinking: "hmm" },
  }) +
  frame("content_block_delta", {
    type: "content_block_delta",
    index,
    delta: { type: "signature_delta", signature: "sig" },
  }) +
  frame("content_block_stop", { type: "content_block_stop", index });
const toolUse = (index: number) =>
  frame("content_block_start", {
    type: "content_block_start",
    index,
    content_block: { type: "tool_use", id: "tu_1", name: "write_file", input: {} },
  }) +
  frame("content_block_delta", {
    type: "content_block_delta",
    index,
    delta: { type: "input_json_delta", partial_json: '{"path":"a.txt","content":"x"}' },
  }) +
  frame("content_block_stop", { type: "content_block_stop", index });
const toolResult = (index: number) =>
  frame("content_block_start", {
    type: "content_block_start",
    index,
    content_block: { type: "tool_result", tool_use_id: "tu_1", content: "ok", is_error: false },
  }) + frame("content_block_stop", { type: "content_block_stop", index });
const messageDelta = frame("message_delta", {
  type: "message_delta",
  delta: { stop_reason: "end_turn" },
  usage,
});
const stop = frame("message_stop", { type: "message_stop" });

const GOOD_TOOL_TURN =
  start +
  thinkingBlock(0) +
  toolUse(1) +
  toolResult(2) +
  textBlock(3, "Created a.txt.") +
  messageDelta +
  stop;

function codes(stream: string, streamToolCalls = true): GrammarCode[] {
  return checkTurnStream(stream, { streamToolCalls })
    .violations.filter((v) => v.severity === "error")
    .map((v) => v.code);
}

describe("SSE turn grammar", () => {
  it("accepts a well-formed turn with thinking, tool blocks and text", () => {
    const reading = checkTurnStream(GOOD_TOOL_TURN, { streamToolCalls: true });
    expect(reading.violations).toEqual([]);
    expect(reading.end).toBe("message_stop");
    expect(reading.blocks.map((b) => b.type)).toEqual(["thinking", "tool_use", "tool_result", "text"]);
    expect(replyText(reading)).toBe("Created a.txt.");
    expect(reading.model).toBe("demo-large");
  });

  it("assembles each block whole, as a client does: deltas applied to the start", () => {
    const reading = checkTurnStream(GOOD_TOOL_TURN, { streamToolCalls: true });
    expect(reading.blocks.map(wholeBlock)).toEqual([
      { type: "thinking", thinking: "hmm", signature: "sig" },
      { type: "tool_use", id: "tu_1", name: "write_file", input: { path: "a.txt", content: "x" } },
      { type: "tool_result", tool_use_id: "tu_1", content: "ok", is_error: false },
      { type: "text", text: "Created a.txt." },
    ]);
  });

  it("accepts an empty turn, CRLF line endings, and an error event ending a 200 stream", () => {
    expect(codes(start + messageDelta + stop)).toEqual([]);
    expect(codes((start + textBlock(0, "hi") + messageDelta + stop).replaceAll("\n", "\r\n"))).toEqual([]);
    const errorEnd =
      start + textBlock(0, "hi") + frame("error", { error: { type: "api_error", message: "boom" } });
    const reading = checkTurnStream(errorEnd, { streamToolCalls: false });
    expect(reading.violations).toEqual([]);
    expect(reading.end).toBe("error");
    expect(reading.errorMessage).toBe("boom");
  });

  it("accepts a tool_result block carrying one delta", () => {
    const withDelta =
      frame("content_block_start", {
        type: "content_block_start",
        index: 0,
        content_block: { type: "tool_result", tool_use_id: "t", content: "", is_error: false },
      }) +
      frame("content_block_delta", {
        type: "content_block_delta",
        index: 0,
        delta: { type: "text_delta", text: "x" },
      }) +
      frame("content_block_stop", { type: "content_block_stop", index: 0 });
    expect(codes(start + withDelta + messageDelta + stop)).toEqual([]);
  });

  const broken: Array<[GrammarCode, string, boolean?]> = [
    ["SSE-FIRST-MESSAGE-START", textBlock(0, "hi") + messageDelta + stop],
    ["SSE-FIRST-MESSAGE-START", ""],
    ["SSE-MESSAGE-START-ONCE", start + start + messageDelta + stop],
    [
      "SSE-FRAME-LINES",
      `${start}data: ${JSON.stringify({ type: "message_delta" })}\n\n${messageDelta}${stop}`,
    ],
    ["SSE-FRAME-LINES", `${start}event: ping\n\n${messageDelta}${stop}`],
    [
      "SSE-FRAME-LINES",
      `${start}${messageDelta.replace(/^event: (.*)\ndata: (.*)\n/, "data: $2\nevent: $1\n")}${stop}`,
    ],
    ["SSE-FRAME-UNTERMINATED", start + messageDelta + stop.trimEnd()],
    ["SSE-DATA-JSON", start + frame("message_delta", "{not json") + messageDelta + stop],
    ["SSE-TYPE-MATCHES-EVENT", start + frame("message_stop", { type: "message_end" })],
    [
      "SSE-UNKNOWN-EVENT",
      start + frame("message_progress", { type: "message_progress" }) + messageDelta + stop,
    ],
    ["SSE-DONE-SENTINEL", `${start + messageDelta + stop}data: [DONE]\n\n`],
    ["SSE-AFTER-STOP", start + messageDelta + stop + textBlock(0, "late")],
    ["SSE-STOP-LAST", start + textBlock(0, "hi") + messageDelta],
    [
      "SSE-BLOCK-TRIPLE",
      start +
        textBlock(0, "a").replace(frame("content_block_stop", { type: "content_block_stop", index: 0 }), "") +
        messageDelta +
        stop,
    ],
    [
      "SSE-BLOCK-TRIPLE",
      start +
        textBlock(0, "a").replace(
          frame("content_block_stop", { type: "content_block_stop", index: 0 }),
          frame("content_block_delta", {
            type: "content_block_delta",
            index: 0,
            delta: { type: "text_delta", text: "b" },
          }) + frame("content_block_stop", { type: "content_block_stop", index: 0 }),
        ) +
        messageDelta +
        stop,
    ],
    [
      "SSE-BLOCK-TRIPLE",
      start + frame("content_block_stop", { type: "content_block_stop", index: 0 }) + messageDelta + stop,
    ],
    ["SSE-INDEX-RUNNING", start + textBlock(1, "a") + messageDelta + stop],
    ["SSE-INDEX-RUNNING", start + textBlock(0, "a") + textBlock(0, "b") + messageDelta + stop],
    [
      "SSE-BLOCK-TYPE",
      start + textBlock(0, "a").replace('"type":"text","text":""', '"type":"image"') + messageDelta + stop,
    ],
    ["SSE-TOOL-BLOCKS-GATED", start + toolUse(0) + toolResult(1) + messageDelta + stop, false],
    [
      "SSE-DELTA-TYPE",
      start + textBlock(0, "a").replace('"text_delta"', '"thinking_delta"') + messageDelta + stop,
    ],
    [
      "SSE-DELTA-TYPE",
      start + textBlock(0, "a").replace('"text_delta"', '"markdown_delta"') + messageDelta + stop,
    ],
    [
      "SSE-THINKING-SIGNATURE",
      start +
        thinkingBlock(0).replace(
          frame("content_block_delta", {
            type: "content_block_delta",
            index: 0,
            delta: { type: "signature_delta", signature: "sig" },
          }),
          "",
        ) +
        messageDelta +
        stop,
    ],
    [
      "SSE-THINKING-SIGNATURE",
      start + thinkingBlock(0).replace('"signature":"sig"', '"signature":""') + messageDelta + stop,
    ],
    [
      "SSE-TOOL-INPUT-JSON",
      start + toolUse(0).replace('{\\"path\\":\\"a.txt\\",', '{\\"path\\":') + messageDelta + stop,
    ],
    [
      "SSE-START-EMPTY",
      start +
        textBlock(0, "a").replace('"type":"text","text":""', '"type":"text","text":"early"') +
        messageDelta +
        stop,
    ],
    ["SSE-MESSAGE-DELTA", start + textBlock(0, "a") + stop],
    ["SSE-MESSAGE-DELTA", start + messageDelta + messageDelta + stop],
    ["SSE-MESSAGE-DELTA", start + messageDelta.replace('{"stop_reason":"end_turn"}', "{}") + stop],
    ["SSE-MESSAGE-DELTA", start + messageDelta.replace('"end_turn"', '""') + stop],
    ["SSE-USAGE-FIVE-FIELDS", start + messageDelta.replace(',"total_cost_usd":0.001', "") + stop],
    ["SSE-ERROR-SHAPE", start + frame("error", { error: { message: "boom" } })],
    ["SSE-ERROR-SHAPE", start + frame("error", { error: { type: "api_error", message: " " } })],
  ];

  it.each(broken)("reports %s on a stream breaking that rule", (code, stream, streamToolCalls = true) => {
    const reading = checkTurnStream(stream, { streamToolCalls });
    const found = reading.violations.filter((v) => v.code === code);
    expect(found.length, JSON.stringify(reading.violations)).toBeGreaterThan(0);
  });

  it("covers every error code with a broken stream", () => {
    const errorCodes: GrammarCode[] = [
      "SSE-FRAME-LINES",
      "SSE-FRAME-UNTERMINATED",
      "SSE-DATA-JSON",
      "SSE-TYPE-MATCHES-EVENT",
      "SSE-UNKNOWN-EVENT",
      "SSE-DONE-SENTINEL",
      "SSE-FIRST-MESSAGE-START",
      "SSE-MESSAGE-START-ONCE",
      "SSE-BLOCK-TRIPLE",
      "SSE-INDEX-RUNNING",
      "SSE-BLOCK-TYPE",
      "SSE-TOOL-BLOCKS-GATED",
      "SSE-DELTA-TYPE",
      "SSE-THINKING-SIGNATURE",
      "SSE-TOOL-INPUT-JSON",
      "SSE-START-EMPTY",
      "SSE-MESSAGE-DELTA",
      "SSE-USAGE-FIVE-FIELDS",
      "SSE-STOP-LAST",
      "SSE-AFTER-STOP",
      "SSE-ERROR-SHAPE",
    ];
    expect(new Set(broken.map(([code]) => code))).toEqual(new Set(errorCodes));
  });

  it("notes ping frames, comments and other stop reasons without failing", () => {
    const stream =
      start +
      frame("ping", { type: "ping" }) +
      ": keep-alive\n\n" +
      messageDelta.replace("end_turn", "max_tokens") +
      stop;
    const reading = checkTurnStream(stream, { streamToolCalls: false });
    expect(reading.violations.filter((v) => v.severity === "error")).toEqual([]);
    expect(reading.violations.map((v) => v.code).sort()).toEqual([
      "SSE-COMMENT",
      "SSE-PING",
      "SSE-STOP-REASON",
    ]);
  });

  it("reads the standard's other lines (id, retry, unknown fields, no space after the colon) as notes, the events unchanged", () => {
    const plain = start + textBlock(0, "hi") + messageDelta + stop;
    const variant = plain
      .replaceAll("event: ", "id: 1\nevent:")
      .replaceAll("data: ", "retry: 3000\nx-trace: 9\nheartbeat\ndata:");
    const reading = checkTurnStream(`\uFEFF${variant}`, { streamToolCalls: false });
    expect(reading.violations.filter((v) => v.severity === "error")).toEqual([]);
    expect(reading.violations.map((v) => v.code).sort()).toEqual(["SSE-FIELD-FORM", "SSE-OTHER-FIELD"]);
    expect(reading.events).toEqual(
      checkTurnStream(plain, { streamToolCalls: false }).events.map((e) => ({
        ...e,
        frame: expect.any(String),
      })),
    );
  });

  it("reads data split over two data lines joined by LF, reporting only the framing rule", () => {
    const split = messageDelta.replace('"delta":', '"delta":\ndata: ');
    const reading = checkTurnStream(start + split + stop, { streamToolCalls: false });
    expect(reading.violations.filter((v) => v.severity === "error").map((v) => v.code)).toEqual([
      "SSE-FRAME-LINES",
    ]);
    expect(reading.end).toBe("message_stop");
    expect(reading.usage).toEqual(usage);
  });

  it("splits frames on LF, CRLF and CR and marks an unterminated last frame", () => {
    const frames = splitFrames("event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\revent: c\ndata: 3");
    expect(frames.map((f) => [f.raw, f.terminated])).toEqual([
      ["event: a\ndata: 1", true],
      ["event: b\ndata: 2", true],
      ["event: c\ndata: 3", false],
    ]);
  });
});

describe("the bundled spec's own stream examples", () => {
  it("satisfy the grammar and the event schemas", async () => {
    const { readFile } = await import("node:fs/promises");
    const { SpecValidator } = await import("../spec-validator.ts");
    const doc = JSON.parse(await readFile(new URL("../../generated/openapi.json", import.meta.url), "utf8"));
    const validator = new SpecValidator(doc);
    const examples = doc.components.examples as Record<string, { value: unknown }>;
    const streams = Object.entries(examples).filter(
      ([, e]) => typeof e.value === "string" && e.value.startsWith("event:"),
    );
    expect(streams.length).toBeGreaterThanOrEqual(2);
    for (const [name, example] of streams) {
      const reading = checkTurnStream(example.value as string, { streamToolCalls: true });
      expect(
        reading.violations.filter((v) => v.severity === "error"),
        name,
      ).toEqual([]);
      for (const event of reading.events)
        expect(validator.validateEvent(event.name, event.data), name).toEqual([]);
    }
  });
});
