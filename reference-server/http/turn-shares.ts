/**
 * Turns running at once per workspace and per key (or flow) within it: one tenant's turns cannot take every
 * turn the server can run; over its share a turn is refused at once with 429 and `Retry-After`, before it
 * waits for anything, and the other workspaces' turns are not affected. A turn counts from its request's
 * authentication to the end of its work (its stream's end, or its flow's last step), whether or not its
 * client is still there.
 */
import { decrement } from "../coordination/counters.ts";
import { overCap } from "../errors/catalogue.ts";

export interface TurnShareLimits {
  turnsPerWorkspace: number;
  turnsPerKey: number;
}

export const DEFAULT_TURN_SHARE_LIMITS: TurnShareLimits = {
  // The mutation self-test runs 12 suites at once with one key against one server, each a few turns at a
  // time; the several-instances benchmark holds 1,000 turns in flight with one key.
  turnsPerWorkspace: 1536,
  turnsPerKey: 1024,
};

/** Seconds a refused turn is told to wait: about one short turn. */
const RETRY_AFTER_S = 2;

export class TurnShares {
  readonly #limits: TurnShareLimits;
  readonly #byWorkspace = new Map<string, number>();
  readonly #byKey = new Map<string, number>();

  constructor(limits: Partial<TurnShareLimits> = {}) {
    this.#limits = { ...DEFAULT_TURN_SHARE_LIMITS, ...limits };
  }

  /** Counts one turn of `key` in `workspace`, or throws 429 over a share; returns its (idempotent) end. */
  enter(workspace: string, key: string): () => void {
    const inWorkspace = this.#byWorkspace.get(workspace) ?? 0;
    const ofKey = this.#byKey.get(key) ?? 0;
    if (inWorkspace >= this.#limits.turnsPerWorkspace)
      throw overCap("workspace", "Too many turns of this workspace are already running", RETRY_AFTER_S);
    if (ofKey >= this.#limits.turnsPerKey)
      throw overCap("key", "Too many turns of this key are already running", RETRY_AFTER_S);
    this.#byWorkspace.set(workspace, inWorkspace + 1);
    this.#byKey.set(key, ofKey + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      decrement(this.#byWorkspace, workspace);
      decrement(this.#byKey, key);
    };
  }

  /** Turns counted right now, in all (0 when none runs). */
  get running(): number {
    let total = 0;
    for (const n of this.#byWorkspace.values()) total += n;
    return total;
  }
}
