/**
 * Where every title the run read came from (Resources/Conversation, `title`: derived from the first prompt at
 * creation; never changed afterwards). The suite's prompts carry nonces (`n-` and eight hex digits), each sent
 * once, so a title that holds one says which prompt it was derived from. A conversation a send created may
 * hold only its first prompt's nonces: not a later turn's, not those of a conversation deleted under the same
 * id before it, and not those its first send carried outside its prompt (an older `messages` element, the
 * `system` text, an attachment's name). A fork's child exists from the fork on, so its title may hold only nonces sent before
 * the fork answered. A nonce no prompt of the run sent says nothing and is not judged, nor is a conversation
 * whose creation the run did not see.
 */
import { type ConversationRead, NONCE_PATTERN } from "../context.ts";
import { fieldRules } from "../model/fields.ts";
import { expectRule } from "../model/mismatch.ts";
import { Findings, type SweepFinding } from "./finding.ts";

type Read = Extract<ConversationRead, { kind: "read" }>;
type TurnSent = Extract<ConversationRead, { kind: "turn-sent" }>;

const noncesOf = (text: string | undefined) => new Set(text?.match(NONCE_PATTERN) ?? []);

/** One conversation under an id, from what made it to the id's next delete. */
interface Incarnation {
  id: string;
  /** The call that made it began (a send's start, or the fork's). */
  made: number;
  /** Its end: the next delete of the id began (infinite: none). */
  until: number;
  /** The nonces its title may hold. */
  allowed: Set<string>;
  how: string;
}

export function judgeTitlesRead(log: ConversationRead[]): SweepFinding[] {
  const found = new Findings();
  const sent = log.filter((e): e is TurnSent => e.kind === "turn-sent");
  // Every nonce the run sent, in a prompt or anywhere else in a send's body (an older `messages` element,
  // `system`, an attachment's name): a title holding one that is not its first prompt's came from elsewhere.
  const prompted = new Set(sent.flatMap((e) => [...noncesOf(e.prompt), ...(e.bodyNonces ?? [])]));
  if (prompted.size === 0) return [];
  for (const life of incarnations(log, sent)) {
    const reads = log.filter(
      (e): e is Read =>
        e.kind === "read" && e.conversation.id === life.id && e.started > life.made && e.ended < life.until,
    );
    for (const r of reads) {
      const title = r.conversation.title;
      if (typeof title !== "string") continue;
      const foreign = [...noncesOf(title)].filter((n) => prompted.has(n) && !life.allowed.has(n));
      try {
        expectRule(
          fieldRules.titleFromFirstPrompt,
          foreign.length === 0,
          `a title from ${life.how}`,
          `${JSON.stringify(title)}, which holds ${foreign.join(", ")}, sent elsewhere than that prompt`,
        );
      } catch (error) {
        found.add(error, `${r.request} by ${r.madeBy}`, JSON.stringify(r.conversation, null, 2));
      }
    }
  }
  return found.list();
}

/**
 * The conversations whose making the run saw: an id whose first record is a send answered 200, or a send
 * answered 200 after a delete of the id (the unknown-id row of the resolution table), or a fork's child.
 */
function incarnations(log: ConversationRead[], sent: TurnSent[]): Incarnation[] {
  const out: Incarnation[] = [];
  const ids = new Set(sent.map((e) => e.id));
  for (const f of log) if (f.kind === "fork") ids.add(f.child);
  for (const id of ids) {
    const deletes = log
      .filter((e) => e.kind === "deleted" && e.id === id)
      .map((e) => e.started)
      .sort((a, b) => a - b);
    const firstSeen = Math.min(
      ...log
        .filter(
          (e) =>
            (e.kind === "read" && e.conversation.id === id) ||
            ((e.kind === "turn-sent" || e.kind === "deleted" || e.kind === "share-sent") && e.id === id),
        )
        .map((e) => e.started),
    );
    const fork = log.find((e) => e.kind === "fork" && e.child === id);
    if (fork?.kind === "fork") {
      const until = deletes.find((d) => d > fork.started) ?? Number.POSITIVE_INFINITY;
      const before = sent.filter((e) => e.started < fork.ended);
      out.push({
        id,
        made: fork.started,
        until,
        allowed: new Set(before.flatMap((e) => [...noncesOf(e.prompt)])),
        how: `the prompts sent before the fork that made it (${fork.request})`,
      });
      continue;
    }
    const starts = [Number.NEGATIVE_INFINITY, ...deletes];
    for (const [i, from] of starts.entries()) {
      const until = starts[i + 1] ?? Number.POSITIVE_INFINITY;
      const made = sent.filter(
        (e) => e.id === id && e.status === 200 && e.started > from && e.started < until,
      );
      if (made.length === 0) continue;
      const maker = made.reduce((a, b) => (b.started < a.started ? b : a));
      // Before the first delete, a conversation the run did not make may have been there already.
      if (i === 0 && firstSeen < maker.started) continue;
      // Sends overlapping the first: the deployment may have taken either as the first prompt.
      const first = made.filter((e) => e.started < maker.ended);
      out.push({
        id,
        made: maker.started,
        until,
        allowed: new Set(first.flatMap((e) => [...noncesOf(e.prompt)])),
        how:
          i === 0 ? "its first prompt" : "its first prompt after the delete of the conversation the id named",
      });
    }
  }
  return out;
}
