/**
 * The grammar of one turn's server-sent event stream, as one explicit state machine over its frames.
 * The frames come from the kit's one SSE reader (client/sse.ts), which keeps each frame's raw lines, so
 * framing faults — a missing `event:` line, a frame without its terminating blank line, a `[DONE]`
 * sentinel — are seen instead of smoothed over.
 * Usable on its own: `checkTurnStream(bytes, { streamToolCalls })` returns the violations and what was read.
 */

import {
  contentBlockTypes,
  deltaTypes,
  streamErrorType,
  streamEventNames,
  streamUsageFields,
} from "@agent-api/client/protocol";
import { type SseFrame, splitSseFrames } from "@agent-api/client/sse";
import { isRecord } from "../json.ts";

export type { SseFrame };

/** Stable codes; each is judged by the conformance check of the same id. */
export type GrammarCode =
  | "SSE-FRAME-LINES"
  | "SSE-FRAME-UNTERMINATED"
  | "SSE-DATA-JSON"
  | "SSE-TYPE-MATCHES-EVENT"
  | "SSE-UNKNOWN-EVENT"
  | "SSE-DONE-SENTINEL"
  | "SSE-FIRST-MESSAGE-START"
  | "SSE-MESSAGE-START-ONCE"
  | "SSE-BLOCK-TRIPLE"
  | "SSE-INDEX-RUNNING"
  | "SSE-BLOCK-TYPE"
  | "SSE-TOOL-BLOCKS-GATED"
  | "SSE-DELTA-TYPE"
  | "SSE-THINKING-SIGNATURE"
  | "SSE-TOOL-INPUT-JSON"
  | "SSE-START-EMPTY"
  | "SSE-MESSAGE-DELTA"
  | "SSE-USAGE-FIVE-FIELDS"
  | "SSE-STOP-LAST"
  | "SSE-AFTER-STOP"
  | "SSE-ERROR-SHAPE"
  /** Notes (severity "note"): seen, reported, never a failure. */
  | "SSE-PING"
  | "SSE-COMMENT"
  | "SSE-STOP-REASON"
  /** A line of a field the SSE standard defines beyond the API's two (`id:`, `retry:`) or one it ignores. */
  | "SSE-OTHER-FIELD"
  /** An `event:`/`data:` line written without the space after its colon (the standard reads it the same). */
  | "SSE-FIELD-FORM";

/** Codes that are observations, never a failure: standard SSE clients read such a stream unchanged. */
const NOTE_CODES: ReadonlySet<GrammarCode> = new Set([
  "SSE-PING",
  "SSE-COMMENT",
  "SSE-STOP-REASON",
  "SSE-OTHER-FIELD",
  "SSE-FIELD-FORM",
]);

/**
 * Codes judged only by the check of the same id, never by every check that reads a stream: a frame whose
 * lines are laid out otherwise than the API shows is still read as the SSE standard reads it, so the events
 * it carries are the same and no other rule is touched by the layout.
 */
export const FRAMING_ONLY_CODES: ReadonlySet<GrammarCode> = new Set(["SSE-FRAME-LINES"]);

export interface GrammarViolation {
  code: GrammarCode;
  severity: "error" | "note";
  message: string;
  /** Position of the offending frame in the stream; null for faults of the stream as a whole. */
  frameIndex: number | null;
  /** The offending frame's raw text. */
  frame?: string;
}

export interface StreamEventSeen {
  name: string;
  data: Record<string, unknown>;
  frameIndex: number;
  frame: string;
}

/** A content block as read from the stream. */
export interface BlockSeen {
  index: number;
  type: string;
  start: Record<string, unknown>;
  deltas: Array<Record<string, unknown>>;
  stopped: boolean;
}

/**
 * Whether a stream's blocks carry output: any block but an empty text block. A block the stream does not show
 * (redacted thinking, tool blocks without stream_tool_calls) never reaches `blocks`, so it counts for nothing.
 */
export function carriesOutput(blocks: BlockSeen[]): boolean {
  return blocks.some(
    (block) =>
      block.type !== "text" ||
      block.deltas.some((delta) => typeof delta.text === "string" && delta.text.trim() !== ""),
  );
}

