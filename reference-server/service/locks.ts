/**
 * One turn at a time per conversation. The seed leaves concurrent turns "not shown"; the reference server
 * serialises them (the second waits) so two turns can never interleave their transcript writes.
 */
export class KeyedMutex {
  readonly #tails = new Map<string, Promise<void>>();

  /** Conversations with a holder or a waiter (0 when no turn runs). */
  get size(): number {
    return this.#tails.size;
  }

  /** Resolves with a release function once every earlier holder of `key` has released it. */
  async acquire(key: string): Promise<() => void> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const current = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => current);
    this.#tails.set(key, tail);
    await previous;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      release();
      // Forget the key when nobody queued behind us, so the map does not grow with every conversation.
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    };
  }
}
