/**
 * The conformance suite's vocabulary: what a check is, what it may need from the user, and what a run
 * reports. The catalogue (catalogue.ts) is plain data of these shapes.
 */
import type { CheckContext } from "./context.ts";
import type { Exchange, FailureDetail, InputName, SkipKind, SuiteInputs } from "./records.ts";
import type { RunCost } from "./run-cost.ts";
import type { TurnTimeline } from "./sse/timing.ts";

export type { Exchange, FailureDetail, InputName, RunCost, SkipKind, SuiteInputs };

/** MUST: the API states it. SHOULD: client guidance. INFO: "not shown" behaviour; never fails a run. */
export type Level = "MUST" | "SHOULD" | "INFO";

export interface CheckDef {
  /** Stable id; users filter on it and CI reports name it. */
  id: string;
  level: Level;
  /** API section the check verifies, e.g. "Errors", "Endpoints/Send a message". */
  section: string;
  /** One line saying what the deployment must do. */
  title: string;
  needs: InputName[];
  /** Why the check has its level, in the API's words, where the level is not plain from the rule. */
  levelReason?: string;
  run(ctx: CheckContext): Promise<void>;
}

/**
 * `xfail`: a failure the run's expected-failures file lists (a known deviation); it does not fail the run.
 */
export type Outcome = "pass" | "fail" | "skip" | "xfail";

export interface CheckResult {
  id: string;
  level: Level;
  section: string;
  title: string;
  outcome: Outcome;
  ms: number;
  /** Why it failed or was skipped. */
  reason?: string;
  /** For a skip: whether an input was missing or the deployment could not show the fact. */
  skipKind?: SkipKind;
  /**
   * For a failure: true when the deployment kept the check from reaching the API (its proxy answered, TLS
   * or a body size limit refused the request), rather than the API answering wrongly.
   */
  prevented?: boolean;
  /** For `xfail`, and for a listed check that passed: the reason the expected-failures file gives. */
  expectedFailure?: string;
  details: FailureDetail[];
  /** Observations that do not decide the outcome (e.g. `ping` frames seen). */
  notes: string[];
  /** The requests the check made; the reports show them for failures. */
  exchanges: Exchange[];
  /** The turns whose timing the check judged, each with its timeline (every report shows these). */
  timelines?: Array<{ label: string; timeline: TurnTimeline }>;
}

export interface RunReport {
  runId: string;
  baseUrl: string;
  agent: string;
  startedAt: string;
  ms: number;
  results: CheckResult[];
  /** Cleanup problems (a conversation the run created could not be deleted). */
  warnings: string[];
  /**
   * Causes the deployment shows across checks (every tool call failing the same way), each one line with
   * the fix: reports name them before the checks they explain.
   */
  findings?: string[];
  /** What the run cost the deployment: turns, tokens, total_cost_usd (absent in reports of older runs). */
  cost?: RunCost;
}
