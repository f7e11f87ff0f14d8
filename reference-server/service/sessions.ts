/**
 * Records `agent_session_id` a fixed delay after a turn's stream closes, as the seed describes ("recorded
 * a few seconds after the stream closes"), so the race it warns about is real and reproducible here.
 * Only the newest turn of a conversation may record: an older pending recording is cancelled by a newer
 * turn, and a resumed turn with no output clears the pointer at once.
 *
 * Pending recordings live in memory: a server stopped inside the delay loses them, which the seed already
 * allows (a turn with no recorded session resumes with no memory, and the client guidance bounds the wait).
 */
import type { Store } from "../store/types.ts";

export class SessionRecorder {
  readonly #store: Store;
  readonly #delayMs: number;
  readonly #pending = new Map<string, { timer: NodeJS.Timeout; sessionId: string }>();

  constructor(store: Store, delayMs: number) {
    this.#store = store;
    this.#delayMs = delayMs;
  }

  /** Records `sessionId` on the conversation after the delay, unless a newer turn intervenes. */
  recordLater(conversationId: string, sessionId: string): void {
    this.cancel(conversationId);
    const apply = () => {
      this.#pending.delete(conversationId);
      // The conversation may have been deleted meanwhile: an UPDATE of a missing row changes nothing.
      this.#store.updateConversation(conversationId, { agentSessionId: sessionId });
    };
    if (this.#delayMs <= 0) {
      apply();
      return;
    }
    const timer = setTimeout(apply, this.#delayMs);
    timer.unref();
    this.#pending.set(conversationId, { timer, sessionId });
  }

  /**
   * Forgets a pending recording (a newer turn started, the conversation was deleted). Its session row is
   * deleted too: nothing will ever point to it.
   */
  cancel(conversationId: string): void {
    const pending = this.#pending.get(conversationId);
    if (!pending) return;
    clearTimeout(pending.timer);
    this.#pending.delete(conversationId);
    this.#store.deleteSession(pending.sessionId);
  }

  close(): void {
    for (const { timer } of this.#pending.values()) clearTimeout(timer);
    this.#pending.clear();
  }
}
