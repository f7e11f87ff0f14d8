/**
 * Records `agent_session_id` a fixed delay after a turn's stream closes, as the API describes ("recorded
 * a few seconds after the stream closes"), so the race it warns about is real and reproducible here.
 * Only the newest turn of a conversation may record: an older pending recording is cancelled by a newer
 * turn, and a resumed turn with no output clears the pointer at once.
 *
 * Pending recordings live in memory: a server stopped inside the delay loses them, which the API already
 * allows (a turn with no recorded session resumes with no memory, and the client guidance bounds the wait).
 */
import type { SessionRecord, Store } from "../store/types.ts";

/** What the services need of the recordings: SessionRecorder in one process, SharedSessionRecorder across several. */
export interface SessionRecordings {
  recordLater(session: SessionRecord): Promise<void>;
  /** The session a conversation's newest turn wrote and that is waiting for its delay (a fork reads it). */
  pendingSession(conversationId: string): Promise<SessionRecord | undefined>;
  /** Recordings this process waits on. */
  readonly pending: number;
  /** Forgets a pending recording (a newer turn started, the conversation was deleted). */
  cancel(conversationId: string): Promise<void>;
  close(): Promise<void>;
}

export class SessionRecorder implements SessionRecordings {
  readonly #store: Store;
  readonly #delayMs: number;
  readonly #pending = new Map<string, { timer: NodeJS.Timeout; session: SessionRecord }>();
  /** Recordings being written, which close() waits for (the store closes after it). */
  readonly #writing = new Set<Promise<void>>();
  /** After close, nothing is recorded: the store may be closed already. */
  #closed = false;

  constructor(store: Store, delayMs: number) {
    this.#store = store;
    this.#delayMs = delayMs;
  }

  /**
   * Writes the session and records it on its conversation after the delay, unless a newer turn intervenes.
   * The session row is written only then: until the pointer is set nothing can resume it, so a recording
   * that is cancelled, or lost with a stopped server, leaves nothing behind. With no delay, the promise
   * settles once the session is recorded.
   */
  recordLater(session: SessionRecord): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#forget(session.conversationId);
    const apply = () => {
      this.#pending.delete(session.conversationId);
      // A recording that fails is a recording lost, which the API allows (the next turn starts without
      // memory); it must not take the process down from a timer.
      const writing = this.#store.recordSession(session).catch(() => undefined);
      this.#writing.add(writing);
      void writing.finally(() => this.#writing.delete(writing));
      return writing;
    };
    if (this.#delayMs <= 0) return apply();
    const timer = setTimeout(apply, this.#delayMs);
    timer.unref();
    this.#pending.set(session.conversationId, { timer, session });
    return Promise.resolve();
  }

  /** The session a conversation's newest turn wrote and that is waiting for its delay (a fork reads it). */
  async pendingSession(conversationId: string): Promise<SessionRecord | undefined> {
    return this.#pending.get(conversationId)?.session;
  }

  /** Recordings waiting for their delay. */
  get pending(): number {
    return this.#pending.size;
  }

  /** Forgets a pending recording (a newer turn started, the conversation was deleted). */
  async cancel(conversationId: string): Promise<void> {
    this.#forget(conversationId);
  }

  #forget(conversationId: string): void {
    const pending = this.#pending.get(conversationId);
    if (pending) clearTimeout(pending.timer);
    this.#pending.delete(conversationId);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const { timer } of this.#pending.values()) clearTimeout(timer);
    this.#pending.clear();
    await Promise.all(this.#writing);
  }
}
