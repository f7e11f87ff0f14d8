/**
 * Runs the conformance suite through the fault proxy: one run per mutation (or the unbroken proxy), with
 * bounded parallelism, against one reference server. Shared by mutation.test.ts and score.ts.
 */

import { catalogue } from "../../conformance/catalogue.ts";
import { resolveInputs } from "../../conformance/inputs.ts";
import { runSuite } from "../../conformance/runner.ts";
import type { SpecValidator } from "../../conformance/spec-validator.ts";
import type { RunReport } from "../../conformance/types.ts";
import type { DemoServer } from "../../reference-server/demo/index.ts";
import type { Mutation } from "./mutations.ts";
import { startFaultProxy } from "./proxy.ts";

/** Bound for waiting on agent_session_id: three times the demo's session delay (1 s), which a mutation that never records it waits out in full. */
export const SESSION_WAIT_MS = 3_000;

/**
 * The two stream-timing checks every mutation that holds a stream to rewrite it fails (README, "Measured from
 * outside"): left out when a row is judged as a deployment is, or every such row would count as caught.
 */
export const HELD_STREAM_CHECKS = ["SSE-STREAMED-INCREMENTAL", "SSE-HEADERS-BEFORE-END"];

/** A mutation that reads or rewrites streams holds each one until the turn ends. */
export function holdsStreams(mutation: Mutation): boolean {
  return Boolean(mutation.onEvents || mutation.onSseText || mutation.onResponse || mutation.stream);
}

/**
 * A row with no `breaks` (an outside round's, or a random draw) is judged as `agent-api check` judges a
 * deployment: caught when any MUST check fails, the held-stream timing checks aside for a row that holds streams.
 */
export function judgedAsDeployment(mutation: Mutation): boolean {
  return mutation.breaks.length === 0;
}

/** The MUST failures that count against `mutation` when it is judged as a deployment. */
export function deploymentFailures(mutation: Mutation, report: RunReport): string[] {
  const leftOut = holdsStreams(mutation) ? HELD_STREAM_CHECKS : [];
  return report.results
    .filter((r) => r.level === "MUST" && r.outcome === "fail" && !leftOut.includes(r.id))
    .map((r) => r.id);
}

export interface MutationOutcome {
  mutation: Mutation;
  /** Every check that failed (any level). */
  failed: string[];
  /** The declared `breaks` ids among them. */
  caughtBy: string[];
  caught: boolean;
  /** Caught by a MUST check (a SHOULD failure alone does not fail `agent-api check`). */
  mustCaught: boolean;
  report: RunReport;
  ms: number;
}

/** The suite through a proxy applying `mutation` (null: unbroken), restricted to `only` when given. */
export async function runThroughProxy(
  demo: DemoServer,
  mutation: string | Mutation | null,
  options: { only?: string[]; validator?: SpecValidator } = {},
): Promise<RunReport> {
  const proxy = await startFaultProxy({ target: demo.url, mutation });
  try {
    const env: Record<string, string> = {
      ...demo.envVars,
      AGENT_API_BASE_URL: proxy.url,
      AGENT_API_SESSION_WAIT_MS: String(SESSION_WAIT_MS),
    };
    if (env.AGENT_API_FLOW_URL) env.AGENT_API_FLOW_URL = proxy.url;
    return await runSuite({
      checks: catalogue,
      inputs: resolveInputs({}, env),
      only: options.only,
      validator: options.validator,
    });
  } finally {
    await proxy.close();
  }
}

export async function runMutation(
  demo: DemoServer,
  mutation: Mutation,
  options: { only?: string[]; validator?: SpecValidator } = {},
): Promise<MutationOutcome> {
  const started = performance.now();
  const report = await runThroughProxy(demo, mutation, options);
  const failed = report.results.filter((r) => r.outcome === "fail").map((r) => r.id);
  const caughtBy = judgedAsDeployment(mutation)
    ? deploymentFailures(mutation, report)
    : failed.filter((id) => mutation.breaks.includes(id));
  return {
    mutation,
    failed,
    caughtBy,
    caught: caughtBy.length > 0,
    mustCaught: report.results.some((r) => r.level === "MUST" && caughtBy.includes(r.id)),
    report,
    ms: Math.round(performance.now() - started),
  };
}

/** Maps `items` through `work` with at most `limit` in flight; results keep the input order. */
export async function mapLimited<T, R>(
  items: T[],
  limit: number,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return results;
}
