/**
 * What moves a conversation's `updated_at` and `turn_count` (Resources/Conversation; Endpoints/List
 * conversations: newest activity first), judged over every pair of reads of a conversation the run made, on
 * whichever routes and under whichever keys they were made:
 * - `updated_at` never moves back;
 * - a turn the deployment ran (a 200 stream to message_stop) between two reads is activity: the later read's
 *   `updated_at` is later, and `turn_count` is one more for each such turn;
 * (That two reads with nothing between them agree is not judged: when a turn's counts are stored is not
 * shown, and a deployment on the Messages API engine stores them after the stream closed.)
 * A turn that failed, was refused or overlaps a read says nothing about the counts, so its pair is skipped.
 */
import type { ConversationRead, RunState } from "../context.ts";
import { fieldRules } from "../model/fields.ts";
import { expectRule } from "../model/mismatch.ts";
import { Findings, type LogFacts, logFacts, type SweepFinding, turnsBetween } from "./finding.ts";

type Read = Extract<ConversationRead, { kind: "read" }>;
type Span = { started: number; ended: number };

const MS_SHOWN = /\.\d{2}[1-9]|\.\d[1-9]\d|\.[1-9]\d{2}/;

/** What happened to `id` between the start of `a` and the end of `b`. */
function between(log: ConversationRead[], id: string, a: Span, b: Span) {
  const inWindow = (e: Span) => e.ended > a.started && e.started < b.ended;
  const turns = turnsBetween(log, id, a, b);
  const other = log.some(
    (e) =>
      inWindow(e) && ((e.kind === "share-sent" && e.id === id) || (e.kind === "fork" && e.parent === id)),
  );
  // Every turn fully between the reads, and ran by the deployment: the count is known.
  // A send the check expected refused, answered as a turn anyway, may never have reached the deployment.
  const clean = turns.every(
    (t) => t.completed === true && !t.refusalExpected && t.started > a.ended && t.ended < b.started,
  );
  return { turns: turns.length, clean, other };
}

export function judgeActivityRead(
  log: ConversationRead[],
  run: RunState,
  { firstDelete, firstCreatedAt }: LogFacts = logFacts(log),
): SweepFinding[] {
  const found = new Findings();
  const byId = new Map<string, Read[]>();
  for (const e of log) {
    if (e.kind !== "read" || typeof e.conversation.id !== "string") continue;
    const id = e.conversation.id;
    if (!run.created.has(id) || e.ended > (firstDelete.get(id) ?? Number.POSITIVE_INFINITY)) continue;
    // Another conversation under the id (a client of the workspace remade it): not the run's to judge.
    if (e.conversation.created_at !== firstCreatedAt.get(id)) continue;
    byId.set(id, [...(byId.get(id) ?? []), e]);
  }
  for (const [id, reads] of byId) {
    reads.sort((x, y) => x.ended - y.ended);
    for (let i = 1; i < reads.length; i++) {
      const a = reads[i - 1];
      const b = reads[i];
      if (!(a.ended < b.started)) continue;
      const was = a.conversation;
      const now = b.conversation;
      const tA = Date.parse(String(was.updated_at));
      const tB = Date.parse(String(now.updated_at));
      const where = `${b.request} by ${b.madeBy}, after ${a.request} by ${a.madeBy}: conversation ${id}`;
      try {
        if (Number.isNaN(tA) || Number.isNaN(tB)) continue;
        expectRule(
          fieldRules.createdStable,
          tB >= tA,
          `updated_at at or after ${String(was.updated_at)}, as the earlier read showed it`,
          now.updated_at,
        );
        const happened = between(log, id, a, b);
        const countA = was.turn_count;
        const countB = now.turn_count;
        if (happened.turns > 0 && happened.clean && !happened.other) {
          const strict = MS_SHOWN.test(String(was.updated_at)) || MS_SHOWN.test(String(now.updated_at));
          expectRule(
            fieldRules.updatedMoves,
            strict ? tB > tA : tB >= tA,
            `updated_at later than ${String(was.updated_at)}: ${happened.turns} turn(s) ran between the reads`,
            now.updated_at,
          );
          if (typeof countA === "number" && typeof countB === "number")
            expectRule(
              fieldRules.turnCount,
              countB === countA + happened.turns,
              `turn_count ${countA + happened.turns}: ${countA}, then ${happened.turns} turn(s) ran`,
              countB,
            );
        }
      } catch (error) {
        found.add(error, where, JSON.stringify({ before: was, after: now }, null, 2));
      }
    }
  }
  return found.list();
}
