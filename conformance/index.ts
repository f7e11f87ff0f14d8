/**
 * The conformance suite as a library: run it against a deployment, list its checks, write its reports.
 * The `agent-api check` command is a thin layer over this module (flags and environment → options).
 * It knows the API (the bundled spec, generated/protocol.ts), never our server: nothing reachable from here
 * imports reference-server/, which index.test.ts keeps true.
 */
import { catalogue } from "./catalogue.ts";
import { summarize } from "./reports/console.ts";
import { DEFAULT_CONCURRENCY, type RunOptions, runSuite, selectChecks } from "./runner.ts";
import type { CheckDef, Level, RunReport } from "./types.ts";

export type { RetryPolicy } from "./context.ts";
export { renderCoverage, type SeedRule, seedRules } from "./coverage.ts";
export {
  type Diagnosis,
  describeDiagnosis,
  diagnoseForeignResponse,
  diagnoseTransportError,
} from "./deployment-errors.ts";
export {
  applyExpectedFailure,
  type ExpectedFailure,
  ExpectedFailuresError,
  parseExpectedFailures,
} from "./expected-failures.ts";
/** Whether a deployment answers at all, through the proxy the suite would use (null when it does). */
export { type ConnectionOptions, reachability } from "./http.ts";
export {
  type Counts,
  progressLine,
  type Summary,
  summarize,
  summaryText,
  timelineLines,
} from "./reports/console.ts";
export { htmlReport } from "./reports/html.ts";
export { jsonReport } from "./reports/json.ts";
export { junitReport } from "./reports/junit.ts";
export { costText, type RunCost, TurnMeter, turnBoundText } from "./run-cost.ts";
export { DEFAULT_SPEC_URL, SpecValidator } from "./spec-validator.ts";
export {
  type BlockSeen,
  checkTurnStream,
  type GrammarCode,
  type GrammarViolation,
  replyText,
  type TurnStreamReading,
} from "./sse/grammar.ts";
export {
  type BlockArrival,
  readTimedStream,
  type StreamTiming,
  type TurnTimeline,
  timelineText,
  turnTimeline,
} from "./sse/timing.ts";
export type {
  CheckDef,
  CheckResult,
  Exchange,
  FailureDetail,
  InputName,
  Level,
  Outcome,
  RunReport,
  SkipKind,
  SuiteInputs,
} from "./types.ts";
export { catalogue, DEFAULT_CONCURRENCY, selectChecks };

export interface ConformanceOptions extends Omit<RunOptions, "checks"> {
  /** The checks to choose from; default the whole catalogue. */
  checks?: CheckDef[];
}

/** The whole result of a run: every check's outcome, and the counts by outcome. */
export interface ConformanceResults extends RunReport {
  /**
   * True when every MUST check that ran passed and no listed expected failure passed (what `agent-api check`
   * exits 0 on).
   */
  passed: boolean;
}

/**
 * Runs the suite against `options.inputs.baseUrl`. Checks that need an input the caller did not give are
 * skipped with a reason naming that input; the run deletes every conversation it created.
 */
export async function runConformance(options: ConformanceOptions): Promise<ConformanceResults> {
  const report = await runSuite({ ...options, checks: options.checks ?? catalogue });
  return { ...report, passed: summarize(report).verdict === "pass" };
}

/** The levels a run may be restricted to, strictest first. */
export const levels: readonly Level[] = ["MUST", "SHOULD", "INFO"];
