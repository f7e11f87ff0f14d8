/**
 * One turn at a time per conversation. The API leaves concurrent turns "not shown"; the reference server
 * serialises them (the second waits) so two turns can never interleave their transcript writes.
 *
 * A waiting turn holds its request (body included, up to the body limit) and a socket, so the queue is
 * bounded three ways: per conversation, per key and for the whole server. A turn over a cap is refused at
 * once (429, or 503 for the server's cap) instead of joining a queue that would only grow.
 */
import { overCap } from "../errors/catalogue.ts";
import { decrement } from "./counters.ts";

export interface WaitingTurnLimits {
  perConversation: number;
  perKey: number;
  perServer: number;
}

export const DEFAULT_WAITING_TURN_LIMITS: WaitingTurnLimits = {
  // A conversation's turns run one by one: a queue deeper than this waits minutes behind long turns.
  perConversation: 16,
  perKey: 256,
  perServer: 1024,
};

/** Seconds a refused turn is told to wait: about one short turn. */
const RETRY_AFTER_S = 2;

export class KeyedMutex {
  readonly #tails = new Map<string, Promise<void>>();
  readonly #limits: WaitingTurnLimits;
  /** Acquirers not yet granted, per lock key, per owner (API key) and in all. */
  readonly #waitingByKey = new Map<string, number>();
  readonly #waitingByOwner = new Map<string, number>();
  #waiting = 0;

  constructor(limits: Partial<WaitingTurnLimits> = {}) {
    this.#limits = { ...DEFAULT_WAITING_TURN_LIMITS, ...limits };
  }

  /** Conversations with a holder or a waiter (0 when no turn runs). */
  get size(): number {
    return this.#tails.size;
  }

  /** Acquirers waiting behind a holder, in all (0 when no turn waits). */
  get waiting(): number {
    return this.#waiting;
  }

  /**
   * Resolves with a release function once every earlier holder of `key` has released it. When it would
   * wait, `owner` (the API key of a turn) counts against the caps; over one it throws a 429 or 503 ApiError
   * at once. Without an owner (a fork, a delete: short, and bounded by the requests-in-flight caps) no cap
   * applies, so a caller holding several locks is never refused half-way.
   */
  async acquire(key: string, owner?: string): Promise<() => void> {
    const previous = this.#tails.get(key);
    const counted = previous !== undefined && owner !== undefined;
    if (counted) this.#enqueue(key, owner);
    let release!: () => void;
    const current = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = (previous ?? Promise.resolve()).then(() => current);
    this.#tails.set(key, tail);
    if (previous !== undefined) await previous;
    if (counted) this.#dequeue(key, owner);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      release();
      // Forget the key when nobody queued behind us, so the map does not grow with every conversation.
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    };
  }

  /** Takes the lock only if nobody holds it or waits for it; undefined otherwise. */
  async tryAcquire(key: string): Promise<(() => void) | undefined> {
    if (this.#tails.has(key)) return undefined;
    return this.acquire(key);
  }

  #enqueue(key: string, owner: string): void {
    const limits = this.#limits;
    const byKey = this.#waitingByKey.get(key) ?? 0;
    const byOwner = this.#waitingByOwner.get(owner) ?? 0;
    if (this.#waiting >= limits.perServer)
      throw overCap("server", "Too many turns are already waiting on this server", RETRY_AFTER_S);
    if (byKey >= limits.perConversation)
      throw overCap("conversation", "Too many turns are already waiting on this conversation", RETRY_AFTER_S);
    if (byOwner >= limits.perKey)
      throw overCap("key", "Too many turns of this key are already waiting", RETRY_AFTER_S);
    this.#waitingByKey.set(key, byKey + 1);
    this.#waitingByOwner.set(owner, byOwner + 1);
    this.#waiting++;
  }

  #dequeue(key: string, owner: string): void {
    this.#waiting--;
    decrement(this.#waitingByKey, key);
    decrement(this.#waitingByOwner, owner);
  }
}