export interface TurnStreamReading {
  frames: SseFrame[];
  events: StreamEventSeen[];
  blocks: BlockSeen[];
  violations: GrammarViolation[];
  /** How the stream ended. */
  end: "message_stop" | "error" | "eof";
  /** `message_start.message.model`, when present. */
  model?: string;
  /** `message_start.message.id`, as sent (any type). */
  messageId?: unknown;
  stopReason?: unknown;
  usage?: Record<string, unknown>;
  /** `error.message` of an error event, when one ended the stream. */
  errorMessage?: string;
}

export interface TurnGrammarOptions {
  /** Whether the request set `metadata.stream_tool_calls: true` (tool blocks are allowed only then). */
  streamToolCalls: boolean;
}

const EVENT_NAMES = new Set<string>(streamEventNames);
const BLOCK_TYPES = new Set<string>(contentBlockTypes);
const DELTA_TYPES = new Set<string>(deltaTypes);
/** The delta sequence each block type must carry between its start and stop (tool_result: see below). */
const EXPECTED_DELTAS: Record<string, string[]> = {
  text: ["text_delta"],
  thinking: ["thinking_delta", "signature_delta"],
  tool_use: ["input_json_delta"],
};
/** Violations kept per stream: a broken stream repeats its fault on every frame; the first ones say enough. */
const MAX_VIOLATIONS = 50;

/** Where the turn is; an open block is tracked by `openBlock`, so "inside a block" needs no state of its own. */
type State = "before_start" | "started" | "after_message_delta" | "ended";

