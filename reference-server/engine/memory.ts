/**
 * What a session remembers. Memory is derived only from the session context handed to the turn, so a turn
 * without a session (fresh, or sent before `agent_session_id` was recorded) remembers nothing.
 */

import { rememberedWordsIn } from "./phrases.ts";
import type { SessionEntry } from "./types.ts";

const SUMMARY_WORDS = /Code words remembered: ([A-Za-z0-9_, -]+)\./;

/** Code words carried by a compaction summary (see compaction.ts), in the order they were remembered. */
export function wordsInSummary(summary: string): string[] {
  const match = SUMMARY_WORDS.exec(summary);
  if (!match) return [];
  return match[1]
    .split(",")
    .map((w) => w.trim())
    .filter((w) => w.length > 0);
}

/** Every code word the context remembers, oldest first; a word remembered twice appears where it was last. */
export function rememberedCodeWords(context: SessionEntry[]): string[] {
  const words: string[] = [];
  for (const entry of context) {
    if (entry.role !== "user") continue;
    const found = entry.compactSummary ? wordsInSummary(entry.text) : rememberedWordsIn(entry.text);
    for (const word of found) {
      const earlier = words.indexOf(word);
      if (earlier >= 0) words.splice(earlier, 1);
      words.push(word);
    }
  }
  return words;
}
