/**
 * What a conversation remembers, read from the Messages history a request carries: the code words its
 * user messages asked to remember, and those a compaction summary restated. A turn without a session
 * (fresh, or sent before `agent_session_id` was recorded) is sent no history and remembers nothing.
 */
import type Anthropic from "@anthropic-ai/sdk";
import { rememberedWordsIn } from "./phrases.ts";
import { SUMMARY_MARKER } from "./prompt-parts.ts";

const SUMMARY_WORDS = /Code words remembered: ([A-Za-z0-9_, -]+)\./;

/** Code words carried by a compaction summary, in the order they were remembered. */
export function wordsInSummary(summary: string): string[] {
  const match = SUMMARY_WORDS.exec(summary);
  if (!match) return [];
  return match[1]
    .split(",")
    .map((w) => w.trim())
    .filter((w) => w.length > 0);
}

/**
 * The code word remembered last, read from the newest message back: a turn that recalls stops at the
 * newest message that remembered one instead of reading the whole conversation.
 */
export function lastRememberedWord(
  history: Anthropic.Messages.MessageParam[],
  end: number = history.length,
): string | undefined {
  for (let i = Math.min(end, history.length) - 1; i >= 0; i--) {
    const message = history[i];
    if (message.role !== "user") continue;
    const texts =
      typeof message.content === "string"
        ? [message.content]
        : message.content.flatMap((b) => (b.type === "text" ? [b.text] : []));
    for (let j = texts.length - 1; j >= 0; j--) {
      const text = texts[j];
      const found = text.startsWith(SUMMARY_MARKER) ? wordsInSummary(text) : rememberedWordsIn(text);
      if (found.length > 0) return found[found.length - 1];
    }
  }
  return undefined;
}

/** Every code word the history remembers, oldest first; a word remembered twice appears where it was last. */
export function rememberedCodeWords(history: Anthropic.Messages.MessageParam[]): string[] {
  const words: string[] = [];
  for (const message of history) {
    if (message.role !== "user") continue;
    const texts =
      typeof message.content === "string"
        ? [message.content]
        : message.content.flatMap((b) => (b.type === "text" ? [b.text] : []));
    for (const text of texts) {
      const found = text.startsWith(SUMMARY_MARKER) ? wordsInSummary(text) : rememberedWordsIn(text);
      for (const word of found) {
        const earlier = words.indexOf(word);
        if (earlier >= 0) words.splice(earlier, 1);
        words.push(word);
      }
    }
  }
  return words;
}
