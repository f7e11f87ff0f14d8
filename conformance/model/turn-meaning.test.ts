import { describe, expect, it } from "vitest";
import type { TurnStreamReading } from "../sse/grammar.ts";
import { LearnedChoices } from "./choices.ts";
import { Mismatch } from "./mismatch.ts";
import { judgeStopReason } from "./turn-meaning.ts";

// Only the fields judgeStopReason reads; the rest of a reading is the grammar's concern.
const ended = (stopReason: string) => ({ end: "message_stop", stopReason }) as unknown as TurnStreamReading;

describe("judgeStopReason (Endpoints/Send a message: stream_tool_calls only adds blocks)", () => {
  it("fails a flagged turn that ends otherwise than the plain turns do", () => {
    const choices = new LearnedChoices();
    judgeStopReason(ended("end_turn"), false, choices);
    expect(() => judgeStopReason(ended("tool_use"), true, choices)).toThrow(Mismatch);
  });

  it("takes a model's refusal or token limit on a flagged turn as the model's, not the flag's", () => {
    const choices = new LearnedChoices();
    judgeStopReason(ended("end_turn"), false, choices);
    expect(() => judgeStopReason(ended("refusal"), true, choices)).not.toThrow();
    expect(() => judgeStopReason(ended("max_tokens"), true, choices)).not.toThrow();
  });

  it("does not learn the plain reason from a refused turn, so a later flagged turn is still judged", () => {
    const choices = new LearnedChoices();
    judgeStopReason(ended("refusal"), false, choices);
    judgeStopReason(ended("end_turn"), false, choices);
    expect(() => judgeStopReason(ended("tool_use"), true, choices)).toThrow(Mismatch);
  });
});
