/**
 * What `agent-api check` prints: one progress line per check as it finishes, then a short summary.
 * Only MUST failures fail a run; SHOULD and INFO failures are shown but do not change the exit code.
 */
import { isStaleExpectation } from "../expected-failures.ts";
import { costText } from "../run-cost.ts";
import { timelineText } from "../sse/timing.ts";
import type { CheckResult, Level, Outcome, RunReport } from "../types.ts";

const WORD: Record<Outcome, string> = { pass: "PASS", fail: "FAIL", skip: "SKIP", xfail: "XFAIL" };
const COLOUR: Record<Outcome, string> = {
  pass: "\u001b[32m",
  fail: "\u001b[31m",
  skip: "\u001b[33m",
  xfail: "\u001b[35m",
};
const DIM = "\u001b[2m";
const RESET = "\u001b[0m";
const LEVELS: Level[] = ["MUST", "SHOULD", "INFO"];

/**
 * Makes text from the deployment safe for one terminal line: line breaks and tabs become spaces, other
 * control characters (an ESC could recolour or clear the user's terminal) become `\uXXXX`.
 */
function oneLine(text: string): string {
  return text.replace(/[\t\n\r]+/g, " ").replace(
    // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
    /[\u0000-\u001f\u007f-\u009f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/** `FAIL MUST   AUTH-401-MISSING                        12 ms  reason` */
export function progressLine(result: CheckResult, color: boolean): string {
  const word = color ? `${COLOUR[result.outcome]}${WORD[result.outcome]}${RESET}` : WORD[result.outcome];
  const time = `${String(result.ms).padStart(6)} ms`;
  let line = `${word} ${result.level.padEnd(6)} ${result.id.padEnd(36)} ${time}`;
  if (result.outcome !== "pass" && result.reason) {
    let reason = oneLine(result.reason);
    if (result.outcome === "xfail") reason = `expected: ${oneLine(result.expectedFailure ?? "")}; ${reason}`;
    if (result.outcome === "fail" && result.level === "INFO") reason += " (INFO: does not fail the run)";
    line += `  ${color ? `${DIM}${reason}${RESET}` : reason}`;
  }
  return line;
}

/** The timelines a check judged, one indented line each (empty when it judged none). */
export function timelineLines(result: CheckResult, color: boolean): string[] {
  return (result.timelines ?? []).map(({ label, timeline }) => {
    const text = `${oneLine(label)}: ${timelineText(timeline)}`;
    return `       ${color ? `${DIM}${text}${RESET}` : text}`;
  });
}

export interface Counts {
  passed: number;
  failed: number;
  skipped: number;
  /** Failures the expected-failures file lists: shown, never failing a run. */
  expectedFailures: number;
  /** Skipped for want of an input that was not given (a flag). */
  skippedForInput: number;
  /** Skipped because the deployment could not show the fact (inconclusive). */
  skippedUnobservable: number;
  /** Failures where the deployment (its proxy, TLS, a body limit) answered instead of the API. */
  prevented: number;
}

export interface Summary extends Counts {
  total: number;
  /** MUST checks that failed: the run fails (exit 1) when this is not 0. */
  mustFailed: number;
  /** MUST checks that did not run (skipped): the verdict says nothing about those rules. */
  mustNotRun: number;
  /** Checks the expected-failures file lists that passed: the run fails (exit 1) when there is any. */
  staleExpectations: string[];
  /** "pass" exactly when no MUST check failed and no expected failure went stale (exit 0). */
  verdict: "pass" | "fail";
  byLevel: Record<Level, Counts>;
}

function zeroCounts(): Counts {
  return {
    passed: 0,
    failed: 0,
    skipped: 0,
    expectedFailures: 0,
    skippedForInput: 0,
    skippedUnobservable: 0,
    prevented: 0,
  };
}

function tallyInto(c: Counts, r: CheckResult): void {
  if (r.outcome === "pass") c.passed++;
  else if (r.outcome === "xfail") c.expectedFailures++;
  else if (r.outcome === "fail") {
    c.failed++;
    if (r.prevented) c.prevented++;
  } else {
    c.skipped++;
    if (r.skipKind === "input") c.skippedForInput++;
    else c.skippedUnobservable++;
  }
}

export function summarize(report: RunReport): Summary {
  const byLevel = Object.fromEntries(LEVELS.map((l) => [l, zeroCounts()])) as Record<Level, Counts>;
  const total = zeroCounts();
  for (const r of report.results) {
    tallyInto(byLevel[r.level], r);
    tallyInto(total, r);
  }
  const staleExpectations = report.results.filter(isStaleExpectation).map((r) => r.id);
  const mustFailed = byLevel.MUST.failed;
  return {
    total: report.results.length,
    ...total,
    mustFailed,
    mustNotRun: byLevel.MUST.skipped,
    staleExpectations,
    verdict: mustFailed === 0 && staleExpectations.length === 0 ? "pass" : "fail",
    byLevel,
  };
}

function counts(c: Counts): string {
  const expected = c.expectedFailures > 0 ? `, ${plural(c.expectedFailures, "expected failure")}` : "";
  return `${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped${expected}`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function idList(ids: string[]): string {
  // The progress lines above name every one; a failing deployment can have dozens, so cut the list.
  return ids.length > 10 ? `${ids.slice(0, 10).join(", ")} and ${ids.length - 10} more` : ids.join(", ");
}

/** A few lines for the end of the run; starts with a blank line and ends with a newline. */
export function summaryText(report: RunReport): string {
  const s = summarize(report);
  const lines = [
    "",
    // A cause shared by many failures goes before their count, so it is read first.
    ...(report.findings ?? []).map((f) => `deployment: ${oneLine(f)}`),
    `${s.total} checks in ${(report.ms / 1000).toFixed(1)} s: ${counts(s)}`,
    ...LEVELS.filter((l) => {
      const c = s.byLevel[l];
      return c.passed + c.failed + c.skipped > 0;
    }).map(
      (l) => `  ${l.padEnd(6)} ${counts(s.byLevel[l])}${l === "INFO" ? " (INFO never fails a run)" : ""}`,
    ),
    ...(report.cost ? [`cost to the deployment: ${costText(report.cost)}`] : []),
    ...report.warnings.map((w) => `warning: ${oneLine(w)}`),
  ];
  if (s.skipped > 0) {
    lines.push(
      `skipped: ${s.skippedForInput} for want of an input that was not given, ${s.skippedUnobservable} because the deployment could not show the fact`,
    );
  }
  if (s.mustNotRun > 0) {
    const m = s.byLevel.MUST;
    lines.push(
      `${plural(s.mustNotRun, "MUST check")} did not run (${m.skippedForInput} for want of an input, ${m.skippedUnobservable} not showable): the verdict says nothing about ${s.mustNotRun === 1 ? "it" : "them"}`,
    );
  }
  if (s.prevented > 0) {
    lines.push(
      `${plural(s.prevented, "failure")} came from the deployment answering instead of the API (proxy page, TLS, body size limit): see each reason for the fix`,
    );
  }
  if (s.expectedFailures > 0) {
    lines.push(
      `${plural(s.expectedFailures, "expected failure")} listed in the baseline (not failing the run)`,
    );
  }
  if (s.staleExpectations.length > 0) {
    lines.push(
      `${plural(s.staleExpectations.length, "listed expected failure")} passed (stale baseline; remove ${s.staleExpectations.length === 1 ? "it" : "them"}): ${idList(s.staleExpectations)}`,
    );
  }
  if (s.mustFailed > 0) {
    const ids = report.results
      .filter((r) => r.level === "MUST" && r.outcome === "fail" && !isStaleExpectation(r))
      .map((r) => r.id);
    if (ids.length > 0) lines.push(`${plural(ids.length, "MUST check")} failed: ${idList(ids)}`);
  }
  lines.push(
    s.verdict === "pass"
      ? `verdict: PASS: all MUST checks that ran passed (${s.byLevel.MUST.passed})`
      : "verdict: FAIL",
  );
  return `${lines.join("\n")}\n`;
}
