/**
 * The conversation's turn lock when several instances share the store: the store's lease (TurnLeases) on top
 * of the in-process queue. Waiters of this instance queue in memory, so only the head of the queue asks the
 * store; the holder renews the lease while it runs and frees it when done. An instance that dies stops
 * renewing, and its lease frees itself `leaseMs` later. The fencing token rides on the release function, so the
 * turn's commit can prove it still holds the lease.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { TurnLeases } from "../store/types.ts";
import { KeyedMutex, type WaitingTurnLimits } from "./locks.ts";

/**
 * Ends a hold; `fence` is the store's fencing token where the lock is a lease, and `lost` aborts when the lease
 * was taken by another instance while held (or could not be renewed before it ran out).
 */
export type Release = (() => void) & {
  readonly fence?: number;
  readonly lost?: AbortSignal;
  /** The lease was taken over from a holder whose lease ran out unreleased (it stopped, or lost it). */
  readonly tookOver?: boolean;
};

/** What the services need of a conversation lock: KeyedMutex in one process, LeasedLocks across several. */
export interface ConversationLocks {
  /** Conversations with a holder or a waiter here (0 when no turn runs). */
  readonly size: number;
  /** Acquirers waiting behind a holder here (0 when no turn waits). */
  readonly waiting: number;
  /**
   * Resolves once the caller holds the conversation's lock; `owner` (a turn's API key) counts against the
   * waiting-turn caps (KeyedMutex), which throw a 429 or 503 ApiError at once.
   */
  acquire(key: string, owner?: string): Promise<Release>;
  /** Takes the lock only if nobody holds it (anywhere); undefined otherwise. */
  tryAcquire(key: string): Promise<Release | undefined>;
}

export interface LeasedLocksOptions {
  /** How long a lease lasts unless renewed: how soon a dead instance's conversations are free again. */
  leaseMs: number;
  /** Pause between two asks for a lease held elsewhere (default a tenth of the lease, at most 100 ms). */
  pollMs?: number;
  /** Caps on turns waiting here (the in-process queue; KeyedMutex). */
  waitingTurns?: Partial<WaitingTurnLimits>;
}

export class LeasedLocks implements ConversationLocks {
  readonly #local: KeyedMutex;
  readonly #leases: TurnLeases;
  readonly #leaseMs: number;
  readonly #pollMs: number;
  /** This instance in the lease rows, for an operator reading them. */
  readonly #holder = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

  constructor(leases: TurnLeases, options: LeasedLocksOptions) {
    this.#leases = leases;
    this.#local = new KeyedMutex(options.waitingTurns);
    this.#leaseMs = Math.max(50, options.leaseMs);
    this.#pollMs = options.pollMs ?? Math.min(100, this.#leaseMs / 10);
  }

  get size(): number {
    return this.#local.size;
  }

  get waiting(): number {
    return this.#local.waiting;
  }

  async acquire(key: string, owner?: string): Promise<Release> {
    const local = await this.#local.acquire(key, owner);
    try {
      for (;;) {
        const token = await this.#leases.tryAcquire(key, this.#holder, this.#leaseMs);
        if (token !== undefined) return this.#hold(key, token, local);
        // Held by another instance: its turn ends, or its lease runs out if it died.
        await new Promise((resolve) => setTimeout(resolve, this.#pollMs * (0.5 + Math.random())));
      }
    } catch (error) {
      local();
      throw error;
    }
  }

  async tryAcquire(key: string): Promise<Release | undefined> {
    const local = await this.#local.acquire(key);
    try {
      const token = await this.#leases.tryAcquire(key, this.#holder, this.#leaseMs);
      if (token !== undefined) return this.#hold(key, token, local);
      local();
      return undefined;
    } catch (error) {
      local();
      throw error;
    }
  }

  #hold(key: string, token: number, local: () => void): Release {
    // Renewed well before it runs out (the store renews on a connection of its own, so no load of reads can
    // hold a renewal back); a renewal that fails (the database briefly away) is tried again at the next tick.
    // Once the row names another holder, or no renewal went through for a whole lease, the lease is lost: the
    // holder is told at once (and its writes are refused by the fence anyway).
    const lost = new AbortController();
    let renewedAt = performance.now();
    let renewing = false;
    const renew = async () => {
      if (renewing || lost.signal.aborted) return;
      renewing = true;
      try {
        if (await this.#leases.renew(key, token, this.#leaseMs)) renewedAt = performance.now();
        else lost.abort();
      } catch {
        if (performance.now() - renewedAt > this.#leaseMs) lost.abort();
      } finally {
        renewing = false;
      }
    };
    const renewal = setInterval(() => void renew(), this.#leaseMs / 3);
    renewal.unref();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      clearInterval(renewal);
      // The next local waiter asks the store once the row is gone, not before (it would wait a poll).
      void this.#leases
        .release(key, token)
        .catch(() => undefined)
        .finally(local);
    };
    return Object.assign(release, {
      fence: token,
      lost: lost.signal,
      tookOver: this.#leases.tookOver(token),
    });
  }
}
