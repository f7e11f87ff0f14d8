/**
 * Memory (Endpoints/Send a message: resuming a conversation; States and transitions; Client guidance): a turn
 * that resumes a conversation once its `agent_session_id` is recorded answers from the earlier turns, and a
 * fork's first turn answers from the turns it copied. Judged on the code word an earlier turn asked to be
 * remembered, never on a model's wording: the recall's reply holds that word or it does not.
 */
import { expectRule } from "./mismatch.ts";
import { defineRules } from "./rules.ts";

export const memoryRules = defineRules("memory", {
  resumeRemembers: {
    section: "Endpoints/Send a message",
    check: "CONVID-OWN-RESUMES",
    text: "A turn resuming a conversation whose `agent_session_id` is recorded answers from its earlier turns, on every agent kind, key, route and depth",
  },
  forkRemembers: {
    section: "States and transitions",
    check: "STATE-FORK-CONTEXT",
    text: "A fork's first turn answers from the turns it copied of its parent, on every agent kind and key",
  },
});

/** What a conversation is known to remember: a code word, asked for in the turn at `turn` (0-based). */
export interface Remembered {
  word: string;
  turn: number;
  /** Where the memory came from: the conversation's own remembered turn, or the parent a fork copied it from. */
  via: "resume" | "fork";
  /**
   * The session of the remembering turn was seen recorded. Until then a resumed turn may legitimately remember
   * nothing (States and transitions), so the wait is made only when a recall or a fork is about to need it.
   */
  sessionSeen: boolean;
}

/**
 * Judges a recall's reply. Returns false when the reply is empty: a model may refuse or say nothing, which
 * shows no memory either way (the caller takes the turn as inconclusive).
 */
export function judgeRecall(reply: string, remembered: Remembered): boolean {
  if (reply.trim() === "") return false;
  expectRule(
    remembered.via === "fork" ? memoryRules.forkRemembers : memoryRules.resumeRemembers,
    reply.includes(remembered.word),
    `a reply holding the code word ${remembered.word} (asked to be remembered in turn ${remembered.turn + 1})`,
    JSON.stringify(reply.slice(0, 120)),
  );
  return true;
}
