/**
 * JUnit XML for CI test tabs: one `<testsuite>` per API section, one `<testcase>` per check.
 *
 * Outcome mapping:
 * - MUST and SHOULD failures are `<failure>`s (type = the level), with the details and exchanges as text.
 *   Only MUST failures change the exit code, but a SHOULD departure is still a finding to see in CI.
 * - INFO failures are NOT `<failure>`s: INFO checks observe "not shown" behaviour and never fail a run,
 *   and most CI tools turn any `<failure>` into a red build. They pass, with the finding in `<system-out>`.
 * - Skips are `<skipped message="reason"/>`, and so are expected failures (a baseline lists them), as pytest
 *   reports its xfails: they must not turn a build red, and are not passes either.
 */
import type { CheckResult, Exchange, RunReport } from "../types.ts";
import { escapeMarkup as attr, escapeText as text } from "./escape.ts";

function seconds(ms: number): string {
  return (ms / 1000).toFixed(3);
}

function headerLines(headers: Record<string, string>): string[] {
  return Object.entries(headers).map(([name, value]) => `  ${name}: ${value}`);
}

function exchangeText(e: Exchange, index: number): string {
  const lines = [`#${index + 1} ${e.method} ${e.url} -> ${e.status} (${e.ms} ms)`];
  lines.push(...headerLines(e.requestHeaders));
  if (e.requestBody !== undefined) lines.push("  request body:", e.requestBody);
  lines.push(...headerLines(e.responseHeaders));
  if (e.responseBody !== "") lines.push("  response body:", e.responseBody);
  return lines.join("\n");
}

/** The plain-text account of a failed check: reason, each detail, then the requests it made. */
function failureText(r: CheckResult): string {
  const parts = [r.reason ?? "failed"];
  for (const d of r.details) {
    // A detail often repeats the reason (the check's own message); then only its particulars are listed.
    const lines = [`- ${d.message === r.reason ? "(as above)" : d.message}`];
    if (d.pointer !== undefined) lines.push(`  at ${d.pointer || "(root)"}`);
    if (d.schemaPath !== undefined) lines.push(`  schema ${d.schemaPath}`);
    if (d.evidence !== undefined) lines.push("  evidence:", d.evidence);
    parts.push(lines.join("\n"));
  }
  if (r.exchanges.length > 0) {
    parts.push(`HTTP exchanges (${r.exchanges.length}):\n${r.exchanges.map(exchangeText).join("\n\n")}`);
  }
  return parts.join("\n\n");
}

function testcase(r: CheckResult): string {
  const open = `    <testcase classname="${attr(r.section)}" name="${attr(`${r.id} ${r.title}`)}" time="${seconds(r.ms)}"`;
  const body: string[] = [];
  const out = [...r.notes];
  if (r.outcome === "skip") {
    body.push(`      <skipped message="${attr(r.reason ?? "skipped")}"/>`);
  } else if (r.outcome === "xfail") {
    body.push(
      `      <skipped message="${attr(`expected failure (${r.expectedFailure ?? ""}): ${r.reason ?? ""}`)}">${text(failureText(r))}</skipped>`,
    );
  } else if (r.outcome === "fail" && r.level !== "INFO") {
    body.push(
      `      <failure message="${attr(r.reason ?? "failed")}" type="${r.level}">${text(failureText(r))}</failure>`,
    );
  } else if (r.outcome === "fail") {
    out.unshift(
      `INFO check did not hold (reported, not a failure: INFO never fails a run)\n${failureText(r)}`,
    );
  }
  if (out.length > 0) body.push(`      <system-out>${text(out.join("\n"))}</system-out>`);
  return body.length === 0 ? `${open}/>` : `${open}>\n${body.join("\n")}\n    </testcase>`;
}

interface Tally {
  tests: number;
  failures: number;
  skipped: number;
  ms: number;
}

function tally(results: CheckResult[]): Tally {
  return {
    tests: results.length,
    failures: results.filter((r) => r.outcome === "fail" && r.level !== "INFO").length,
    skipped: results.filter((r) => r.outcome === "skip" || r.outcome === "xfail").length,
    ms: results.reduce((sum, r) => sum + r.ms, 0),
  };
}

function counts(t: Tally, ms: number): string {
  return `tests="${t.tests}" failures="${t.failures}" errors="0" skipped="${t.skipped}" time="${seconds(ms)}"`;
}

/** What the run cost the deployment, one property per figure. */
function costProperties(report: RunReport): string[][] {
  const cost = report.cost;
  if (!cost) return [];
  return [
    ["turns", String(cost.turns)],
    ...(cost.maxTurns === undefined ? [] : [["max_turns", String(cost.maxTurns)]]),
    ["input_tokens", String(cost.inputTokens)],
    ["output_tokens", String(cost.outputTokens)],
    ["cache_read_input_tokens", String(cost.cacheReadInputTokens)],
    ["cache_creation_input_tokens", String(cost.cacheCreationInputTokens)],
    ["total_cost_usd", String(cost.totalCostUsd)],
  ];
}

export function junitReport(report: RunReport): string {
  const sections = new Map<string, CheckResult[]>();
  for (const r of report.results) sections.set(r.section, [...(sections.get(r.section) ?? []), r]);
  const properties = [
    ["base_url", report.baseUrl],
    ["agent", report.agent],
    ["run_id", report.runId],
    ...(report.findings ?? []).map((f) => ["deployment_finding", f]),
    ...costProperties(report),
    ...report.warnings.map((w) => ["warning", w]),
  ]
    .map(([name, value]) => `      <property name="${name}" value="${attr(value)}"/>`)
    .join("\n");
  const suites = [...sections].map(([section, results]) => {
    const t = tally(results);
    // A suite's time is the sum of its checks' times; checks run concurrently, so suites overlap.
    return [
      `  <testsuite name="${attr(section)}" ${counts(t, t.ms)} timestamp="${attr(report.startedAt)}">`,
      `    <properties>\n${properties}\n    </properties>`,
      ...results.map(testcase),
      "  </testsuite>",
    ].join("\n");
  });
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="agent-api check" ${counts(tally(report.results), report.ms)} timestamp="${attr(report.startedAt)}">`,
    ...suites,
    "</testsuites>",
    "",
  ].join("\n");
}
