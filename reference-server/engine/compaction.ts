/**
 * Automatic compaction: when a session's context grows past the budget, the engine replaces it with one
 * summary entry before answering. The summary keeps what later turns rely on (remembered code words), so
 * memory survives compaction.
 */
import { rememberedCodeWords } from "./memory.ts";
import type { SessionEntry } from "./types.ts";

const EXCERPT_CHARS = 120;

/** Characters of all entries plus the new prompt: the size the budget is compared against. */
export function contextChars(context: SessionEntry[], prompt: string): number {
  return context.reduce((sum, entry) => sum + entry.text.length, prompt.length);
}

/** Compact only when there is something to compact and the turn would exceed the budget. */
export function needsCompaction(context: SessionEntry[], prompt: string, budgetChars: number): boolean {
  return context.length > 0 && contextChars(context, prompt) > budgetChars;
}

function excerpt(text: string): string {
  const oneLine = text.replace(/\s+/g, " ").trim();
  return oneLine.length > EXCERPT_CHARS ? `${oneLine.slice(0, EXCERPT_CHARS)}…` : oneLine;
}

/** A deterministic digest of the context; `Code words remembered: X, Y.` is parsed back by memory.ts. */
export function summarizeContext(context: SessionEntry[]): string {
  const userTurns = context.filter((e) => e.role === "user" && !e.compactSummary).length;
  const assistantTurns = context.filter((e) => e.role === "assistant").length;
  const firstRequest = context.find((e) => e.role === "user" && !e.compactSummary);
  const words = rememberedCodeWords(context);
  const parts = [
    `Summary of earlier conversation: ${userTurns} user message(s) and ${assistantTurns} assistant repl(ies) were compacted.`,
  ];
  if (firstRequest) parts.push(`First request: "${excerpt(firstRequest.text)}".`);
  parts.push(
    words.length > 0 ? `Code words remembered: ${words.join(", ")}.` : "No code words were remembered.",
  );
  return parts.join(" ");
}
