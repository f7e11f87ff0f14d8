/**
 * Every transcript the named checks read (Resources/Transcript): each user message that is no compaction
 * summary carries `author_user_id` and `author_name`; and where the run knows who sent every turn (a
 * conversation it made and never forked into, nor saw made again), that is one author id per key's user,
 * another for each other user.
 */
import type { ConversationRead, RunState } from "../context.ts";
import { expectRule } from "../model/mismatch.ts";
import { judgeAuthorPresent, transcriptRules } from "../model/transcripts.ts";
import { Findings, type LogFacts, logFacts, type SweepFinding } from "./finding.ts";
import { distinctKeys } from "./keys.ts";

type Transcript = Extract<ConversationRead, { kind: "transcript" }>;

export function judgeTranscriptsRead(
  log: ConversationRead[],
  run: RunState,
  { firstDelete, forkChildren }: LogFacts = logFacts(log),
): SweepFinding[] {
  // Deleted (then made again, by anyone) or a fork's child (its copied turns may be another user's).
  const unknownSenders = (id: string) => firstDelete.has(id) || forkChildren.has(id);
  const keys = distinctKeys(run);
  /** The author id each key's user showed first, and the key whose user showed each id. */
  const idOfKey = new Map<string, string>();
  const keyOfId = new Map<string, string>();
  const found = new Findings();
  for (const t of log
    .filter((e): e is Transcript => e.kind === "transcript")
    .sort((a, b) => a.ended - b.ended)) {
    try {
      const users = t.messages.filter((m) => m.role === "user" && m.is_compact_summary !== true);
      for (const m of users) judgeAuthorPresent(m);
      const sender = unknownSenders(t.id) ? undefined : run.created.get(t.id)?.key;
      if (!keys || sender === undefined || !keys.has(sender)) continue;
      for (const m of users) {
        const id = String(m.author_user_id);
        const known = idOfKey.get(sender);
        if (known === undefined) idOfKey.set(sender, id);
        expectRule(
          transcriptRules.authorIsSender,
          known === undefined || known === id,
          `${JSON.stringify(known)}, the id this key's user showed before`,
          JSON.stringify(id),
        );
        const other = keyOfId.get(id);
        if (other === undefined) keyOfId.set(id, sender);
        expectRule(
          transcriptRules.authorIsSender,
          other === undefined || other === sender,
          "an id of this key's user, not another user's",
          JSON.stringify(id),
        );
      }
    } catch (error) {
      found.add(error, `${t.request} by ${t.madeBy}`, JSON.stringify(t.messages.slice(0, 10), null, 2));
    }
  }
  return found.list();
}
