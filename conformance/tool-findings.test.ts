import { describe, expect, it } from "vitest";
import type { StreamEventSeen } from "./sse/grammar.ts";
import { createToolResultsSeen, deploymentFindings, recordToolResults } from "./tool-findings.ts";

function toolResult(content: unknown, isError: boolean): StreamEventSeen {
  const data = {
    type: "content_block_start",
    index: 1,
    content_block: { type: "tool_result", tool_use_id: "t", content, is_error: isError },
  };
  return { name: "content_block_start", data, frameIndex: 0, frame: JSON.stringify(data) };
}

function findingsOf(...turns: StreamEventSeen[][]): string[] {
  const seen = createToolResultsSeen();
  for (const events of turns) recordToolResults(seen, events);
  return deploymentFindings(seen);
}

describe("the deployment-level tool finding", () => {
  const refusal = "tool execution refused: bubblewrap could not mount /proc";

  it("names the one error every tool result carried, with the fix", () => {
    const [finding, ...rest] = findingsOf(
      [toolResult(refusal, true)],
      [toolResult([{ type: "text", text: refusal }], true), toolResult(refusal, true)],
    );
    expect(rest).toEqual([]);
    expect(finding).toMatch(/^every tool call of this run failed the same way \(3 of 3 tool results/);
    expect(finding).toContain(`"${refusal}"`);
    expect(finding).toContain("Fix: make the deployment's tools run");
  });

  it("says nothing when one tool ran, when the errors differ, or on a single result", () => {
    expect(findingsOf([toolResult(refusal, true), toolResult("ok", false)])).toEqual([]);
    expect(findingsOf([toolResult(refusal, true), toolResult("no such file: a.txt", true)])).toEqual([]);
    expect(findingsOf([toolResult(refusal, true)])).toEqual([]);
    expect(findingsOf([])).toEqual([]);
  });
});
