/** How a check says it failed or could not judge: thrown, so a check reads as a straight line of steps. */
import type { Diagnosis } from "./deployment-errors.ts";
import type { FailureDetail, SkipKind } from "./records.ts";

export class CheckFailure extends Error {
  readonly details: FailureDetail[];
  constructor(message: string, details: FailureDetail[] = []) {
    super(message);
    this.name = "CheckFailure";
    this.details = details;
  }
}

/**
 * The deployment kept the check from reaching the API: its proxy answered instead, TLS was refused, a body
 * was cut off. The check fails (the proxy is part of the deployment), with the likely cause and the fix.
 */
export class DeploymentPrevented extends CheckFailure {
  readonly diagnosis: Diagnosis;
  constructor(message: string, diagnosis: Diagnosis, details: FailureDetail[] = []) {
    super(message, details);
    this.name = "DeploymentPrevented";
    this.diagnosis = diagnosis;
  }
}

/**
 * The check cannot judge the deployment: an input it needs was not given (`input`), or the deployment
 * cannot show the fact (`unobservable`: a race it could not provoke, a model that always answers, ...).
 */
export class CheckSkip extends Error {
  readonly kind: SkipKind;
  constructor(reason: string, kind: SkipKind = "unobservable") {
    super(reason);
    this.name = "CheckSkip";
    this.kind = kind;
  }
}

export function fail(message: string, evidence?: string): never {
  throw new CheckFailure(message, evidence === undefined ? [] : [{ message, evidence }]);
}

export function skip(reason: string, kind: SkipKind = "unobservable"): never {
  throw new CheckSkip(reason, kind);
}

/** Cuts long text for reports; the cut is marked so nobody mistakes it for the whole body. */
export function excerpt(text: string, max = 2000): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`;
}
