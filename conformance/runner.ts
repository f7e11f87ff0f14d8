/**
 * Runs a selection of the catalogue against one deployment: bounded concurrency, skip-with-reason for
 * missing inputs, spec violations turned into failures, and cleanup of every conversation the run made.
 *
 * A small runner of our own rather than vitest's Node API: the checks need ids, levels, skip reasons,
 * shared set-up across checks and a cleanup that always runs, and a user's `agent-api check` should not
 * pay for (or depend on) vite's transform pipeline at run time.
 */
import type { Dispatcher } from "undici";
import { CheckContext, createRunState, type RetryPolicy, type RunState } from "./context.ts";
import { applyExpectedFailure, type ExpectedFailure, ExpectedFailuresError } from "./expected-failures.ts";
import { type ExploreOptions, explore } from "./explorer/explore.ts";
import { type ConnectionOptions, createDispatcher } from "./http.ts";
import { CheckFailure, CheckSkip, DeploymentPrevented } from "./outcomes.ts";
import { SpecValidator } from "./spec-validator.ts";
import { attributeExplorerSweepFindings, attributeSweepFindings, failResult } from "./sweeps/index.ts";
import { deploymentFindings } from "./tool-findings.ts";
import type {
  CheckDef,
  CheckResult,
  ExplorerSummary,
  InputName,
  Level,
  RunReport,
  SuiteInputs,
} from "./types.ts";

/** Checks run at once, unless the caller says otherwise. */
export const DEFAULT_CONCURRENCY = 8;

const LEVEL_RANK: Record<Level, number> = { MUST: 0, SHOULD: 1, INFO: 2 };

export interface RunOptions {
  inputs: SuiteInputs;
  checks: CheckDef[];
  /** Ids to run; an entry ending in `*` is a prefix. Empty or undefined: all. */
  only?: string[];
  /** Run checks of this level and stricter (MUST < SHOULD < INFO). Default INFO: everything. */
  level?: Level;
  /** Checks run at once; default DEFAULT_CONCURRENCY (8). */
  concurrency?: number;
  /** Bound of one request, a whole turn included; default REQUEST_TIMEOUT_MS (180 s). */
  requestTimeoutMs?: number;
  /** `--ca` (a private CA's certificate) and `--http2`. */
  connection?: ConnectionOptions;
  /** `--max-turns`: turns the run may send; a check that needs one more is skipped, saying so. */
  maxTurns?: number;
  /** Retries of a 429/503/529 answer before the check is skipped; default DEFAULT_RETRY. */
  retry?: RetryPolicy;
  validator?: SpecValidator;
  /**
   * Known deviations: a listed check's failure is an expected failure (`xfail`), a listed check that passes
   * fails. An id that is not one of `checks` is refused (ExpectedFailuresError) before anything runs.
   */
  expectedFailures?: ExpectedFailure[];
  /** Called as each check finishes (live progress). */
  onResult?: (result: CheckResult) => void;
  /**
   * How a skip reason names a missing input; default its name in SuiteInputs (`memberKey`). The CLI names
   * its flag instead (`--member-key`).
   */
  inputLabel?: (name: InputName) => string;
  /**
   * The explorer's budget (conformance/explorer/): sequences and seed. Undefined or `runs: 0`: no exploration
   * (the library's default; `agent-api check` explores by default).
   */
  explore?: ExploreOptions;
}

export function selectChecks(
  checks: CheckDef[],
  only: string[] | undefined,
  level: Level = "INFO",
): CheckDef[] {
  const wanted = (only ?? []).map((s) => s.trim()).filter(Boolean);
  return checks.filter((check) => {
    if (LEVEL_RANK[check.level] > LEVEL_RANK[level]) return false;
    if (wanted.length === 0) return true;
    return wanted.some((w) => (w.endsWith("*") ? check.id.startsWith(w.slice(0, -1)) : check.id === w));
  });
}

export function missingInputs(check: CheckDef, inputs: SuiteInputs): InputName[] {
  return check.needs.filter((name) => {
    const value = inputs[name];
    return value === undefined || value === "" || (Array.isArray(value) && value.length === 0);
  });
}

