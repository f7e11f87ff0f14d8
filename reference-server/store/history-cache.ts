/**
 * The session histories a store keeps parsed in memory between turns (least recently used first out).
 */
import type { SessionHistory } from "./types.ts";

/**
 * Parsed session histories, so a turn does not read and parse its whole history again: the turn before
 * left it here. Correct only where the store's process is the only writer of the session's rows (SQLite: one
 * process per data directory), and every write goes through the store, which updates or drops the entry only
 * once its transaction committed. Bounded by size, so memory stays flat however many conversations there are.
 * Callers get the cached array itself and must not change it (the engine copies before appending).
 */
export class HistoryCache {
  readonly #limit: number;
  readonly #entries = new Map<string, { history: SessionHistory; chars: number }>();
  #chars = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  get(id: string): SessionHistory | undefined {
    const entry = this.#entries.get(id);
    if (!entry) return undefined;
    // Most recently used last: Map keeps insertion order.
    this.#entries.delete(id);
    this.#entries.set(id, entry);
    return entry.history;
  }

  chars(id: string): number | undefined {
    return this.#entries.get(id)?.chars;
  }

  set(id: string, history: SessionHistory, chars: number): void {
    this.delete(id);
    if (chars > this.#limit) return;
    this.#entries.set(id, { history, chars });
    this.#chars += chars;
    for (const [oldest, entry] of this.#entries) {
      if (this.#chars <= this.#limit) break;
      this.#entries.delete(oldest);
      this.#chars -= entry.chars;
    }
  }

  delete(id: string): void {
    const entry = this.#entries.get(id);
    if (!entry) return;
    this.#entries.delete(id);
    this.#chars -= entry.chars;
  }

  clear(): void {
    this.#entries.clear();
    this.#chars = 0;
  }
}
