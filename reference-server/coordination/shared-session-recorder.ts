/**
 * Pending `agent_session_id` recordings where instances share the store: each is a row with its due time
 * (ScheduledRecordings), and every instance records what is due, so a recording outlives the instance that
 * ran the turn. The instance that scheduled one nudges the store when it falls due; the others poll, which
 * catches the recordings of an instance that died.
 */
import type { ScheduledRecordings, SessionRecord } from "../store/types.ts";
import type { SessionRecordings } from "./session-recorder.ts";

/** How often an instance records what is due (a dead instance's recordings land up to this late). */
const DEFAULT_POLL_MS = 250;
/** The nudge comes a little after the due time: the database's clock set it, ours counts it. */
const NUDGE_SLACK_MS = 20;

export class SharedSessionRecorder implements SessionRecordings {
  readonly #recordings: ScheduledRecordings;
  readonly #delayMs: number;
  readonly #nudges = new Set<NodeJS.Timeout>();
  readonly #poller: NodeJS.Timeout;
  #recording: Promise<number> | undefined;
  #closed = false;

  constructor(recordings: ScheduledRecordings, delayMs: number, pollMs = DEFAULT_POLL_MS) {
    this.#recordings = recordings;
    this.#delayMs = delayMs;
    this.#poller = setInterval(() => void this.#recordDue(), pollMs);
    this.#poller.unref();
  }

  async recordLater(session: SessionRecord): Promise<void> {
    if (this.#closed) return;
    await this.#recordings.schedule(session, Math.max(0, this.#delayMs));
    if (this.#delayMs <= 0) {
      await this.#recordDue();
      return;
    }
    const nudge = setTimeout(() => {
      this.#nudges.delete(nudge);
      void this.#recordDue();
    }, this.#delayMs + NUDGE_SLACK_MS);
    nudge.unref();
    this.#nudges.add(nudge);
  }

  pendingSession(conversationId: string): Promise<SessionRecord | undefined> {
    return this.#recordings.get(conversationId);
  }

  get pending(): number {
    return this.#nudges.size;
  }

  cancel(conversationId: string): Promise<void> {
    return this.#recordings.cancel(conversationId);
  }

  /** One pass at a time per instance; a pass that fails (the database briefly away) is retried by the poller. */
  #recordDue(): Promise<number> {
    if (this.#closed) return Promise.resolve(0);
    this.#recording ??= this.#recordings
      .recordDue()
      .catch(() => 0)
      .finally(() => {
        this.#recording = undefined;
      });
    return this.#recording;
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#poller);
    for (const nudge of this.#nudges) clearTimeout(nudge);
    this.#nudges.clear();
    await this.#recording;
  }
}
