/**
 * What changed between two runs of one deployment: the checks whose outcome moved, grouped the way a person
 * reading after a change asks ("what broke?", "what did I fix?").
 */
import type { CheckResult, Outcome } from "../types.ts";

export interface OutcomeChange {
  id: string;
  level: CheckResult["level"];
  title: string;
  from: Outcome | "absent";
  to: Outcome | "absent";
}

export interface RunComparison {
  newlyFailing: OutcomeChange[];
  newlyPassing: OutcomeChange[];
  /** Any other move: into or out of a skip, or a check only one of the runs ran. */
  otherChanges: OutcomeChange[];
  unchanged: number;
}

/** Compares `earlier` with `later`, check by check. */
export function compareRuns(earlier: CheckResult[], later: CheckResult[]): RunComparison {
  const before = new Map(earlier.map((r) => [r.id, r]));
  const after = new Map(later.map((r) => [r.id, r]));
  const comparison: RunComparison = { newlyFailing: [], newlyPassing: [], otherChanges: [], unchanged: 0 };
  for (const id of new Set([...before.keys(), ...after.keys()])) {
    const a = before.get(id);
    const b = after.get(id);
    const from = a?.outcome ?? "absent";
    const to = b?.outcome ?? "absent";
    if (from === to) {
      comparison.unchanged++;
      continue;
    }
    const known = (b ?? a) as CheckResult;
    const change: OutcomeChange = { id, level: known.level, title: known.title, from, to };
    if (to === "fail") comparison.newlyFailing.push(change);
    else if (from === "fail" && to === "pass") comparison.newlyPassing.push(change);
    else comparison.otherChanges.push(change);
  }
  return comparison;
}
