/**
 * A baseline of known deviations (`--expected-failures FILE`): each listed check's failure is reported as an
 * expected failure and does not fail the run; a listed check that passes does fail it, so the baseline
 * cannot go stale unnoticed. YAML or JSON (JSON is YAML), parsed with the `yaml` package.
 */
import { parse } from "yaml";
import { isRecord } from "./json.ts";
import type { CheckResult } from "./types.ts";

export interface ExpectedFailure {
  /** A check id of the catalogue. */
  id: string;
  /** Why the deviation is accepted for now (shown in every report). */
  reason: string;
}

export class ExpectedFailuresError extends Error {}

/**
 * The entries of a baseline file: a list of `{id, reason}` (or an object whose `expectedFailures` is that
 * list). Throws ExpectedFailuresError naming the entry for malformed text, a missing reason, a duplicate or
 * an id that is not one of `knownIds`.
 */
export function parseExpectedFailures(text: string, knownIds: readonly string[]): ExpectedFailure[] {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (error) {
    throw new ExpectedFailuresError(`not YAML or JSON: ${error instanceof Error ? error.message : error}`);
  }
  const list = isRecord(doc) && Array.isArray(doc.expectedFailures) ? doc.expectedFailures : doc;
  if (!Array.isArray(list)) {
    throw new ExpectedFailuresError("expected a list of {id, reason} entries");
  }
  const known = new Set(knownIds);
  const seen = new Set<string>();
  return list.map((entry, index) => {
    const where = `entry ${index + 1}`;
    if (!isRecord(entry) || typeof entry.id !== "string" || entry.id.trim() === "") {
      throw new ExpectedFailuresError(`${where}: needs an "id" (a check id)`);
    }
    const id = entry.id.trim();
    if (typeof entry.reason !== "string" || entry.reason.trim() === "") {
      throw new ExpectedFailuresError(
        `${where} (${id}): needs a "reason" saying why the failure is accepted`,
      );
    }
    if (!known.has(id)) throw new ExpectedFailuresError(`${where}: ${id} is not a check id (see --list)`);
    if (seen.has(id)) throw new ExpectedFailuresError(`${where}: ${id} is listed twice`);
    seen.add(id);
    return { id, reason: entry.reason.trim() };
  });
}

/**
 * `result` as the baseline sees it: a listed failure becomes `xfail`; a listed pass becomes a failure (the
 * baseline is stale); a listed skip stays a skip, noted.
 */
export function applyExpectedFailure(
  result: CheckResult,
  expected: ExpectedFailure | undefined,
): CheckResult {
  if (!expected) return result;
  const listed = { ...result, expectedFailure: expected.reason };
  if (result.outcome === "fail") return { ...listed, outcome: "xfail" };
  if (result.outcome === "pass") {
    return {
      ...listed,
      outcome: "fail",
      reason: `passed, but the expected-failures file lists it ("${expected.reason}"): the baseline is stale; remove the entry`,
    };
  }
  return { ...listed, notes: [...result.notes, "listed in the expected-failures file; it did not run"] };
}

/** A listed check that passed: the one kind of failure that fails a run whatever the check's level. */
export function isStaleExpectation(result: CheckResult): boolean {
  return result.outcome === "fail" && result.expectedFailure !== undefined;
}
