/**
 * The verdict the reference-server runs of the suite share (test support, not part of the library): every
 * MUST check that ran passed, every MUST skip is an expected one, and the run raised no warning.
 */
import type { RunReport } from "./types.ts";

/** MUST checks that may legitimately skip against the demo, with why. */
export const EXPECTED_MUST_SKIPS: Record<string, string> = {
  "STATE-RACE-NO-MEMORY": "skips if the session was recorded before the follow-up could be sent",
  "SSE-IDLE-SURVIVES": "opt-in (--idle-seconds): a turn quiet for a minute; the proxies test runs it",
};

/** What a run got wrong, as lines a failing assertion prints: empty lists for a clean run. */
export function mustVerdict(report: RunReport): {
  failures: string[];
  unexpectedSkips: string[];
  warnings: string[];
} {
  return {
    failures: report.results
      .filter((r) => r.level === "MUST" && r.outcome === "fail")
      .map((r) => `${r.id}: ${r.reason} ${JSON.stringify(r.details.slice(0, 2))}`),
    unexpectedSkips: report.results
      .filter((r) => r.level === "MUST" && r.outcome === "skip" && !(r.id in EXPECTED_MUST_SKIPS))
      .map((r) => `${r.id}: ${r.reason}`),
    warnings: report.warnings,
  };
}
