import type { ConversationRead } from "../context.ts";
import { Mismatch } from "../model/mismatch.ts";

type ShareSent = Extract<ConversationRead, { kind: "share-sent" }>;

/** A rule the run's own traffic broke, found after the named checks ran, owned by the check `check`. */
export interface SweepFinding {
  check: string;
  message: string;
  evidence: string;
}

/** The first breach of each rule a sweep meets; anything thrown that is no Mismatch is a bug, thrown on. */
export class Findings {
  readonly #byRule = new Map<string, SweepFinding>();

  add(error: unknown, where: string, evidence: string): void {
    if (!(error instanceof Mismatch)) throw error;
    if (this.#byRule.has(error.rule.id)) return;
    this.#byRule.set(error.rule.id, {
      check: error.rule.check,
      message: `${where}: ${error.rule.text}: expected ${error.expected}, saw ${error.actual}`,
      evidence,
    });
  }

  list(): SweepFinding[] {
    return [...this.#byRule.values()];
  }
}

/** What the run's own calls say of its conversations, read once for every sweep. */
export interface LogFacts {
  /** Where each id's first delete began: its reads after that may be of another conversation. */
  firstDelete: Map<string, number>;
  /** Ids a share toggle was sent for (by anyone, answered anyhow). */
  toggled: Set<string>;
  /** The share toggles sent for each id, in the order they ended. */
  toggles: Map<string, ShareSent[]>;
  /** Ids a fork of the run made. */
  forkChildren: Set<string>;
  /** The `created_at` each id's first read showed: a read showing another is of a conversation made again. */
  firstCreatedAt: Map<string, unknown>;
}

export function logFacts(log: ConversationRead[]): LogFacts {
  const facts: LogFacts = {
    firstDelete: new Map(),
    toggled: new Set(),
    toggles: new Map(),
    forkChildren: new Set(),
    firstCreatedAt: new Map(),
  };
  for (const e of [...log].sort((a, b) => a.ended - b.ended)) {
    if (e.kind === "deleted")
      facts.firstDelete.set(e.id, Math.min(facts.firstDelete.get(e.id) ?? e.started, e.started));
    else if (e.kind === "share-sent") {
      facts.toggled.add(e.id);
      facts.toggles.set(e.id, [...(facts.toggles.get(e.id) ?? []), e]);
    } else if (e.kind === "fork-child") facts.forkChildren.add(e.id);
    else if (
      e.kind === "read" &&
      typeof e.conversation.id === "string" &&
      !facts.firstCreatedAt.has(e.conversation.id)
    )
      facts.firstCreatedAt.set(e.conversation.id, e.conversation.created_at);
  }
  return facts;
}

/**
 * What `shared` must read for a call spanning [started, ended] on a conversation the run made (States and
 * transitions: false at creation, then the owner's last toggle; a refused toggle changes nothing): the value
 * of the last toggle accepted before the call began. A body holding no boolean `shared` names no value, so it
 * sets none however it is answered. Undefined where the run cannot tell: a toggle still in flight during the
 * call, or one answered in a way that does not say whether it took (a 2xx for a body with a boolean `shared`
 * that is not exactly {"shared": <boolean>}, a 5xx, no answer).
 */
export function sharedDuring(
  toggles: ShareSent[] | undefined,
  started: number,
  ended: number,
): { shared: boolean; after?: ShareSent } | undefined {
  let state: { shared: boolean; after?: ShareSent } = { shared: false };
  for (const t of toggles ?? []) {
    // A body that holds no boolean `shared` names no value to set: whatever it was answered, it sets none.
    if (t.started > ended || t.namesValue === false) continue;
    if (t.ended > started) return undefined;
    const accepted = t.status >= 200 && t.status < 300;
    const refused = t.status >= 400 && t.status < 500;
    if (accepted && t.shared !== undefined) state = { shared: t.shared, after: t };
    else if (!refused) return undefined;
  }
  return state;
}

type TurnSent = Extract<ConversationRead, { kind: "turn-sent" }>;

/** The turns sent into `id` that could have run between the start of `from` and the end of `to`. */
export function turnsBetween(
  log: ConversationRead[],
  id: string,
  from: { started: number },
  to: { ended: number },
): TurnSent[] {
  return log.filter(
    (e): e is TurnSent =>
      e.kind === "turn-sent" && e.id === id && e.ended > from.started && e.started < to.ended,
  );
}