/** Checks one turn's bytes against the grammar of the API's Events section. */
export function checkTurnStream(bytes: Uint8Array | string, options: TurnGrammarOptions): TurnStreamReading {
  const frames = splitSseFrames(bytes);
  const reading: TurnStreamReading = { frames, events: [], blocks: [], violations: [], end: "eof" };
  const noted = new Set<GrammarCode>();
  let errors = 0;
  const violate = (code: GrammarCode, message: string, frame: SseFrame | null) => {
    const note = NOTE_CODES.has(code);
    // A note once per stream (every frame of a stream may carry it), so notes never crowd out the errors.
    if (note ? noted.has(code) : errors >= MAX_VIOLATIONS) return;
    if (note) noted.add(code);
    else errors++;
    reading.violations.push({
      code,
      severity: note ? "note" : "error",
      message,
      frameIndex: frame ? frame.index : null,
      frame: frame?.raw,
    });
  };

  let state: State = "before_start";
  let nextIndex = 0;
  let openBlock: BlockSeen | null = null;
  let sawMessageDelta = false;
  let reportedAfterStop = false;

  for (const frame of frames) {
    const parsed = readFrameLines(frame, violate);
    if (!parsed) continue;
    if (!frame.terminated) {
      violate("SSE-FRAME-UNTERMINATED", "the stream ended inside a frame (no blank line after it)", frame);
    }
    const { event, data } = parsed;
    if (state === "ended") {
      if (!reportedAfterStop) {
        violate("SSE-AFTER-STOP", `frame after the stream's final event (${reading.end})`, frame);
        reportedAfterStop = true;
      }
      continue;
    }
    if (event === "ping") {
      violate("SSE-PING", "a ping frame (not part of the API's grammar; clients skip it)", frame);
      continue;
    }
    if (!EVENT_NAMES.has(event)) {
      violate("SSE-UNKNOWN-EVENT", `unknown event name "${event}"`, frame);
      continue;
    }
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch {
      violate("SSE-DATA-JSON", "the data line is not JSON", frame);
      continue;
    }
    if (!isRecord(json)) {
      violate("SSE-DATA-JSON", "the data line is JSON but not an object", frame);
      continue;
    }
    // The API's error event shows no `type`; when present it must still match.
    if (json.type !== event && !(event === "error" && json.type === undefined)) {
      violate(
        "SSE-TYPE-MATCHES-EVENT",
        `data.type ${JSON.stringify(json.type)} differs from event "${event}"`,
        frame,
      );
    }
    reading.events.push({ name: event, data: json, frameIndex: frame.index, frame: frame.raw });

    if (state === "before_start" && event !== "message_start" && event !== "error") {
      violate("SSE-FIRST-MESSAGE-START", `the first event is "${event}", not message_start`, frame);
      state = "started";
    }

    switch (event) {
      case "message_start": {
        if (state !== "before_start") {
          violate("SSE-MESSAGE-START-ONCE", "a second message_start", frame);
          break;
        }
        const message = json.message;
        if (isRecord(message) && typeof message.model === "string") reading.model = message.model;
        if (isRecord(message)) reading.messageId = message.id;
        state = "started";
        break;
      }
      case "content_block_start": {
        if (openBlock) {
          violate(
            "SSE-BLOCK-TRIPLE",
            `block ${openBlock.index} was not stopped before the next started`,
            frame,
          );
          openBlock = null;
        }
        if (state === "after_message_delta") {
          violate("SSE-MESSAGE-DELTA", "a block started after message_delta", frame);
        }
        const index = json.index;
        if (index !== nextIndex) {
          violate("SSE-INDEX-RUNNING", `index ${JSON.stringify(index)} where ${nextIndex} was due`, frame);
        }
        const block = isRecord(json.content_block) ? json.content_block : {};
        const type = typeof block.type === "string" ? block.type : "";
        if (!BLOCK_TYPES.has(type)) {
          violate("SSE-BLOCK-TYPE", `unknown content block type ${JSON.stringify(block.type)}`, frame);
        } else if ((type === "tool_use" || type === "tool_result") && !options.streamToolCalls) {
          violate("SSE-TOOL-BLOCKS-GATED", `a ${type} block although stream_tool_calls was not true`, frame);
        }
        if (type === "text" && block.text !== "") {
          violate("SSE-START-EMPTY", "a text block must start with an empty text string", frame);
        }
        if (type === "thinking" && block.thinking !== "") {
          violate("SSE-START-EMPTY", "a thinking block must start with an empty thinking string", frame);
        }
        openBlock = {
          index: typeof index === "number" ? index : nextIndex,
          type,
          start: block,
          deltas: [],
          stopped: false,
        };
        reading.blocks.push(openBlock);
        nextIndex = (typeof index === "number" && Number.isInteger(index) ? index : nextIndex) + 1;
        state = "started";
        break;
      }
      case "content_block_delta": {
        if (!openBlock) {
          violate("SSE-BLOCK-TRIPLE", "a content_block_delta outside any block", frame);
          break;
        }
        if (json.index !== openBlock.index) {
          violate(
            "SSE-BLOCK-TRIPLE",
            `delta for index ${JSON.stringify(json.index)} inside block ${openBlock.index}`,
            frame,
          );
        }
        const delta = isRecord(json.delta) ? json.delta : {};
        if (!DELTA_TYPES.has(String(delta.type))) {
          violate("SSE-DELTA-TYPE", `unknown delta type ${JSON.stringify(delta.type)}`, frame);
        }
        openBlock.deltas.push(delta);
        break;
      }
      case "content_block_stop": {
        if (!openBlock) {
          violate("SSE-BLOCK-TRIPLE", "a content_block_stop outside any block", frame);
          break;
        }
        if (json.index !== openBlock.index) {
          violate(
            "SSE-BLOCK-TRIPLE",
            `stop for index ${JSON.stringify(json.index)} closes block ${openBlock.index}`,
            frame,
          );
        }
        checkBlockDeltas(openBlock, frame, violate);
        openBlock.stopped = true;
        openBlock = null;
        state = "started";
        break;
      }
      case "message_delta": {
        if (openBlock) {
          violate("SSE-BLOCK-TRIPLE", `message_delta while block ${openBlock.index} is open`, frame);
          openBlock = null;
        }
        if (sawMessageDelta) violate("SSE-MESSAGE-DELTA", "a second message_delta", frame);
        sawMessageDelta = true;
        const delta = isRecord(json.delta) ? json.delta : {};
        reading.stopReason = delta.stop_reason;
        if (typeof delta.stop_reason !== "string") {
          violate("SSE-MESSAGE-DELTA", "message_delta.delta.stop_reason is not a string", frame);
        } else if (delta.stop_reason.trim() === "") {
          // Other stop reasons are not shown, but an empty one names no reason at all.
          violate("SSE-MESSAGE-DELTA", "message_delta.delta.stop_reason is an empty string", frame);
        } else if (delta.stop_reason !== "end_turn") {
          violate(
            "SSE-STOP-REASON",
            `stop_reason "${delta.stop_reason}" (the API shows only end_turn)`,
            frame,
          );
        }
        const usage = isRecord(json.usage) ? json.usage : undefined;
        reading.usage = usage;
        const missing = streamUsageFields.filter((f) => typeof usage?.[f] !== "number");
        if (missing.length > 0) {
          violate("SSE-USAGE-FIVE-FIELDS", `message_delta.usage lacks numeric ${missing.join(", ")}`, frame);
        }
        state = "after_message_delta";
        break;
      }
      case "message_stop": {
        if (openBlock) {
          violate("SSE-BLOCK-TRIPLE", `message_stop while block ${openBlock.index} is open`, frame);
          openBlock = null;
        }
        if (!sawMessageDelta)
          violate("SSE-MESSAGE-DELTA", "message_stop without a message_delta before it", frame);
        reading.end = "message_stop";
        state = "ended";
        break;
      }
      case "error": {
        const error = isRecord(json.error) ? json.error : {};
        // The message "tells the failure" (Events, error): an empty one tells nothing.
        if (
          error.type !== streamErrorType ||
          typeof error.message !== "string" ||
          error.message.trim() === ""
        ) {
          violate(
            "SSE-ERROR-SHAPE",
            `an error event must carry {error: {type: "${streamErrorType}", message}}`,
            frame,
          );
        }
        reading.errorMessage = typeof error.message === "string" ? error.message : undefined;
        reading.end = "error";
        state = "ended";
        break;
      }
    }
  }

  if (state === "before_start") {
    violate("SSE-FIRST-MESSAGE-START", "the stream has no message_start (no events at all)", null);
  }
  if (state !== "ended") {
    violate("SSE-STOP-LAST", "the stream ended without message_stop (and without an error event)", null);
  }
  return reading;
}

