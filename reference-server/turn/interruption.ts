/**
 * A turn ended before it finished: by its client leaving, its time-out, or the server (a delete, a
 * shutdown); and a turn a previous process acknowledged and did not live to finish.
 */
import type { Store } from "../store/types.ts";
import { errorRecord } from "./commit.ts";
import { fixedFailure, type InterruptCode, type TurnFailure } from "./failure.ts";

/**
 * What the record of a turn left pending says, by what the new holder of its conversation knows: it took over
 * a lease that ran out unreleased (the turn's instance lost its lease, whether it stopped or could not renew
 * it in time; its own client was told AGENT_API_TURN_LEASE_LOST if it was alive), or the turn's process is
 * known to have stopped (this server's start, a lease released with the turn unstored).
 */
export type PendingFate = "server stopped" | "lease lost";

const LEASE_LOST_RECORD: TurnFailure = {
  code: "AGENT_API_TURN_LEASE_LOST",
  message:
    "The turn was not stored: the instance running it lost its lease on the conversation (it stopped, or could not renew the lease in time) and another instance took the conversation",
};

/** Records the conversation's pending turn, if any, as interrupted (the caller holds its lock). */
export async function recordInterrupted(
  store: Store,
  conversationId: string,
  fence: number | undefined,
  at: string,
  fate: PendingFate = "server stopped",
): Promise<boolean> {
  const pending = await store.getPendingTurn(conversationId);
  if (!pending) return false;
  const current = await store.getConversation(pending.conversationId);
  if (!current) return false;
  await store.commitTurn({
    conversationId: current.id,
    turnIndex: current.turnCount,
    messages: [
      {
        role: "user",
        text: pending.text,
        authorMemberId: pending.authorMemberId,
        authorName: pending.authorName,
        isCompactSummary: false,
      },
    ],
    events: [
      errorRecord(fate === "lease lost" ? LEASE_LOST_RECORD : fixedFailure("AGENT_API_SERVER_STOPPED")),
    ],
    compaction: null,
    at,
    fence,
  });
  return true;
}

/**
 * Why a turn was ended early by the server (a delete, a shutdown, its lease lost), as opposed to a time-out or a
 * client leaving.
 */
export class TurnInterrupted extends Error {
  readonly failure: TurnFailure;

  constructor(reason: InterruptCode | TurnFailure) {
    const failure = typeof reason === "string" ? fixedFailure(reason) : reason;
    super(failure.message);
    this.failure = failure;
  }
}

/**
 * The signal that ends a turn: its client leaving, an interrupt (a delete), or its time-out.
 *
 * Neither `AbortSignal.timeout` nor `AbortSignal.any`: Node keeps a timeout signal, and a composite signal
 * that has an abort listener, in a set of signals it never collects until they abort or lose their
 * listeners, so every turn left a Timeout, signals and their weak cells alive for the full time-out
 * (10 minutes) after it ended, ~250 MB at 900 turns/s. Here the timer is cleared and the listeners
 * removed when the turn ends, so nothing of the turn stays reachable.
 */
export class TurnSignal {
  readonly #controller = new AbortController();
  readonly #client: AbortSignal;
  readonly #interrupt: AbortSignal;
  readonly #live: { count: number };
  #timer: NodeJS.Timeout | undefined;
  #timedOut = false;
  readonly #onAbort = (event: Event) => this.#controller.abort((event.target as AbortSignal).reason);

  constructor(client: AbortSignal, interrupt: AbortSignal, timeoutMs: number, live: { count: number }) {
    this.#client = client;
    this.#interrupt = interrupt;
    this.#live = live;
    if (client.aborted) this.#controller.abort(client.reason);
    client.addEventListener("abort", this.#onAbort, { once: true });
    interrupt.addEventListener("abort", this.#onAbort, { once: true });
    live.count++;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      live.count--;
      this.#timedOut = true;
      this.#controller.abort(new DOMException("The turn timed out", "TimeoutError"));
    }, timeoutMs);
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Why the turn was cut short, for its error event. */
  why(): TurnFailure {
    if (this.#interrupt.aborted && this.#interrupt.reason instanceof TurnInterrupted)
      return this.#interrupt.reason.failure;
    if (this.#timedOut) return fixedFailure("AGENT_API_TURN_TIMED_OUT");
    if (this.#client.aborted) return fixedFailure("AGENT_API_CLIENT_DISCONNECTED");
    return fixedFailure("AGENT_API_TURN_INTERRUPTED");
  }

  dispose(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#live.count--;
    }
    this.#client.removeEventListener("abort", this.#onAbort);
    this.#interrupt.removeEventListener("abort", this.#onAbort);
  }
}
