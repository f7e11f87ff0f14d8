/** How a check says it failed or could not judge: thrown, so a check reads as a straight line of steps. */
import type { FailureDetail } from "./types.ts";

export class CheckFailure extends Error {
  readonly details: FailureDetail[];
  constructor(message: string, details: FailureDetail[] = []) {
    super(message);
    this.name = "CheckFailure";
    this.details = details;
  }
}

/** The check cannot judge the deployment (missing input, a race it could not provoke, ...). */
export class CheckSkip extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = "CheckSkip";
  }
}

export function fail(message: string, evidence?: string): never {
  throw new CheckFailure(message, evidence === undefined ? [] : [{ message, evidence }]);
}

export function skip(reason: string): never {
  throw new CheckSkip(reason);
}

/** Cuts long text for reports; the cut is marked so nobody mistakes it for the whole body. */
export function excerpt(text: string, max = 2000): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`;
}
