/**
 * When each part of an event stream arrived. A proxy or gateway that buffers the stream delivers a correct
 * body, all of it at the end: only arrival times tell a streamed turn from a buffered one. The body is read
 * chunk by chunk through the kit's one SSE reader, so the frame positions here are those of the grammar's
 * reading of the same bytes (`checkTurnStream`).
 */
import { SseFrameReader } from "@agent-api/client/sse";
import type { TurnStreamReading } from "./grammar.ts";

/** Arrival times of one response, in ms since its request was sent. */
export interface StreamTiming {
  /** The status line and headers. */
  headersMs: number;
  /** The first byte of the body; null for an empty body. */
  firstByteMs: number | null;
  /** Each frame's last line (its arrival), by frame position in the stream. */
  frameMs: number[];
  /** The end of the body. */
  endMs: number;
}

/** One block of a turn, as it arrived. */
export interface BlockArrival {
  index: number;
  type: string;
  /** Its content_block_start. */
  startMs: number;
  /** Its content_block_stop, or null when the stream never stopped it. */
  stopMs: number | null;
}

/** A turn's timeline for the reports: headers, first byte, each block, the final event, the end. */
export interface TurnTimeline {
  headersMs: number;
  firstByteMs: number | null;
  blocks: BlockArrival[];
  /** message_stop, or the error event that ended the stream; null when neither came. */
  finalEventMs: number | null;
  endMs: number;
}

/**
 * Reads `body` whole, noting when each chunk and each SSE frame arrived; `sentAt` is `performance.now()` when
 * the request went out and `headersAt` when its headers came.
 */
export async function readTimedStream(
  body: AsyncIterable<Uint8Array>,
  sentAt: number,
  headersAt: number,
): Promise<{ bytes: Uint8Array; timing: StreamTiming }> {
  const since = () => Math.round(performance.now() - sentAt);
  const timing: StreamTiming = {
    headersMs: Math.round(headersAt - sentAt),
    firstByteMs: null,
    frameMs: [],
    endMs: 0,
  };
  const chunks: Uint8Array[] = [];
  const decoder = new TextDecoder();
  const reader = new SseFrameReader();
  const noteFrames = (count: number, at: number) => {
    for (let i = 0; i < count; i++) timing.frameMs.push(at);
  };
  for await (const chunk of body) {
    const at = since();
    timing.firstByteMs ??= at;
    chunks.push(chunk);
    noteFrames(reader.push(decoder.decode(chunk, { stream: true })).length, at);
  }
  const end = since();
  noteFrames(reader.push(decoder.decode()).length + reader.end().length, end);
  timing.endMs = end;
  return { bytes: concat(chunks), timing };
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const total = chunks.reduce((n, c) => n + c.byteLength, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** The timeline of a turn read by the grammar from the bytes `timing` describes. */
export function turnTimeline(timing: StreamTiming, reading: TurnStreamReading): TurnTimeline {
  const at = (frameIndex: number) => timing.frameMs[frameIndex] ?? timing.endMs;
  const blocks: BlockArrival[] = [];
  let open: BlockArrival | undefined;
  let finalEventMs: number | null = null;
  for (const event of reading.events) {
    if (event.name === "content_block_start") {
      const block = reading.blocks[blocks.length];
      open = {
        index: block?.index ?? blocks.length,
        type: block?.type ?? "",
        startMs: at(event.frameIndex),
        stopMs: null,
      };
      blocks.push(open);
    } else if (event.name === "content_block_stop" && open) {
      open.stopMs = at(event.frameIndex);
      open = undefined;
    } else if (event.name === "message_stop" || event.name === "error") {
      finalEventMs ??= at(event.frameIndex);
    }
  }
  return {
    headersMs: timing.headersMs,
    firstByteMs: timing.firstByteMs,
    blocks,
    finalEventMs,
    endMs: timing.endMs,
  };
}

/** `headers 4 ms · first byte 4 ms · #0 tool_use 6 ms · #1 tool_result 3,012 ms · message_stop 3,020 ms · end 3,021 ms` */
export function timelineText(timeline: TurnTimeline): string {
  const ms = (n: number) => `${n.toLocaleString("en-US")} ms`;
  const parts = [`headers ${ms(timeline.headersMs)}`];
  parts.push(timeline.firstByteMs === null ? "no body" : `first byte ${ms(timeline.firstByteMs)}`);
  for (const b of timeline.blocks) {
    parts.push(
      `#${b.index} ${b.type || "?"} ${b.stopMs === null ? `${ms(b.startMs)} (never stopped)` : ms(b.stopMs)}`,
    );
  }
  if (timeline.finalEventMs !== null) parts.push(`final event ${ms(timeline.finalEventMs)}`);
  parts.push(`end ${ms(timeline.endMs)}`);
  return parts.join(" · ");
}