/** Fields of the SSE standard other than the API's `event` and `data`; the standard's clients act on them. */
const STANDARD_OTHER_FIELDS = new Set(["id", "retry"]);

/**
 * The frame's event and data as the SSE standard reads them (comments, `id:`, `retry:` and unknown fields
 * skipped, data lines joined by LF), or null when the frame carries no event to judge. A layout other than
 * one `event:` line then one `data:` line is reported as SSE-FRAME-LINES (judged by that check alone); the
 * standard's other lines and a missing space after a colon are notes.
 */
function readFrameLines(
  frame: SseFrame,
  violate: (code: GrammarCode, message: string, frame: SseFrame | null) => void,
): { event: string; data: string } | null {
  const lines = frame.raw.split("\n").filter((line) => !line.startsWith(":"));
  if (lines.length === 0) {
    violate("SSE-COMMENT", "a comment-only frame (ignored by clients)", frame);
    return null;
  }
  if (frame.data?.split("\n").some((value) => value.trim() === "[DONE]")) {
    violate("SSE-DONE-SENTINEL", "a [DONE] sentinel (the stream must end at message_stop)", frame);
    return null;
  }
  const names: string[] = [];
  for (const line of lines) {
    const colon = line.indexOf(":");
    // A line without a colon is a field with an empty value (the standard's rule).
    const name = colon === -1 ? line : line.slice(0, colon);
    if (name === "event" || name === "data") {
      names.push(name);
      if (colon === -1 || line[colon + 1] !== " ") {
        violate(
          "SSE-FIELD-FORM",
          `a "${name}" line without a space after the colon (the SSE standard reads it the same)`,
          frame,
        );
      }
    } else if (STANDARD_OTHER_FIELDS.has(name)) {
      violate("SSE-OTHER-FIELD", `an "${name}:" line (an SSE field the API does not use)`, frame);
    } else {
      violate(
        "SSE-OTHER-FIELD",
        `a line of the unknown field ${JSON.stringify(name)} (SSE clients ignore it)`,
        frame,
      );
    }
  }
  // Only the standard's other fields: the standard dispatches no event for such a frame.
  if (names.length === 0) return null;
  if (names.length !== 2 || names[0] !== "event" || names[1] !== "data") {
    violate(
      "SSE-FRAME-LINES",
      `a frame must be one "event:" line then one "data:" line; saw ${names.map((n) => n || "(empty)").join(", ")}`,
      frame,
    );
  }
  // Without a name and data there is no event to judge; with both (lines reordered or data split over
  // several lines) the standard reads the event whole, and so does the grammar.
  if (frame.event === undefined || frame.data === undefined) return null;
  return { event: frame.event, data: frame.data };
}

