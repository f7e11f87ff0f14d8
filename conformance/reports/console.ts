/**
 * What `agent-api check` prints: one progress line per check as it finishes, then a short summary.
 * Only MUST failures fail a run; SHOULD and INFO failures are shown but do not change the exit code.
 */
import { timelineText } from "../sse/timing.ts";
import type { CheckResult, Level, Outcome, RunReport } from "../types.ts";

const WORD: Record<Outcome, string> = { pass: "PASS", fail: "FAIL", skip: "SKIP" };
const COLOUR: Record<Outcome, string> = { pass: "\u001b[32m", fail: "\u001b[31m", skip: "\u001b[33m" };
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
}

export interface Summary extends Counts {
  total: number;
  /** MUST checks that failed: the run fails (exit 1) when this is not 0. */
  mustFailed: number;
  byLevel: Record<Level, Counts>;
}

export function summarize(report: RunReport): Summary {
  const byLevel = Object.fromEntries(LEVELS.map((l) => [l, { passed: 0, failed: 0, skipped: 0 }])) as Record<
    Level,
    Counts
  >;
  const total: Counts = { passed: 0, failed: 0, skipped: 0 };
  for (const r of report.results) {
    const key = r.outcome === "pass" ? "passed" : r.outcome === "fail" ? "failed" : "skipped";
    byLevel[r.level][key]++;
    total[key]++;
  }
  return { total: report.results.length, ...total, mustFailed: byLevel.MUST.failed, byLevel };
}

function counts(c: Counts): string {
  return `${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`;
}

/** A few lines for the end of the run; starts with a blank line and ends with a newline. */
export function summaryText(report: RunReport): string {
  const s = summarize(report);
  const lines = [
    "",
    `${s.total} checks in ${(report.ms / 1000).toFixed(1)} s: ${counts(s)}`,
    ...LEVELS.filter((l) => {
      const c = s.byLevel[l];
      return c.passed + c.failed + c.skipped > 0;
    }).map(
      (l) => `  ${l.padEnd(6)} ${counts(s.byLevel[l])}${l === "INFO" ? " (INFO never fails a run)" : ""}`,
    ),
    ...report.warnings.map((w) => `warning: ${oneLine(w)}`),
  ];
  if (s.mustFailed > 0) {
    const ids = report.results.filter((r) => r.level === "MUST" && r.outcome === "fail").map((r) => r.id);
    // The progress lines above name every failure; a failing deployment can have dozens, so cut the list.
    const named =
      ids.length > 10 ? `${ids.slice(0, 10).join(", ")} and ${ids.length - 10} more` : ids.join(", ");
    lines.push(`${s.mustFailed} MUST ${s.mustFailed === 1 ? "check" : "checks"} failed: ${named}`);
  } else {
    lines.push("all MUST checks that ran passed");
  }
  return `${lines.join("\n")}\n`;
}
