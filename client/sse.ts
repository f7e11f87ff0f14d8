/**
 * The one server-sent-events frame reader and writer of the kit: the client, the conformance grammar, the
 * spec validator's callers, the fault-injecting proxy, the reference server and the tests all use it.
 * Fields are parsed by eventsource-parser (the SSE standard's rules: leading space, joined data lines,
 * comments); this layer only cuts the text into frames first and keeps each frame's raw lines, because the
 * conformance grammar must see framing faults (a frame without its blank line, lines in the wrong order, a
 * second data line) that a parser smooths over.
 */
import { createParser, type EventSourceParser } from "eventsource-parser";

export interface SseFrame {
  /** Position of the frame in the stream, from 0. */
  index: number;
  /** The frame's lines (line breaks normalised to `\n`), without the blank line that ends it. */
  raw: string;
  /** The `event:` field; undefined when the frame has none. */
  event?: string;
  /** The `data:` field (several data lines joined by `\n`); undefined when the frame has no data line. */
  data?: string;
  /** False when the bytes ended before the frame's blank line. */
  terminated: boolean;
}

/** One frame as the API writes it: an `event:` line, a `data:` line, a blank line. */
export function encodeSseFrame(event: string, data: string): string {
  return `event: ${event}\ndata: ${data}\n\n`;
}

/** One event whose data is `value` as JSON. */
export function encodeSseEvent(event: string, value: unknown): string {
  return encodeSseFrame(event, JSON.stringify(value));
}

/**
 * An incremental frame reader: `push` text as it arrives, `end` when the stream closes. Any of CRLF, LF and
 * CR ends a line, as the SSE standard says, also when a CRLF is split between two chunks.
 */
const LINE_BREAK = /[\r\n]/;

export class SseFrameReader {
  #frames = 0;
  #started = false;
  #pending = "";
  #crHeld = false;
  #lines: string[] = [];
  #parsed: { event?: string; data?: string } = {};
  readonly #parser: EventSourceParser = createParser({
    onEvent: (message) => {
      this.#parsed = { event: message.event, data: message.data };
    },
  });

  push(text: string): SseFrame[] {
    const out: SseFrame[] = [];
    // The standard ignores one byte order mark at the very start; a TextDecoder drops it from bytes, but
    // text handed over already decoded may still carry it.
    if (!this.#started && text !== "") {
      this.#started = true;
      if (text.startsWith("\uFEFF")) text = text.slice(1);
    }
    // Only new text can end a line: a long line arriving in many chunks is split once, when it ends, instead
    // of again at every chunk (quadratic in the line a server streams).
    // (Whether a CR is held is kept aside: asking the growing text itself would flatten it at every chunk.)
    if (!this.#crHeld && !LINE_BREAK.test(text)) {
      this.#pending += text;
      return out;
    }
    this.#pending += text;
    const lines = this.#pending.split(/\r\n|\n|\r/);
    this.#pending = lines.pop() ?? "";
    // A CR at the very end may be the first half of a CRLF: keep it until the next chunk says.
    if (this.#pending === "" && text.endsWith("\r")) {
      const last = lines.pop();
      if (last !== undefined) this.#pending = `${last}\r`;
    }
    this.#crHeld = this.#pending.endsWith("\r");
    for (const line of lines) this.#line(line, out);
    return out;
  }

  end(): SseFrame[] {
    const out: SseFrame[] = [];
    // A held-back CR ended its line after all; any other rest is a line the stream cut short.
    if (this.#pending.endsWith("\r")) this.#line(this.#pending.slice(0, -1), out);
    else if (this.#pending !== "") this.#lines.push(this.#pending);
    this.#pending = "";
    this.#crHeld = false;
    if (this.#lines.length > 0) out.push(this.#frame(false));
    return out;
  }

  #line(line: string, out: SseFrame[]): void {
    if (line !== "") {
      this.#lines.push(line);
      return;
    }
    if (this.#lines.length > 0) out.push(this.#frame(true));
  }

  #frame(terminated: boolean): SseFrame {
    const raw = this.#lines.join("\n");
    this.#lines = [];
    this.#parsed = {};
    // Each frame is parsed on its own, whole, so the raw text and the parsed fields always belong together.
    this.#parser.reset();
    this.#parser.feed(`${raw}\n\n`);
    const frame: SseFrame = { index: this.#frames++, raw, terminated };
    let { event, data } = this.#parsed;
    if (event === undefined && data === undefined) {
      // The standard dispatches nothing for a frame without data; its `event:` field still names it.
      event = eventFieldOf(raw);
    }
    if (event !== undefined) frame.event = event;
    if (data !== undefined) frame.data = data;
    return frame;
  }
}

function eventFieldOf(raw: string): string | undefined {
  let event: string | undefined;
  const parser = createParser({ onEvent: (message) => (event = message.event) });
  // A data line of its own makes the parser dispatch, so the frame's `event:` field becomes visible.
  parser.feed(`${raw}\ndata: \n\n`);
  return event;
}

/** All frames of a complete body. */
export function splitSseFrames(text: string | Uint8Array): SseFrame[] {
  const reader = new SseFrameReader();
  const decoded = typeof text === "string" ? text : new TextDecoder().decode(text);
  return [...reader.push(decoded), ...reader.end()];
}

/** The frames of a streamed body as they arrive. */
export async function* readSseFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame, void, void> {
  const reader = new SseFrameReader();
  const text = body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    while (true) {
      const { done, value } = await text.read();
      if (done) break;
      yield* reader.push(value);
    }
    yield* reader.end();
  } finally {
    // Releases the connection when the consumer stops early or throws.
    await text.cancel().catch(() => {});
  }
}

/** A frame's data as JSON (undefined when it is absent or not JSON). */
export function frameJson(frame: SseFrame): unknown {
  if (frame.data === undefined) return undefined;
  try {
    return JSON.parse(frame.data);
  } catch {
    return undefined;
  }
}
