/**
 * Every fork the named checks made (Endpoints/Fork a conversation; Resources/Fork result; States and
 * transitions), whatever it forked and with whichever `at_turn`: `forked_at_turn` names a turn within the
 * parent's length (at_turn clamped to it), at its end when the fork copied all turns (no at_turn, or one
 * past the end); the child's `forked_at_turn_index` says the same wherever it is read; the parent's
 * `turn_count` is the same after the fork as before it.
 *
 * The parent's length is known only from a read of it with no turn sent into it between that read and the
 * fork (nor while either ran); whether turns count from 0 or 1 is not shown, so at the end means the last
 * turn or the count.
 */
import type { ConversationRead } from "../context.ts";
import { forkRules } from "../model/forks.ts";
import { expectRule } from "../model/mismatch.ts";
import { Findings, type LogFacts, logFacts, type SweepFinding, turnsBetween } from "./finding.ts";

type Read = Extract<ConversationRead, { kind: "read" }>;
type Fork = Extract<ConversationRead, { kind: "fork" }>;
type Span = { started: number; ended: number };

/** Whether a turn into `id` could have run between the start of `from` and the end of `to`. */
const turnBetween = (log: ConversationRead[], id: string, from: Span, to: Span) =>
  turnsBetween(log, id, from, to).length > 0;

const turnCount = (read: Read) =>
  typeof read.conversation.turn_count === "number" ? read.conversation.turn_count : undefined;

export function judgeForksRead(
  log: ConversationRead[],
  { firstDelete }: LogFacts = logFacts(log),
): SweepFinding[] {
  const reads = log
    .filter((e): e is Read => e.kind === "read" && typeof e.conversation.id === "string")
    .sort((a, b) => a.ended - b.ended);
  const readsOf = (id: string) => reads.filter((r) => r.conversation.id === id);
  const live = (id: string, at: Span) => (firstDelete.get(id) ?? Number.POSITIVE_INFINITY) > at.ended;
  const found = new Findings();
  for (const fork of log.filter((e): e is Fork => e.kind === "fork" && live(e.parent, e))) {
    const where = `${fork.request} by ${fork.madeBy} (at_turn ${fork.atTurn ?? "omitted"}), child ${fork.child}`;
    const before = readsOf(fork.parent)
      .filter((r) => r.ended < fork.started && turnCount(r) !== undefined)
      .sort((a, b) => b.ended - a.ended)[0];
    const length = before && !turnBetween(log, fork.parent, before, fork) ? turnCount(before) : undefined;
    try {
      const told = readsOf(fork.child).filter((r) => live(fork.child, r) && r.ended > fork.ended);
      for (const r of told) {
        const index = r.conversation.forked_at_turn_index;
        if (typeof fork.forkedAt === "number" && typeof index === "number")
          expectRule(
            forkRules.result,
            index === fork.forkedAt,
            `forked_at_turn_index ${fork.forkedAt}, the fork result's forked_at_turn (${r.request})`,
            index,
          );
      }
      if (length === undefined || before === undefined || typeof fork.forkedAt !== "number") continue;
      const copiesAll = fork.atTurn === undefined || fork.atTurn >= length;
      if (fork.atTurn !== undefined && fork.atTurn < 0) continue;
      expectRule(
        forkRules.forkedAtRecorded,
        fork.forkedAt >= 0 && fork.forkedAt <= length,
        `a turn within the parent's ${length} turns (turn_count as ${before.request} read it just before), at_turn clamped`,
        fork.forkedAt,
      );
      if (copiesAll && length > 0)
        expectRule(
          forkRules.forkedAtRecorded,
          fork.forkedAt >= length - 1,
          `the parent's last turn (${length - 1} or ${length}): the fork copied all ${length} turns`,
          fork.forkedAt,
        );
      // The parent is unchanged: read again before any turn into it, it has the turns it had.
      for (const after of readsOf(fork.parent).filter(
        (r) => r.started > fork.ended && live(fork.parent, r),
      )) {
        if (turnBetween(log, fork.parent, before, after)) break;
        const count = turnCount(after);
        if (count !== undefined)
          expectRule(
            forkRules.childPrivateOwned,
            count === length,
            `the parent's turn_count ${length}, as before the fork (${after.request})`,
            count,
          );
      }
    } catch (error) {
      found.add(error, where, JSON.stringify({ ...fork, parentTurns: length }, null, 2));
    }
  }
  return found.list();
}
