/** The fuzzer's options, findings and report, and the shapes every part of it shares. */

import type fc from "fast-check";

export type Json = Record<string, unknown>;
export type Arb<T> = fc.Arbitrary<T>;

export const SPEC_URL = new URL("../../../generated/openapi.json", import.meta.url);

export interface FuzzKeys {
  /** Admin of the main workspace: the key most requests carry. */
  admin: string;
  /** Owner of the protected conversations (an Operator): only reads and spec-refused requests. */
  member: string;
  viewer?: string;
  revoked?: string;
  /** Admin of another workspace (owns one protected conversation there). */
  foreign?: string;
  /** Key of the deployed flow. */
  flow?: string;
}

export interface FuzzAgents {
  main: string;
  storage?: string;
  repo?: string;
  /** An agent of the other workspace. */
  foreign?: string;
}

export interface FuzzOptions {
  baseUrl: string;
  /** Where flows are served (the `{flow_url}` server); default baseUrl. */
  flowUrl?: string;
  keys: FuzzKeys;
  agents?: Partial<FuzzAgents>;
  flowId?: string;
  /** Name of the flow's input variable. */
  flowInput?: string;
  routingPrefix?: string;
  /** Number of fuzzed requests (set-up, snapshots and liveness probes come on top). */
  numRuns: number;
  seed: number;
  concurrency?: number;
  /** Bound of one request; past it the request counts as a hang. */
  timeoutMs?: number;
  /** A liveness probe (models list) after every this many requests. */
  probeEvery?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface Finding {
  kind:
    | "5xx"
    | "no-response"
    | "hang"
    | "undocumented-status"
    | "spec-violation"
    | "accepted-invalid"
    | "crash";
  operation: string;
  /** Position of the request in this seed's sequence. */
  index: number;
  message: string;
  request: { method: string; path: string; headers: Record<string, string>; body: string; bodyBytes: number };
  status?: number;
  response?: string;
  /** The response body's `message`, with echoed paths and numbers elided (for grouping). */
  serverMessage?: string;
}

export interface FuzzReport {
  seed: number;
  requests: number;
  ms: number;
  requestsPerSecond: number;
  statusHistogram: Record<string, number>;
  operations: Record<string, { requests: number; statuses: Record<string, number>; invalidSent: number }>;
  findings: Finding[];
  /** Counts per finding kind. */
  counts: Record<Finding["kind"], number>;
  /**
   * Findings grouped by kind, status, operation and the response's message (ids and paths elided), with
   * one example each: the distinct faults, however often each was hit.
   */
  classes: Record<string, { count: number; example: Finding }>;
  /** Differences in the data created before fuzzing (empty when byte-identical). */
  integrity: string[];
  /** Liveness probes that succeeded / were made. */
  probes: { ok: number; made: number };
  /** What was sent: body mutations, encodings, content types, wrong methods, and requests aimed at the protected data. */
  coverage: Record<string, number>;
}
