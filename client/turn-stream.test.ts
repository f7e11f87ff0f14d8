/** The SSE reader on literal byte streams: framing edge cases that a mock server will not produce. */
import { describe, expect, it } from "vitest";
import { StreamErrorEventError, StreamProtocolError } from "./errors.ts";
import { encodeSseEvent as frame } from "./sse.ts";
import { collectText, readTurnEvents, type TurnEvent } from "./turn-stream.ts";

/** A body delivering `chunks` as separate reads, as a network would. */
function body(...chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

const start = frame("message_start", {
  type: "message_start",
  message: { id: "m", model: "x", usage: { input_tokens: 1, output_tokens: 0 } },
});
const stop = frame("message_stop", { type: "message_stop" });

async function drain(events: AsyncIterable<TurnEvent>): Promise<{ types: string[]; error?: unknown }> {
  const types: string[] = [];
  try {
    for await (const event of events) types.push(event.type);
  } catch (error) {
    return { types, error };
  }
  return { types };
}

describe("readTurnEvents", () => {
  it("reassembles frames split across reads, including inside a UTF-8 character", async () => {
    const text = frame("content_block_delta", {
      type: "content_block_delta",
      index: 0,
      delta: { type: "text_delta", text: "héllo ✓" },
    });
    const bytes = new TextEncoder().encode(start + text + stop);
    const split = bytes.indexOf(0xc3) + 1; // inside the two bytes of "é"
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes.slice(0, split));
        controller.enqueue(bytes.slice(split));
        controller.close();
      },
    });
    expect(await collectText(readTurnEvents(stream))).toBe("héllo ✓");
  });

  it("skips ping frames, comments and frames without an event name", async () => {
    const result = await drain(
      readTurnEvents(
        body(": keep-alive\n\n", start, "event: ping\ndata: {}\n\n", 'data: {"type":"x"}\n\n', stop),
      ),
    );
    expect(result).toEqual({ types: ["message_start", "message_stop"] });
  });

  it("stops at message_stop and ignores anything after it", async () => {
    const result = await drain(readTurnEvents(body(start, stop, start)));
    expect(result).toEqual({ types: ["message_start", "message_stop"] });
  });

  it("throws StreamProtocolError when the stream ends before message_stop", async () => {
    const result = await drain(readTurnEvents(body(start)));
    expect(result.types).toEqual(["message_start"]);
    expect(result.error).toBeInstanceOf(StreamProtocolError);
  });

  it("throws StreamProtocolError on data that is not a JSON object", async () => {
    const bad = await drain(readTurnEvents(body(start, "event: content_block_stop\ndata: {nope\n\n", stop)));
    expect(bad.error).toBeInstanceOf(StreamProtocolError);
    const scalar = await drain(readTurnEvents(body("event: message_stop\ndata: 42\n\n")));
    expect(scalar.error).toBeInstanceOf(StreamProtocolError);
  });

  it("accepts an error event without a type field, as the API shows it", async () => {
    const result = await drain(
      readTurnEvents(body(start, frame("error", { error: { type: "api_error", message: "boom" } }))),
    );
    expect(result.types).toEqual(["message_start"]);
    expect(result.error).toBeInstanceOf(StreamErrorEventError);
    expect((result.error as StreamErrorEventError).event.error.message).toBe("boom");
  });
});
