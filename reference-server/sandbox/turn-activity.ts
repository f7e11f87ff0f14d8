/**
 * The commands and tool calls of one conversation's turn. Everything the server does to a working directory
 * (restore, attachments, commit, publish, fork, delete, the next turn) first ends the previous turn's calls
 * and waits until they are gone: no process of a turn is ever alive while the server touches its files.
 */
import type { FinishReport } from "./types.ts";

export class TurnActivity {
  readonly #abort = new AbortController();
  readonly #calls = new Set<Promise<unknown>>();
  #tail: Promise<unknown> = Promise.resolve();

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** Runs `call` after the turn's earlier calls (one at a time), unless the turn was ended. */
  run<T>(call: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(call, call);
    const settled = result.catch(() => undefined);
    this.#tail = settled;
    this.#calls.add(settled);
    void settled.then(() => this.#calls.delete(settled));
    return result;
  }

  /** Ends every call of the turn (commands are killed with their whole cgroup) and waits for them. */
  async end(): Promise<void> {
    this.#abort.abort();
    await Promise.all([...this.#calls]);
  }
}

/** A turn's finish, run once whoever calls it and however often (a completed turn's, then the cleanup's). */
export function finishOnce(
  fn: (outcome: "completed" | "failed") => Promise<FinishReport>,
): (outcome?: "completed" | "failed") => Promise<FinishReport> {
  let result: Promise<FinishReport> | undefined;
  return (outcome = "completed") => {
    result ??= fn(outcome);
    return result;
  };
}
