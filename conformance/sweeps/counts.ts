/**
 * What a conversation can hold, bounded by the turns the run sent into it (Resources/Conversation,
 * `turn_count`; Resources/Transcript; Rule 1: one new user message per call). For a conversation the run made
 * with its own calls (not a fork's child, not sent into by a client of a check's own, read before any delete
 * of its id), a read's `turn_count` and a transcript's user messages (compaction summaries aside) are at most
 * the turns sent into it before the read ended, refused sends left out. Bounds only: when a turn's counts are
 * stored is not shown, so fewer is never judged here (sweeps/activity.ts judges a turn between two reads).
 */
import type { ConversationRead, RunState } from "../context.ts";
import { fieldRules } from "../model/fields.ts";
import { expectRule } from "../model/mismatch.ts";
import { transcriptRules, turnMessages } from "../model/transcripts.ts";
import { Findings, type LogFacts, logFacts, type SweepFinding } from "./finding.ts";

type TurnSent = Extract<ConversationRead, { kind: "turn-sent" }>;

export function judgeCountsRead(
  log: ConversationRead[],
  run: RunState,
  { firstDelete, forkChildren }: LogFacts = logFacts(log),
): SweepFinding[] {
  const found = new Findings();
  const sent = new Map<string, TurnSent[]>();
  const firstSeen = new Map<string, ConversationRead>();
  for (const e of [...log].sort((a, b) => a.started - b.started)) {
    const id = e.kind === "read" ? e.conversation.id : "id" in e ? e.id : undefined;
    if (typeof id === "string" && !firstSeen.has(id)) firstSeen.set(id, e);
    if (e.kind === "turn-sent") sent.set(e.id, [...(sent.get(e.id) ?? []), e]);
  }
  const judged = (id: string) =>
    run.created.has(id) &&
    !run.sentOutside.has(id) &&
    !forkChildren.has(id) &&
    firstSeen.get(id)?.kind === "turn-sent";
  // Sends a 4xx refused made no turn; any other (or no) answer may have.
  const bound = (id: string, ended: number) =>
    (sent.get(id) ?? []).filter(
      (t) => t.started < ended && !(t.status !== undefined && t.status >= 400 && t.status < 500),
    ).length;
  for (const e of log) {
    if (e.kind !== "read" && e.kind !== "transcript") continue;
    const id = e.kind === "read" ? e.conversation.id : e.id;
    if (typeof id !== "string" || !judged(id) || e.ended > (firstDelete.get(id) ?? Number.POSITIVE_INFINITY))
      continue;
    const most = bound(id, e.ended);
    try {
      if (e.kind === "read" && typeof e.conversation.turn_count === "number")
        expectRule(
          fieldRules.turnCount,
          e.conversation.turn_count <= most,
          `at most ${most}, the turns sent into it before the read ended`,
          e.conversation.turn_count,
        );
      if (e.kind === "transcript") {
        const users = turnMessages(e.messages);
        expectRule(
          transcriptRules.onePerTurn,
          users.length <= most,
          `at most ${most} user message(s), one per turn sent into it before the read ended`,
          `${users.length}`,
        );
      }
    } catch (error) {
      const where = `${e.request} by ${e.madeBy}: conversation ${id}`;
      found.add(
        error,
        where,
        JSON.stringify(e.kind === "read" ? e.conversation : e.messages.slice(0, 8), null, 2),
      );
    }
  }
  return found.list();
}
