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
  mutation: string | null,
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
  const report = await runThroughProxy(demo, mutation.name, options);
  const failed = report.results.filter((r) => r.outcome === "fail").map((r) => r.id);
  const caughtBy = failed.filter((id) => mutation.breaks.includes(id));
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
