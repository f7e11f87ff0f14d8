/** Compares a response's status (and the body a refusal must carry) with what the model expects. */
import { isDeepStrictEqual } from "node:util";
import type { LearnedChoices } from "../model/choices.ts";
import type { StatusExpectation } from "../model/expectation.ts";
import { expectRule } from "../model/mismatch.ts";
import type { ModelRule } from "../model/rules.ts";

export interface Answer {
  status: number;
  text: string;
  body: unknown;
}

/**
 * Throws a Mismatch when the status departs from the model; returns true when the model expects the request
 * to have succeeded (`successRule` then owns the 2xx the caller judges next).
 */
export function judgeStatus(
  expectation: StatusExpectation,
  res: Answer,
  choices: LearnedChoices,
  successRule: ModelRule,
  successStatus = 200,
): boolean {
  switch (expectation.kind) {
    case "success":
      expectRule(successRule, res.status === successStatus, String(successStatus), statusText(res));
      return true;
    case "exact": {
      const { refusal } = expectation;
      expectRule(refusal.rule, res.status === refusal.status, String(refusal.status), statusText(res));
      if (refusal.message !== undefined) {
        expectRule(
          refusal.rule,
          res.text.includes(refusal.message),
          `a body saying ${JSON.stringify(refusal.message)}`,
          res.text.slice(0, 200),
        );
      }
      if (refusal.exactBody !== undefined) {
        expectRule(
          refusal.rule,
          isDeepStrictEqual(res.body, refusal.exactBody),
          JSON.stringify(refusal.exactBody),
          res.text.slice(0, 200),
        );
      }
      return refusal.status < 300;
    }
    case "one-of": {
      const statuses = expectation.refusals.map((r) => r.status);
      const matching = expectation.refusals.find((r) => r.status === res.status);
      expectRule(
        expectation.refusals[0].rule,
        matching !== undefined,
        `one of ${statuses.join(", ")}`,
        statusText(res),
      );
      choices.observe(expectation.choice, String(res.status));
      return false;
    }
    case "learned":
      expectRule(
        expectation.rule,
        expectation.among.includes(res.status),
        `one of ${expectation.among.join(", ")}`,
        statusText(res),
      );
      choices.observe(expectation.choice, String(res.status));
      return res.status < 300;
  }
}

function statusText(res: Answer): string {
  return `${res.status} ${res.text.slice(0, 160).replace(/\s+/g, " ")}`.trim();
}
