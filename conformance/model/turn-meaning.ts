/**
 * What the fields of a turn's stream hold (Events; Endpoints/Send a message), judged on every turn a check or
 * the explorer reads: `message_start.message.id`, `message_delta.usage` and its `total_cost_usd`, and the stop
 * reason with `stream_tool_calls`. The grammar (stream.ts) judges their types; these rules judge their values.
 */
import { carriesOutput, type TurnStreamReading } from "../sse/grammar.ts";
import type { LearnedChoices } from "./choices.ts";
import { expectRule } from "./mismatch.ts";
import { defineRules } from "./rules.ts";
import { sendRules } from "./send-flags.ts";

export const turnMeaningRules = defineRules("turn", {
  messageId: {
    section: "Events",
    check: "MEANING-MESSAGE-START",
    text: "`message_start.message.id` is a non-empty string, a different one for each turn",
  },
  modelIsId: {
    section: "Events",
    check: "MEANING-MESSAGE-START",
    text: "`message_start.message.model` names the turn's model as the messages API does, by its identifier: a model of the agent's list is named by its `id`, not its `display_name`",
  },
  inputCounted: {
    section: "Events",
    check: "MEANING-USAGE-COUNTS",
    text: "`message_delta.usage` counts the turn: a turn with output reads some input (input, cache read or cache creation tokens > 0)",
  },
  costDollars: {
    section: "Events",
    check: "MEANING-USAGE-COUNTS",
    text: "`total_cost_usd` is the turn's cost in US dollars: not negative, and within what the dearest list prices charge for the turn's tokens (not cents)",
  },
  stopWithTools: {
    section: "Endpoints/Send a message",
    check: "SSE-STOP-REASON-TOOLS",
    text: "`stream_tool_calls` only adds tool blocks: a completed turn ends with the stop reason the deployment's turns end with without it (`end_turn`)",
  },
});

/**
 * US dollars per token no model's list price reaches: four times the dearest widely used prices per million
 * tokens (output 75, input 15, cache write 18.75, cache read 1.5). A cost in cents is a hundred times the
 * dollars, so it passes these on any priced model the demo or a real deployment uses.
 */
const CEILING = { output: 3e-4, input: 6e-5, cache_creation: 7.5e-5, cache_read: 6e-6 } as const;

const num = (usage: Record<string, unknown>, field: string) =>
  typeof usage[field] === "number" && Number.isFinite(usage[field]) ? (usage[field] as number) : 0;

/** The most a turn with these counts can cost in US dollars. */
export function costCeiling(usage: Record<string, unknown>): number {
  return (
    num(usage, "output_tokens") * CEILING.output +
    num(usage, "input_tokens") * CEILING.input +
    num(usage, "cache_creation_input_tokens") * CEILING.cache_creation +
    num(usage, "cache_read_input_tokens") * CEILING.cache_read
  );
}

/** Judges the usage of a turn whose stream carried output. */
export function judgeUsage(usage: Record<string, unknown>): void {
  const input =
    num(usage, "input_tokens") +
    num(usage, "cache_read_input_tokens") +
    num(usage, "cache_creation_input_tokens");
  expectRule(
    turnMeaningRules.inputCounted,
    input > 0,
    "input, cache read or cache creation tokens > 0",
    JSON.stringify(usage),
  );
  judgeCost(usage);
}

/** `total_cost_usd` in dollars: judged on every turn, with or without output. */
export function judgeCost(usage: Record<string, unknown>): void {
  const cost = usage.total_cost_usd;
  if (typeof cost !== "number") return;
  const ceiling = costCeiling(usage);
  // Rounding to the cent's millionth is the finest a deployment needs to show: allow it above the ceiling.
  expectRule(
    turnMeaningRules.costDollars,
    cost >= 0 && cost <= ceiling + 1e-6,
    `between 0 and ${ceiling.toPrecision(3)} US dollars for ${JSON.stringify(usage)}`,
    cost,
  );
}

