/**
 * Turns the engine's AgentEvents into the API's SSE events: whole blocks (start, one complete delta,
 * stop) with a running index, tool blocks only when `stream_tool_calls` is true, and the usage figures.
 */
import type { components } from "@agent-api/client/api-types";
import type { AgentEvent, TurnUsage } from "../engine/types.ts";
import type { TurnFailure } from "./failure.ts";

export type StreamEvent = components["schemas"]["StreamEvent"];
type Usage = components["schemas"]["StreamUsage"];

/** A comment line on the stream while the upstream works (proxies with idle time-outs would cut it). */
export interface KeepAlive {
  type: "keep_alive";
}

/**
 * The turn failed after its stream opened: the writer sends the API's `error` event (its message only, the
 * API's shape) and logs the catalogue code with the turn's line.
 */
export interface TurnFailed {
  type: "turn_failed";
  failure: TurnFailure;
}

/** What a turn yields: the API's events, except `error`, which only a TurnFailed becomes on the wire. */
export type TurnStreamItem =
  | Exclude<StreamEvent, components["schemas"]["ErrorEvent"]>
  | KeepAlive
  | TurnFailed;

export const KEEP_ALIVE: KeepAlive = { type: "keep_alive" };

/** US dollars per million tokens of one model (config `models[].price`). */
export interface ModelPrice {
  input: number;
  output: number;
  cache_read: number;
  cache_write: number;
}

/** The price of a model the config does not price: a list price of a mid-size model. */
export const DEFAULT_PRICE: ModelPrice = { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 };

/** The turn's usage as message_delta carries it: the upstream's counters summed, and their cost. */
export function usageFor(usage: TurnUsage, price: ModelPrice = DEFAULT_PRICE): Usage {
  const cost =
    (usage.input_tokens * price.input +
      usage.output_tokens * price.output +
      usage.cache_read_input_tokens * price.cache_read +
      usage.cache_creation_input_tokens * price.cache_write) /
    1_000_000;
  return { ...usage, total_cost_usd: Math.round(cost * 1e8) / 1e8 };
}

/**
 * The turn's first event. `usage`: the input usage of the turn's first model call, when the upstream reported
 * it before the turn had anything else to send (clients such as LangChain read input usage only here).
 */
export function messageStart(id: string, model: string, usage?: TurnUsage): TurnStreamItem {
  return {
    type: "message_start",
    message: {
      id,
      type: "message",
      role: "assistant",
      model,
      // The official messages client pushes blocks onto `content`: without it messages.stream() crashes.
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: usage?.input_tokens ?? 0,
        output_tokens: 0,
        ...(usage
          ? {
              cache_read_input_tokens: usage.cache_read_input_tokens,
              cache_creation_input_tokens: usage.cache_creation_input_tokens,
            }
          : {}),
      },
    },
  };
}

export function messageEnd(usage: Usage, stopReason: string): TurnStreamItem[] {
  return [
    { type: "message_delta", delta: { stop_reason: stopReason, stop_sequence: null }, usage },
    { type: "message_stop" },
  ];
}

/** The API's `error` event: its message only (the code of the failure is no field of it). */
export function errorEvent(message: string): StreamEvent {
  return { type: "error", error: { type: "api_error", message } };
}

/** The events of one agent event as a block at `index`; [] when it is not streamed. */
export function blockEvents(event: AgentEvent, index: number, streamToolCalls: boolean): TurnStreamItem[] {
  const stop: TurnStreamItem = { type: "content_block_stop", index };
  switch (event.kind) {
    case "text":
      return [
        { type: "content_block_start", index, content_block: { type: "text", text: "" } },
        { type: "content_block_delta", index, delta: { type: "text_delta", text: event.text } },
        stop,
      ];
    case "thinking":
      return [
        { type: "content_block_start", index, content_block: { type: "thinking", thinking: "" } },
        { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: event.thinking } },
        {
          type: "content_block_delta",
          index,
          delta: { type: "signature_delta", signature: event.signature },
        },
        stop,
      ];
    case "tool_use":
      if (!streamToolCalls) return [];
      return [
        {
          type: "content_block_start",
          index,
          content_block: { type: "tool_use", id: event.id, name: event.name, input: {} },
        },
        {
          type: "content_block_delta",
          index,
          delta: { type: "input_json_delta", partial_json: JSON.stringify(event.input) },
        },
        stop,
      ];
    case "tool_result":
      if (!streamToolCalls) return [];
      return [
        {
          type: "content_block_start",
          index,
          content_block: {
            type: "tool_result",
            tool_use_id: event.toolUseId,
            content: event.content,
            is_error: event.isError,
          },
        },
        stop,
      ];
    case "redacted_thinking":
      // Not a block type of the API: kept in the session and the raw events, never streamed.
      return [];
    case "compaction":
      // A compaction is not a block of the answer: it shows in the transcript and last-compaction only.
      return [];
    case "input_usage":
      // Carried by message_start, not a block.
      return [];
  }
}

/** Whether an agent event is output of the turn (a turn with none clears a resumed session). */
export function isOutput(event: AgentEvent): boolean {
  return event.kind !== "compaction" && event.kind !== "input_usage";
}
