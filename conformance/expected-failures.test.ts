/** The expected-failures baseline and the verdict it feeds: parsing, stale entries, and what the summary says. */
import { describe, expect, it } from "vitest";
import { applyExpectedFailure, ExpectedFailuresError, parseExpectedFailures } from "./expected-failures.ts";
import { summarize, summaryText } from "./reports/console.ts";
import { junitReport } from "./reports/junit.ts";
import type { CheckResult, Level, Outcome, RunReport } from "./types.ts";

const KNOWN = ["AUTH-401-MISSING", "SSE-CONTENT-TYPE", "LIMIT-ATTACHMENT-SIZE", "FLOW-INVOKE"];

describe("parseExpectedFailures", () => {
  it("reads a YAML list, a JSON list, and an object holding the list", () => {
    const yaml = "- id: AUTH-401-MISSING\n  reason: the gateway answers 403 (ticket OPS-12)\n";
    expect(parseExpectedFailures(yaml, KNOWN)).toEqual([
      { id: "AUTH-401-MISSING", reason: "the gateway answers 403 (ticket OPS-12)" },
    ]);
    const json = JSON.stringify([{ id: "SSE-CONTENT-TYPE", reason: "charset added by the CDN" }]);
    expect(parseExpectedFailures(json, KNOWN)).toEqual([
      { id: "SSE-CONTENT-TYPE", reason: "charset added by the CDN" },
    ]);
    const wrapped = "expectedFailures:\n  - {id: FLOW-INVOKE, reason: flows not deployed yet}\n";
    expect(parseExpectedFailures(wrapped, KNOWN)).toHaveLength(1);
  });

  it("refuses an unknown id, a missing reason, a duplicate and text that is not a list, naming the entry", () => {
    const bad = (text: string) => () => parseExpectedFailures(text, KNOWN);
    expect(bad("- {id: NO-SUCH-CHECK, reason: x}")).toThrow(/entry 1: NO-SUCH-CHECK is not a check id/);
    expect(bad("- {id: FLOW-INVOKE}")).toThrow(/entry 1 \(FLOW-INVOKE\): needs a "reason"/);
    expect(bad("- {id: FLOW-INVOKE, reason: a}\n- {id: FLOW-INVOKE, reason: b}")).toThrow(/entry 2: .*twice/);
    expect(bad("id: FLOW-INVOKE")).toThrow(ExpectedFailuresError);
    expect(bad("- [")).toThrow(/not YAML or JSON/);
  });
});

function result(id: string, level: Level, outcome: Outcome, extra: Partial<CheckResult> = {}): CheckResult {
  return {
    id,
    level,
    section: "Errors",
    title: id,
    outcome,
    ms: 1,
    reason: outcome === "pass" ? undefined : `${id} reason`,
    details: [],
    notes: [],
    exchanges: [],
    ...extra,
  };
}

function reportOf(results: CheckResult[]): RunReport {
  return {
    runId: "r",
    baseUrl: "http://x",
    agent: "a",
    startedAt: new Date(0).toISOString(),
    ms: 10,
    results,
    warnings: [],
  };
}

describe("the verdict", () => {
  const listed = { id: "X", reason: "known: gateway rewrites it" };

  it("turns a listed failure into an expected failure that does not fail the run", () => {
    const r = applyExpectedFailure(result("X", "MUST", "fail"), listed);
    expect(r).toMatchObject({ outcome: "xfail", expectedFailure: listed.reason, reason: "X reason" });
    const s = summarize(reportOf([r, result("Y", "MUST", "pass")]));
    expect(s).toMatchObject({ verdict: "pass", mustFailed: 0, expectedFailures: 1 });
    expect(summaryText(reportOf([r]))).toContain("1 expected failure listed in the baseline");
    expect(junitReport(reportOf([r]))).toMatch(
      /<skipped message="expected failure \(known: gateway rewrites it\): X reason">/,
    );
    expect(junitReport(reportOf([r]))).toContain('failures="0"');
  });

  it("fails the run when a listed check passes (stale baseline), at any level", () => {
    const r = applyExpectedFailure(result("X", "INFO", "pass"), listed);
    expect(r.outcome).toBe("fail");
    expect(r.reason).toContain("the baseline is stale; remove the entry");
    const s = summarize(reportOf([r]));
    expect(s).toMatchObject({ verdict: "fail", staleExpectations: ["X"], mustFailed: 0 });
    const text = summaryText(reportOf([r]));
    expect(text).toContain("1 listed expected failure passed (stale baseline; remove it): X");
    expect(text).toMatch(/verdict: FAIL\n$/);
  });

  it("leaves a listed check that was skipped a skip, noted", () => {
    const r = applyExpectedFailure(result("X", "MUST", "skip", { skipKind: "input" }), listed);
    expect(r.outcome).toBe("skip");
    expect(r.notes).toContain("listed in the expected-failures file; it did not run");
  });

  it("says how many MUST checks did not run, and why, and which failures the deployment caused", () => {
    const report = reportOf([
      result("A", "MUST", "pass"),
      result("B", "MUST", "skip", { skipKind: "input", reason: "needs --viewer-key" }),
      result("C", "MUST", "skip", { skipKind: "unobservable" }),
      result("D", "SHOULD", "skip", { skipKind: "input" }),
      result("E", "MUST", "fail", { prevented: true }),
    ]);
    const s = summarize(report);
    expect(s).toMatchObject({
      mustNotRun: 2,
      skippedForInput: 2,
      skippedUnobservable: 1,
      prevented: 1,
      verdict: "fail",
    });
    const text = summaryText(report);
    expect(text).toContain(
      "skipped: 2 for want of an input that was not given, 1 because the deployment could not show the fact",
    );
    expect(text).toContain("2 MUST checks did not run (1 for want of an input, 1 not showable)");
    expect(text).toContain("1 failure came from the deployment answering instead of the API");
    expect(text).toContain("1 MUST check failed: E");
  });
});
