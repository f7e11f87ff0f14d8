/**
 * What the model expects of a response's status: one status the API states, or, where several rules apply at
 * once and the API does not say which wins, any of theirs (the deployment's choice is learned).
 */
import type { ModelRule } from "./rules.ts";

export interface Refusal {
  status: number;
  rule: ModelRule;
  /** Body text the API states for this refusal. */
  message?: string;
  /** The body must be exactly this JSON (the revoked key's). */
  exactBody?: unknown;
}

export type StatusExpectation =
  | { kind: "exact"; refusal: Refusal }
  /** Several refusals apply; the API does not order them: any one of them, learned under `choice`. */
  | { kind: "one-of"; refusals: Refusal[]; choice: string }
  /** The API leaves the status open within `among`: learned under `choice`. */
  | { kind: "learned"; among: number[]; rule: ModelRule; choice: string }
  | { kind: "success" };

/** One refusal, several (the API orders none of them), or success. */
export function fromRefusals(refusals: Refusal[], choicePrefix: string): StatusExpectation {
  if (refusals.length === 0) return { kind: "success" };
  const distinct = [...new Set(refusals.map((r) => r.status))];
  if (distinct.length === 1) return { kind: "exact", refusal: refusals[0] };
  return {
    kind: "one-of",
    refusals,
    choice: `${choicePrefix}: status when ${refusals.map((r) => r.rule.id).join(" and ")} all apply`,
  };
}
