/**
 * How TRANSCRIPT-SHAPE compares a streamed reply with the transcript: each text block whole and in order,
 * whatever layout the transcript gives the blocks (one joined block, blank lines, several blocks), and
 * still strict about the words: a block missing, cut or out of order is caught.
 */
import { describe, expect, it } from "vitest";
import { firstBlockNotHeld } from "./common.ts";

const streamed = ["Sure!", "The file `notes.txt` contains:\n\n```\nn-abc\n```", "Anything else?"];

describe("firstBlockNotHeld", () => {
  it("finds every block however the transcript joined them", () => {
    expect(firstBlockNotHeld(streamed.join("\n\n"), streamed)).toBeUndefined();
    expect(firstBlockNotHeld(streamed.join("\n"), streamed)).toBeUndefined();
    expect(firstBlockNotHeld(streamed.join(" "), streamed)).toBeUndefined();
    expect(firstBlockNotHeld(`  ${streamed.join("\r\n\r\n")}\n`, streamed)).toBeUndefined();
  });

  it("names the block the transcript lacks, cut short or out of order", () => {
    expect(firstBlockNotHeld(streamed.slice(0, 2).join("\n\n"), streamed)).toBe("Anything else?");
    expect(
      firstBlockNotHeld(["Sure!", "The file `notes.txt` contains:", "Anything else?"].join("\n\n"), streamed),
    ).toBe(streamed[1]);
    expect(firstBlockNotHeld([streamed[2], streamed[0], streamed[1]].join("\n\n"), streamed)).toBe(
      "Anything else?",
    );
    expect(firstBlockNotHeld(streamed.join("\n\n").replace("n-abc", "n-abd"), streamed)).toBe(streamed[1]);
  });
});
