/**
 * Where the API leaves a choice open ("not shown"), the model learns the deployment's answer the first time it
 * sees one and expects it for the rest of the run. A later departure is information, never a failure: the
 * model never assumes any one deployment's choice.
 */
export interface Departure {
  choice: string;
  learned: string;
  seen: string;
}

export class LearnedChoices {
  readonly #learned = new Map<string, string>();
  readonly departures: Departure[] = [];

  /** The value learned for `choice`, if any. */
  get(choice: string): string | undefined {
    return this.#learned.get(choice);
  }

  /** Learns `value` for `choice` the first time; afterwards records a departure. True when it agrees. */
  observe(choice: string, value: string): boolean {
    const learned = this.#learned.get(choice);
    if (learned === undefined) {
      this.#learned.set(choice, value);
      return true;
    }
    if (learned === value) return true;
    if (!this.departures.some((d) => d.choice === choice && d.seen === value)) {
      this.departures.push({ choice, learned, seen: value });
    }
    return false;
  }

  /** Every choice learned, for the report. */
  entries(): Array<[string, string]> {
    return [...this.#learned.entries()];
  }
}
