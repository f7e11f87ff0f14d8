/**
 * Rewrites an event stream into the other framings the SSE standard (WHATWG HTML, "server-sent events")
 * reads as the same events: each event gets its own, seeded, random choice of line ending (LF, CRLF, CR),
 * a space after the colon or none, comment lines, `id:` and `retry:` lines, lines of unknown fields, a field
 * written without a colon, and data split over several `data:` lines (joined by LF, so JSON split after a
 * comma still parses), plus a byte order mark at the start. The API's own layout (one `event:` line then one
 * `data:` line) is kept unless `splitData` is asked for: that one departs from the API's framing rule, which
 * its own check judges, and no other.
 */
import { SseFrameReader } from "@agent-api/client/sse";

/** A small seeded generator (mulberry32): the same seed rewrites the same stream the same way. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface VariantOptions {
  /** Also split a frame's JSON over two `data:` lines (outside the API's framing rule; see above). */
  splitData?: boolean;
}

const LINE_ENDINGS = ["\n", "\r\n", "\r"];

/** One frame (its `event` and `data` values) written in a legal variant chosen with `random`. */
export function variantFrame(
  event: string,
  data: string,
  random: () => number,
  options: VariantOptions = {},
): string {
  const pick = <T>(items: T[]): T => items[Math.floor(random() * items.length)];
  const eol = pick(LINE_ENDINGS);
  const colon = () => (random() < 0.5 ? ": " : ":");
  const lines: string[] = [];
  const extras = () => {
    if (random() < 0.3) lines.push(`:${pick([" keep-alive", "", " proxy was here"])}`);
    if (random() < 0.2) lines.push(`id${colon()}${Math.floor(random() * 1e6)}`);
    if (random() < 0.2) lines.push(`retry${colon()}${1000 + Math.floor(random() * 5000)}`);
    if (random() < 0.2) lines.push(`x-trace${colon()}${Math.floor(random() * 1e6).toString(16)}`);
    // A field name alone: an unknown field with an empty value.
    if (random() < 0.1) lines.push("heartbeat");
  };
  extras();
  lines.push(`event${colon()}${event}`);
  extras();
  const split = options.splitData === true && random() < 0.5 ? splitPoint(data) : -1;
  if (split > 0) {
    // The standard joins the two values with LF, which JSON reads as whitespace.
    lines.push(`data${colon()}${data.slice(0, split)}`);
    lines.push(`data${colon()}${data.slice(split)}`);
  } else {
    // A value that starts with a space needs the space after the colon, or the standard strips it.
    lines.push(`data${data.startsWith(" ") ? ": " : colon()}${data}`);
  }
  extras();
  return lines.join(eol) + eol + eol;
}

/** Just after the first comma outside a JSON string, or -1 when there is none. */
function splitPoint(data: string): number {
  let inString = false;
  for (let i = 0; i < data.length; i++) {
    const c = data[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === ",") return i + 1;
  }
  return -1;
}

/**
 * An incremental rewriter: `push` the upstream's text, get the rewritten text of the frames completed so
 * far; `end` flushes. Frames without an event name and data (comments, pings of other forms) pass through
 * as they came.
 */
export class SseVariantRewriter {
  readonly #reader = new SseFrameReader();
  readonly #random: () => number;
  readonly #options: VariantOptions;
  #first = true;

  constructor(seed: number, options: VariantOptions = {}) {
    this.#random = seededRandom(seed);
    this.#options = options;
  }

  push(text: string): string {
    return this.#write(this.#reader.push(text));
  }

  end(): string {
    return this.#write(this.#reader.end());
  }

  #write(frames: ReturnType<SseFrameReader["push"]>): string {
    let out = "";
    if (this.#first && frames.length > 0) {
      this.#first = false;
      if (this.#random() < 0.5) out += "\uFEFF";
      // A comment before the first event, as keep-alive writers send to open a proxy's buffer.
      if (this.#random() < 0.5) out += ": stream open\n\n";
    }
    for (const frame of frames) {
      if (frame.event === undefined || frame.data === undefined) out += `${frame.raw}\n\n`;
      else out += variantFrame(frame.event, frame.data, this.#random, this.#options);
      if (this.#random() < 0.15) out += `: between events${this.#random() < 0.5 ? "\r\n" : "\n"}\n`;
    }
    return out;
  }
}

/** A whole stream rewritten at once. */
export function rewriteStream(text: string, seed: number, options: VariantOptions = {}): string {
  const rewriter = new SseVariantRewriter(seed, options);
  return rewriter.push(text) + rewriter.end();
}
