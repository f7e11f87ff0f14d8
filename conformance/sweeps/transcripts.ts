/**
 * Every transcript the named checks read (Resources/Transcript): each message's role is user or assistant and its
 * content an array of `{type: "text", text}` blocks; each user message that is no compaction
 * summary carries `author_user_id` and `author_name`; and where the run knows who sent a turn (into a
 * conversation it made and never saw made again; into a fork's child since the fork, which only its owner may
 * send into), that is one author id per key's user, another for each other user.
 */
import type { ConversationRead, RunState } from "../context.ts";
import { expectRule } from "../model/mismatch.ts";
import {
  judgeAuthorPresent,
  judgeMessageShape,
  transcriptRules,
  turnMessages,
} from "../model/transcripts.ts";
import { Findings, type LogFacts, logFacts, type SweepFinding, turnsBetween } from "./finding.ts";
import { distinctKeys } from "./keys.ts";

type Transcript = Extract<ConversationRead, { kind: "transcript" }>;

export function judgeTranscriptsRead(
  log: ConversationRead[],
  run: RunState,
  { firstDelete, forkChildren }: LogFacts = logFacts(log),
): SweepFinding[] {
  const keys = distinctKeys(run);
  /** The author id each key's user showed first, and the key whose user showed each id. */
  const idOfKey = new Map<string, string>();
  const keyOfId = new Map<string, string>();
  const found = new Findings();
  for (const t of log
    .filter((e): e is Transcript => e.kind === "transcript")
    .sort((a, b) => a.ended - b.ended)) {
    try {
      // Whatever agent, route or turn made it: roles user or assistant, content text blocks (tool calls are in
      // the raw `events`, Resources/Transcript).
      for (const m of t.messages) judgeMessageShape(m);
      const users = turnMessages(t.messages);
      for (const m of users) judgeAuthorPresent(m);
      const owner = run.created.get(t.id)?.key;
      if (!keys || owner === undefined || !keys.has(owner) || firstDelete.has(t.id)) continue;
      // A fork's copied turns may be another user's, but what was sent into the child since is its owner's
      // (nobody else may send there): its last messages, one per turn the run saw complete before the read.
      const judged = forkChildren.has(t.id) ? ownTurnsOfChild(log, t, users) : users;
      const sender = owner;
      for (const m of judged) {
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

/**
 * The user messages of a fork's child sent into it since the fork: as many of its last ones as turns the run
 * sent into it that completed before the transcript was read; none when one was still in flight then.
 */
function ownTurnsOfChild(
  log: ConversationRead[],
  t: Transcript,
  users: Array<Record<string, unknown>>,
): Array<Record<string, unknown>> {
  const sent = log.filter((e) => e.kind === "turn-sent" && e.id === t.id && e.started < t.ended);
  if (sent.some((e) => e.kind === "turn-sent" && (e.ended > t.started || e.completed !== true))) return [];
  return sent.length === 0 ? [] : users.slice(-sent.length);
}

type Compaction = Extract<ConversationRead, { kind: "compaction" }>;

/**
 * Every last compaction that said `compacted` true, against a transcript of the same conversation read with
 * no turn sent into it in between (on any route, by any key): the transcript shows the compaction's summary.
 */
export function judgeCompactionsRead(log: ConversationRead[]): SweepFinding[] {
  const found = new Findings();
  const transcripts = log.filter((e): e is Transcript => e.kind === "transcript");
  for (const c of log.filter((e): e is Compaction => e.kind === "compaction" && e.compacted)) {
    for (const t of transcripts.filter((x) => x.id === c.id)) {
      const [first, last] = t.ended < c.started ? [t, c] : [c, t];
      if (turnsBetween(log, c.id, first, last).length > 0) continue;
      try {
        expectRule(
          transcriptRules.compactionShown,
          t.messages.some((m) => m.is_compact_summary === true),
          "a compaction summary in the transcript",
          `${c.request} says compacted true; ${t.request} holds no message with is_compact_summary true`,
        );
      } catch (error) {
        found.add(error, `${c.request} by ${c.madeBy}`, JSON.stringify(t.messages.slice(0, 8), null, 2));
      }
    }
  }
  return found.list();
}
