/**
 * Reads a turn's server-sent events into typed StreamEvents. Framing is the kit's one SSE reader (./sse.ts,
 * over eventsource-parser); this module adds the API's rules: the `event:` name selects the event, the
 * stream ends at `message_stop`, and an `error` event ends it with a thrown StreamErrorEventError after the
 * events before it were yielded.
 */
import type { components } from "../generated/api-types.ts";
import { type StreamEventName, streamEventNames } from "../generated/protocol.ts";
import { StreamErrorEventError, StreamProtocolError } from "./errors.ts";
import { readSseFrames } from "./sse.ts";

type Schemas = components["schemas"];
export type StreamEvent = Schemas["StreamEvent"];
/** The events a turn stream yields: every StreamEvent but `error`, which is thrown instead. */
export type TurnEvent = Exclude<StreamEvent, Schemas["ErrorEvent"]>;

export { type StreamEventName, streamEventNames };

/** Frames with other names (e.g. `ping`) are not part of the turn and are skipped. */
const knownNames = new Set<string>(streamEventNames);

/** Parses an SSE body into StreamEvents; throws on an `error` event or a stream cut before `message_stop`. */
export async function* readTurnEvents(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<TurnEvent, void, void> {
  // Leaving this loop early (a return, a throw, the consumer's break) closes the frame reader, which
  // releases the connection.
  for await (const frame of readSseFrames(body)) {
    // Like the official messages client: frames without a known `event:` name (or without data) are not
    // part of the turn.
    if (!frame.event || !knownNames.has(frame.event) || frame.data === undefined) continue;
    const event = parseData(frame.event, frame.data);
    if (frame.event === "error") throw new StreamErrorEventError(event as Schemas["ErrorEvent"]);
    yield event as TurnEvent;
    if (frame.event === "message_stop") return;
  }
  throw new StreamProtocolError("turn stream ended before message_stop");
}

function parseData(name: string, data: string): StreamEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    throw new StreamProtocolError(`event ${name} has data that is not JSON: ${data.slice(0, 200)}`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new StreamProtocolError(`event ${name} has data that is not a JSON object`);
  }
  // The shape is the server's promise; validating it against the spec is the conformance suite's job.
  return parsed as StreamEvent;
}

/** Concatenates the text of all `text_delta`s of a turn (throws what the stream throws). */
export async function collectText(events: AsyncIterable<StreamEvent>): Promise<string> {
  let text = "";
  for await (const event of events) {
    if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text;
  }
  return text;
}
