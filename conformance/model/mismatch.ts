/** How the model says a response departs from it: thrown, so a comparison reads as a straight line. */
import type { ModelRule } from "./rules.ts";

export class Mismatch extends Error {
  readonly rule: ModelRule;
  readonly expected: string;
  readonly actual: string;
  constructor(rule: ModelRule, expected: string, actual: string) {
    super(`${rule.text} (${rule.section}): expected ${expected}, saw ${actual}`);
    this.name = "Mismatch";
    this.rule = rule;
    this.expected = expected;
    this.actual = actual;
  }
}

/** Throws a Mismatch of `rule` unless `ok`. */
export function expectRule(rule: ModelRule, ok: boolean, expected: string, actual: unknown): void {
  if (!ok) throw new Mismatch(rule, expected, typeof actual === "string" ? actual : JSON.stringify(actual));
}
