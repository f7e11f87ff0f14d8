/**
 * Runs the conformance suite through the fault proxy: one run per mutation (or the unbroken proxy), with
 * bounded parallelism, against one reference server. Shared by mutation.test.ts and score.ts.
 */

import { catalogue } from "../../conformance/catalogue.ts";
import type { ExploreOptions } from "../../conformance/explorer/explore.ts";
import { DEFAULT_EXPLORE_TIME_MS, resolveInputs } from "../../conformance/inputs.ts";
import { runSuite } from "../../conformance/runner.ts";
import type { SpecValidator } from "../../conformance/spec-validator.ts";
import type { RunReport } from "../../conformance/types.ts";
import type { DemoServer } from "../../reference-server/demo/index.ts";
import type { Mutation } from "./mutations.ts";
import { startFaultProxy } from "./proxy.ts";
import type { ProxyCall, ProxyResponse, ProxyTools } from "./proxy-calls.ts";

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

/**
 * `mutation` with the same hooks, each counting the calls where it changed something: a request rewritten or
 * answered, a stream or answer that differs, or an extra upstream call other than a read (a toggle, a delete
 * made on the deployment's behalf). A row that never fired says nothing about the suite (the catalogue's
 * report names it "not applied").
 */
export function countingFirings(mutation: Mutation): { mutation: Mutation; fired(): number } {
  let count = 0;
  const watched = (tools: ProxyTools): ProxyTools => ({
    ...tools,
    forward: (call: ProxyCall) => {
      if (call.method !== "GET") count++;
      return tools.forward(call);
    },
  });
  const snapshot = (call: ProxyCall) =>
    `${call.method} ${call.path} ${JSON.stringify(call.headers)} ${call.body.toString("base64")}`;
  const sameAnswer = (a: ProxyResponse, b: ProxyResponse) =>
    a.status === b.status && JSON.stringify(a.headers) === JSON.stringify(b.headers) && a.body.equals(b.body);
  // A hook that throws makes the proxy answer 502, which a run would count as the fault caught: say so.
  const said = new Set<string>();
  const loud = async <T>(hook: string, work: () => T | Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      if (!said.has(hook)) console.error(`mutation ${mutation.name}: ${hook} threw: ${String(error)}`);
      said.add(hook);
      throw error;
    }
  };
  const counted: Mutation = { ...mutation };
  const { onRequest, onEvents, onSseText, onResponse } = mutation;
  if (onRequest)
    counted.onRequest = async (call, tools) => {
      const before = snapshot(call);
      const answer = await loud("onRequest", () => onRequest(call, watched(tools)));
      if (answer !== undefined || snapshot(call) !== before) count++;
      return answer;
    };
  if (onEvents)
    counted.onEvents = (events, call, tools) => {
      const before = JSON.stringify(events);
      const out = onEvents(events, call, watched(tools));
      if (JSON.stringify(out ?? events) !== before) count++;
      return out;
    };
  if (onSseText)
    counted.onSseText = (text, call) => {
      const out = onSseText(text, call);
      if (out !== text) count++;
      return out;
    };
  if (onResponse)
    counted.onResponse = async (call, res, tools) => {
      const out = await loud("onResponse", () => onResponse(call, res, watched(tools)));
      if (out !== undefined && !sameAnswer(out, res)) count++;
      return out;
    };
  return { mutation: counted, fired: () => count };
}

export interface MutationOutcome {
  mutation: Mutation;
  /** Calls where the mutation's fault applied (0: the run never met it). */
  fired: number;
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

export interface RunOptions {
  only?: string[];
  validator?: SpecValidator;
  /**
   * The explorer's budget. Unset: none, as the self-test's own runs have it. Scored as `agent-api check` judges
   * a deployment, a run explores (`--explore N --explore-seed S` of the score scripts), with a seed fixed so a
   * before/after figure compares the same sequences.
   */
  explore?: ExploreOptions;
}

/** `--explore N` and `--explore-seed S` of the score scripts as explorer options (N 0 or unset: none). */
export function exploreFromFlags(
  runs: string | undefined,
  seed: string | undefined,
): ExploreOptions | undefined {
  const n = Number(runs ?? 0);
  if (!Number.isInteger(n) || n < 0) throw new Error("--explore takes a number of sequences");
  if (n === 0) return undefined;
  return { runs: n, seed: Number(seed ?? 29) | 0, timeLimitMs: DEFAULT_EXPLORE_TIME_MS };
}

/** The suite through a proxy applying `mutation` (null: unbroken), restricted to `only` when given. */
export async function runThroughProxy(
  demo: DemoServer,
  mutation: string | Mutation | null,
  options: RunOptions = {},
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
      ...(options.explore && { explore: options.explore }),
    });
  } finally {
    await proxy.close();
  }
}

export async function runMutation(
  demo: DemoServer,
  mutation: Mutation,
  options: RunOptions = {},
): Promise<MutationOutcome> {
  const started = performance.now();
  const counting = countingFirings(mutation);
  const report = await runThroughProxy(demo, counting.mutation, options);
  const failed = report.results.filter((r) => r.outcome === "fail").map((r) => r.id);
  const caughtBy = judgedAsDeployment(mutation)
    ? deploymentFailures(mutation, report)
    : failed.filter((id) => mutation.breaks.includes(id));
  return {
    mutation,
    fired: counting.fired(),
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