export async function runSuite(options: RunOptions): Promise<RunReport> {
  const started = performance.now();
  const startedAt = new Date().toISOString();
  const expected = new Map((options.expectedFailures ?? []).map((e) => [e.id, e]));
  const unknown = [...expected.keys()].filter((id) => !options.checks.some((c) => c.id === id));
  if (unknown.length > 0) {
    throw new ExpectedFailuresError(`expected failures name no check: ${unknown.join(", ")}`);
  }
  const validator = options.validator ?? (await SpecValidator.load());
  const dispatcher: Dispatcher = createDispatcher(options.requestTimeoutMs, options.connection);
  const run = createRunState(options.inputs, validator, dispatcher, {
    requestTimeoutMs: options.requestTimeoutMs,
    retry: options.retry,
    connection: options.connection,
    maxTurns: options.maxTurns,
  });
  const selected = selectChecks(options.checks, options.only, options.level);
  const results: CheckResult[] = [];
  const warnings: string[] = [];
  let explorer: ExplorerSummary | undefined;
  try {
    let next = 0;
    const worker = async () => {
      while (next < selected.length) {
        const check = selected[next++];
        const result = await runCheck(check, run, options.inputLabel ?? String);
        results.push(result);
        options.onResult?.(applyExpectedFailure(result, expected.get(check.id)));
      }
    };
    const workers = Array.from({ length: Math.max(1, options.concurrency ?? DEFAULT_CONCURRENCY) }, worker);
    await Promise.all(workers);
    const swept = attributeSweepFindings(run, results);
    if (options.explore && options.explore.runs > 0) {
      // After the named checks, so its conversations never crowd theirs; before the cleanup, which deletes its own.
      explorer = await explore(run, options.explore);
      attributeFindings(explorer, results, options.checks);
      attributeExplorerSweepFindings(run, results, swept, (id) => passingResult(id, options.checks));
    }
    warnings.push(...(await cleanUp(run)));
  } finally {
    // Every check has its verdict: what is still in flight is a request given up on (see httpRequest), which
    // close() would wait for.
    await dispatcher.destroy();
  }
  const order = new Map(selected.map((c, i) => [c.id, i]));
  const judged = results.map((r) => applyExpectedFailure(r, expected.get(r.id)));
  judged.sort((a, b) => (order.get(a.id) ?? 0) - (order.get(b.id) ?? 0));
  return {
    runId: run.runId,
    baseUrl: options.inputs.baseUrl,
    agent: options.inputs.agent,
    startedAt,
    ms: Math.round(performance.now() - started),
    results: judged,
    warnings,
    findings: deploymentFindings(run.toolResults),
    cost: run.turns.cost,
    ...(explorer && { explorer }),
  };
}

/**
 * A finding of the explorer is a failure of the named check that owns the rule it breaks: that check's result
 * fails (whatever it concluded alone) and carries the minimal sequence. A check the run did not select gets a
 * result of its own.
 */
function attributeFindings(summary: ExplorerSummary, results: CheckResult[], checks: CheckDef[]): void {
  for (const finding of summary.findings) {
    let result = results.find((r) => r.id === finding.check);
    if (!result) {
      result = passingResult(finding.check, checks, finding.section, finding.ruleText);
      results.push(result);
    }
    const said = `the explorer found a sequence of ${finding.steps.length} operations that breaks "${finding.ruleText}" (${finding.section}): expected ${finding.expected}, saw ${finding.actual}`;
    failResult(result, said, finding.steps.map((s, i) => `${i + 1}. ${s}`).join("\n"));
    result.sequences = [...(result.sequences ?? []), finding];
  }
}

/** A result for a check the run did not select, which a finding after the checks (explorer, sweep) then fails. */
function passingResult(id: string, checks: CheckDef[], section = "", title = id): CheckResult {
  const def = checks.find((c) => c.id === id);
  return {
    id,
    level: def?.level ?? "MUST",
    section: def?.section ?? section,
    title: def?.title ?? title,
    outcome: "pass",
    ms: 0,
    details: [],
    notes: [],
    exchanges: [],
  };
}

async function runCheck(
  check: CheckDef,
  run: RunState,
  inputLabel: (name: InputName) => string,
): Promise<CheckResult> {
  const started = performance.now();
  const result: CheckResult = {
    id: check.id,
    level: check.level,
    section: check.section,
    title: check.title,
    outcome: "pass",
    ms: 0,
    details: [],
    notes: [],
    exchanges: [],
  };
  const missing = missingInputs(check, run.inputs);
  if (missing.length > 0) {
    result.outcome = "skip";
    result.skipKind = "input";
    result.reason = `needs ${missing.map(inputLabel).join(", ")}`;
    return result;
  }
  const ctx = new CheckContext(run, check.id);
  try {
    await check.run(ctx);
  } catch (error) {
    if (error instanceof CheckSkip) {
      result.outcome = "skip";
      result.skipKind = error.kind;
      result.reason = error.message;
    } else if (error instanceof CheckFailure) {
      result.outcome = "fail";
      result.reason = error.message;
      result.details.push(...error.details);
      if (error instanceof DeploymentPrevented) result.prevented = true;
    } else {
      result.outcome = "fail";
      result.reason = `unexpected error: ${error instanceof Error ? error.message : String(error)}`;
    }
  }
  if (ctx.schemaFailures.length > 0) {
    // A response that breaks the spec fails the check that saw it, whatever else the check concluded.
    const first = ctx.schemaFailures[0];
    if (result.outcome !== "fail") {
      result.outcome = "fail";
      result.reason = `spec violation: ${first.message}`;
    }
    result.details.push(...ctx.schemaFailures.slice(0, 10));
  }
  result.notes = ctx.notes;
  result.exchanges = ctx.exchanges;
  if (ctx.timelines.length > 0) result.timelines = ctx.timelines;
  result.ms = Math.round(performance.now() - started);
  return result;
}

/** Deletes what the run created; a conversation already gone is fine, anything else is a warning. */
async function cleanUp(run: RunState): Promise<string[]> {
  const warnings: string[] = [];
  const ctx = new CheckContext(run);
  const entries = [...run.created.entries()];
  await Promise.all(
    entries.map(async ([id, owner]) => {
      try {
        const res = await ctx.deleteConversation(id, { key: owner.key, agent: owner.agent });
        if (res.status !== 204 && res.status !== 200 && res.status !== 404) {
          warnings.push(`cleanup: DELETE conversation ${id} on ${owner.agent} gave ${res.status}`);
        }
      } catch (error) {
        warnings.push(
          `cleanup: DELETE conversation ${id} failed: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    }),
  );
  return warnings;
}