/** The run's message ids so far: one per turn. */
export function judgeMessageId(reading: TurnStreamReading, seen: Set<string>): void {
  const id = reading.messageId;
  expectRule(
    turnMeaningRules.messageId,
    typeof id === "string" && id.trim() !== "",
    "a non-empty string",
    JSON.stringify(id),
  );
  expectRule(
    turnMeaningRules.messageId,
    !seen.has(id as string),
    "an id no earlier turn of the run had",
    JSON.stringify(id),
  );
  seen.add(id as string);
}

const PLAIN_STOP = "stop reason of a completed turn without stream_tool_calls";

/** Stop reasons of the Messages API that the model chooses, whatever the deployment sends it. */
const MODEL_ENDINGS = new Set(["refusal", "max_tokens"]);

/**
 * The stop reason of a completed turn: learned from the first one without `stream_tool_calls` (the API shows
 * only `end_turn`; another is INFO, SSE-STOP-REASON); a turn with the flag whose reason departs from an
 * `end_turn` learned so is a MUST failure, since the flag only adds blocks to the stream.
 */
export function judgeStopReason(
  reading: TurnStreamReading,
  streamToolCalls: boolean,
  choices: LearnedChoices,
): void {
  if (reading.end !== "message_stop" || typeof reading.stopReason !== "string") return;
  // The model's own endings (it declined, or ran out of tokens) say nothing of the flag: a real model gives
  // them now and then with or without it, so such a turn neither teaches the plain reason nor is judged.
  if (MODEL_ENDINGS.has(reading.stopReason)) return;
  if (!streamToolCalls) {
    if (choices.get(PLAIN_STOP) === undefined) choices.observe(PLAIN_STOP, reading.stopReason);
    return;
  }
  if (choices.get(PLAIN_STOP) !== "end_turn") return;
  expectRule(
    turnMeaningRules.stopWithTools,
    reading.stopReason === "end_turn",
    '"end_turn" (as turns without stream_tool_calls end)',
    JSON.stringify(reading.stopReason),
  );
}

// Whether a stream's blocks carry output lives with the decoding (sse/grammar.ts), which the run's context
// reads too without importing the model.
export { carriesOutput };

/** What judging turns one after another remembers: the message ids seen, the stop reason learned. */
export interface TurnMemory {
  messageIds: Set<string>;
  choices: LearnedChoices;
}

/**
 * Every rule of a turn's fields on one stream read to its end: the usage of a turn with output (output and
 * input counted, the cost in dollars), the cost of any other, the message id, the stop reason with
 * `stream_tool_calls`. Throws the first Mismatch.
 */
export function judgeTurnMeaning(
  reading: TurnStreamReading,
  streamToolCalls: boolean,
  memory: TurnMemory,
): void {
  const usage = reading.usage;
  if (usage && typeof usage.output_tokens === "number" && carriesOutput(reading.blocks)) {
    expectRule(
      sendRules.usageCounts,
      usage.output_tokens > 0,
      "output_tokens > 0 for a turn with output",
      usage.output_tokens,
    );
    judgeUsage(usage);
  } else if (usage) judgeCost(usage);
  if (reading.events.some((e) => e.name === "message_start")) judgeMessageId(reading, memory.messageIds);
  judgeStopReason(reading, streamToolCalls, memory.choices);
}

/**
 * The model a turn's message_start names, against the agent's models list: where it is the display name of an
 * entry and the id of none, the stream named the model the way a client cannot send back in `model`.
 */
export function judgeModelNamed(model: unknown, entries: Array<Record<string, unknown>> | undefined): void {
  if (typeof model !== "string" || !entries) return;
  const ids = new Set(entries.map((e) => e.id));
  const byDisplay = entries.find((e) => e.display_name === model && e.id !== model);
  expectRule(
    turnMeaningRules.modelIsId,
    ids.has(model) || byDisplay === undefined,
    byDisplay ? JSON.stringify(byDisplay.id) : "a model id",
    JSON.stringify(model),
  );
}
