/**
 * Turns the engine's AgentEvents into the seed's SSE events: whole blocks (start, one complete delta,
 * stop) with a running index, tool blocks only when `stream_tool_calls` is true, and the usage figures.
 */
import type { components } from "../../generated/api-types.ts";
import type { AgentEvent } from "../engine/types.ts";

export type StreamEvent = components["schemas"]["StreamEvent"];
type Usage = components["schemas"]["StreamUsage"];

/** Rough token count (4 characters a token): the scripted engine has no tokenizer, and usage must be plausible. */
export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

/** US dollars per million tokens (input, output): a fixed list price, so `total_cost_usd` is reproducible. */
const PRICE_PER_MTOK = { input: 3, output: 15 };

export function usageFor(inputTokens: number, outputTokens: number): Usage {
  const cost = (inputTokens * PRICE_PER_MTOK.input + outputTokens * PRICE_PER_MTOK.output) / 1_000_000;
  return {
    input_tokens: inputTokens,
    output_tokens: outputTokens,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
    total_cost_usd: Math.round(cost * 1e8) / 1e8,
  };
}

export function messageStart(id: string, model: string, inputTokens: number): StreamEvent {
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
      usage: { input_tokens: inputTokens, output_tokens: 0 },
    },
  };
}

export function messageEnd(usage: Usage): StreamEvent[] {
  return [
    { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage },
    { type: "message_stop" },
  ];
}

export function errorEvent(message: string): StreamEvent {
  return { type: "error", error: { type: "api_error", message } };
}

/** The events of one agent event as a block at `index`; [] when it is not streamed. */
export function blockEvents(event: AgentEvent, index: number, streamToolCalls: boolean): StreamEvent[] {
  const stop: StreamEvent = { type: "content_block_stop", index };
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
    case "compaction":
      // A compaction is not a block of the answer: it shows in the transcript and last-compaction only.
      return [];
  }
}

/** Whether an agent event is output of the turn (a turn with none clears a resumed session). */
export function isOutput(event: AgentEvent): boolean {
  return event.kind !== "compaction";
}

/** Characters of output an event carries, for the output token estimate. */
export function outputChars(event: AgentEvent): string {
  switch (event.kind) {
    case "text":
      return event.text;
    case "thinking":
      return event.thinking;
    case "tool_use":
      return JSON.stringify(event.input);
    default:
      return "";
  }
}