/** A block arrives whole: the API's delta sequence for its type, exactly once. */
function checkBlockDeltas(
  block: BlockSeen,
  frame: SseFrame,
  violate: (code: GrammarCode, message: string, frame: SseFrame | null) => void,
): void {
  const types = block.deltas.map((d) => String(d.type));
  if (block.type === "tool_result") {
    // The API lists no delta type for tool_result: the start carries it whole, or one delta may follow.
    if (types.length > 1) violate("SSE-BLOCK-TRIPLE", `tool_result block with ${types.length} deltas`, frame);
    return;
  }
  const expected = EXPECTED_DELTAS[block.type];
  if (!expected) return;
  if (block.type === "thinking" && !types.includes("signature_delta")) {
    violate("SSE-THINKING-SIGNATURE", `thinking block ${block.index} has no signature_delta`, frame);
    if (types.length === 1 && types[0] === "thinking_delta") return;
  }
  // What follows a thinking block is its signature (Events rule 1): a signature_delta carrying none signs
  // nothing, and a client that sends the thinking back has nothing to send with it.
  const signature = block.deltas.find((d) => d.type === "signature_delta");
  if (
    block.type === "thinking" &&
    signature &&
    (typeof signature.signature !== "string" || signature.signature === "")
  )
    violate(
      "SSE-THINKING-SIGNATURE",
      `thinking block ${block.index}'s signature_delta carries signature ${JSON.stringify(signature.signature ?? null)}, not a signature`,
      frame,
    );
  if (types.length !== expected.length) {
    violate(
      "SSE-BLOCK-TRIPLE",
      `${block.type} block ${block.index} carried ${types.length} deltas (${types.join(", ") || "none"}); expected ${expected.join(" then ")}`,
      frame,
    );
    return;
  }
  for (let i = 0; i < expected.length; i++) {
    if (types[i] !== expected[i]) {
      violate(
        "SSE-DELTA-TYPE",
        `${block.type} block ${block.index} delta ${i} is ${types[i]}, expected ${expected[i]}`,
        frame,
      );
      return;
    }
  }
  if (block.type === "tool_use") {
    const partial = block.deltas[0].partial_json;
    try {
      if (typeof partial !== "string") throw new Error("not a string");
      JSON.parse(partial);
    } catch {
      violate(
        "SSE-TOOL-INPUT-JSON",
        `tool_use block ${block.index}: partial_json is not one complete JSON value`,
        frame,
      );
    }
  }
}

/**
 * A block as a client assembles it: its start with its deltas applied (text and thinking appended, the
 * signature set, a tool_use's input parsed from its partial JSON; input JSON that does not parse, which the
 * grammar reports, leaves the start's input).
 */
export function wholeBlock(block: BlockSeen): Record<string, unknown> {
  const whole: Record<string, unknown> = { ...block.start };
  let json = "";
  for (const delta of block.deltas) {
    if (delta.type === "text_delta" && typeof delta.text === "string")
      whole.text = `${typeof whole.text === "string" ? whole.text : ""}${delta.text}`;
    else if (delta.type === "thinking_delta" && typeof delta.thinking === "string")
      whole.thinking = `${typeof whole.thinking === "string" ? whole.thinking : ""}${delta.thinking}`;
    else if (delta.type === "signature_delta") whole.signature = delta.signature;
    else if (delta.type === "input_json_delta" && typeof delta.partial_json === "string")
      json += delta.partial_json;
  }
  if (json !== "") {
    try {
      whole.input = JSON.parse(json);
    } catch {
      // Reported as SSE-TOOL-INPUT-JSON.
    }
  }
  return whole;
}

/** The text of the turn's text blocks, joined by newlines (what the agent "replied"). */
export function replyText(reading: TurnStreamReading): string {
  return reading.blocks
    .filter((b) => b.type === "text")
    .map((b) => b.deltas.map((d) => (typeof d.text === "string" ? d.text : "")).join(""))
    .join("\n");
}
