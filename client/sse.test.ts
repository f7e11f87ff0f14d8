import { describe, expect, it } from "vitest";
import { encodeSseEvent, readSseFrames, SseFrameReader, splitSseFrames } from "./sse.ts";

function streamOf(chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

describe("the SSE frame reader and writer", () => {
  it("reads back what the writer wrote", () => {
    const text = encodeSseEvent("message_stop", { type: "message_stop" });
    expect(text).toBe('event: message_stop\ndata: {"type":"message_stop"}\n\n');
    expect(splitSseFrames(text)).toEqual([
      { index: 0, raw: 'event: message_stop\ndata: {"type":"message_stop"}', terminated: true, ...fields() },
    ]);
    function fields() {
      return { event: "message_stop", data: '{"type":"message_stop"}' };
    }
  });

  it("ends lines at CRLF, LF or CR, also when a CRLF is cut between chunks", () => {
    const reader = new SseFrameReader();
    const frames = [
      ...reader.push("event: a\r"),
      ...reader.push("\ndata: 1\r"),
      ...reader.push("\n\r"),
      ...reader.push("\nevent: b\rdata: 2\r\r"),
      ...reader.end(),
    ];
    expect(frames.map((f) => [f.event, f.data, f.terminated])).toEqual([
      ["a", "1", true],
      ["b", "2", true],
    ]);
  });

  it("hands over a frame written with CR endings when its last CR arrives, not at the next chunk", () => {
    const reader = new SseFrameReader();
    expect(reader.push("event: a\rdata: 1\r\r").map((f) => [f.event, f.data])).toEqual([["a", "1"]]);
    expect(reader.push("\nevent: b\r\ndata: 2\r\n\r").map((f) => [f.event, f.data])).toEqual([["b", "2"]]);
    expect([...reader.push("\n"), ...reader.end()]).toEqual([]);
  });

  it("keeps what a parser would smooth over: the raw lines, an unterminated last frame, an event without data", () => {
    const frames = splitSseFrames("event: only\n\n: note\n\ndata: x\nevent: y\n\nevent: z\ndata: {");
    expect(
      frames.map((f) => ({ raw: f.raw, event: f.event, data: f.data, terminated: f.terminated })),
    ).toEqual([
      { raw: "event: only", event: "only", data: undefined, terminated: true },
      { raw: ": note", event: undefined, data: undefined, terminated: true },
      { raw: "data: x\nevent: y", event: "y", data: "x", terminated: true },
      { raw: "event: z\ndata: {", event: "z", data: "{", terminated: false },
    ]);
  });

  it("joins several data lines as the SSE standard says", () => {
    expect(splitSseFrames("event: e\ndata: a\ndata:b\n\n")[0].data).toBe("a\nb");
  });

  it("streams frames as the chunks arrive", async () => {
    const seen = [];
    for await (const frame of readSseFrames(
      streamOf(["event: a\nda", "ta: 1\n\nevent: b\n", "data: 2\n\n"]),
    )) {
      seen.push([frame.index, frame.event, frame.data]);
    }
    expect(seen).toEqual([
      [0, "a", "1"],
      [1, "b", "2"],
    ]);
  });
});
