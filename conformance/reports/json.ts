/**
 * The machine-readable report: pretty JSON with a fixed key order (so two runs diff cleanly), a summary
 * object up front, then every result with its details, notes and exchanges.
 */
import type { CheckResult, Exchange, FailureDetail, RunReport } from "../types.ts";
import { summarize } from "./console.ts";

/** Bumped when a field changes meaning or goes away; added fields do not bump it. */
const FORMAT_VERSION = 1;

// Each helper lists its keys in report order; `Object.assign` keeps those places and appends any field the
// types gain later, so nothing is silently dropped. Undefined values (an absent `reason`) are omitted.

function detail(d: FailureDetail): FailureDetail {
  return Object.assign(
    { message: d.message, pointer: d.pointer, schemaPath: d.schemaPath, evidence: d.evidence },
    d,
  );
}

function exchange(e: Exchange): Exchange {
  return Object.assign(
    {
      method: e.method,
      url: e.url,
      status: e.status,
      ms: e.ms,
      requestHeaders: e.requestHeaders,
      requestBody: e.requestBody,
      responseHeaders: e.responseHeaders,
      responseBody: e.responseBody,
    },
    e,
  );
}

function result(r: CheckResult): CheckResult {
  const ordered = {
    id: r.id,
    level: r.level,
    section: r.section,
    title: r.title,
    outcome: r.outcome,
    ms: r.ms,
    reason: r.reason,
    details: r.details,
    notes: r.notes,
    exchanges: r.exchanges,
  };
  return Object.assign(ordered, r, { details: r.details.map(detail), exchanges: r.exchanges.map(exchange) });
}

export function jsonReport(report: RunReport): string {
  const ordered = {
    formatVersion: FORMAT_VERSION,
    runId: report.runId,
    baseUrl: report.baseUrl,
    agent: report.agent,
    startedAt: report.startedAt,
    ms: report.ms,
    summary: summarize(report),
    findings: report.findings ?? [],
    cost: report.cost,
    warnings: report.warnings,
    results: report.results,
  };
  const body = Object.assign(ordered, report, { results: report.results.map(result) });
  return `${JSON.stringify(body, null, 2)}\n`;
}
