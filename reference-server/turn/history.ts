/**
 * What a session stores: the full Messages history of the conversation (every block the model and the
 * tools produced: text, thinking with its signature, redacted thinking, tool_use, tool_result), sent back
 * unchanged on resume, and its size in tokens as the upstream last measured it (the compaction budget's
 * measure). Sessions written before histories were kept (a list of `{role, text}` entries; a fork still
 * writes that form from the transcript when the parent's history predates per-turn rows) are read as plain
 * text messages.
 */

import type { MessageParam } from "../engine/types.ts";
import { SUMMARY_MARKER } from "../scripted-model/prompt-parts.ts";

export interface LoadedHistory {
  messages: MessageParam[];
  tokens: number;
}

/** The older session form (one text per message), which a fork of a pre-migration-6 history writes. */
export interface SessionTextEntry {
  role: "user" | "assistant";
  text: string;
  compactSummary?: boolean;
}

export function loadHistory(context: unknown): LoadedHistory {
  if (isStored(context)) return context;
  if (!Array.isArray(context)) return { messages: [], tokens: 0 };
  const messages: MessageParam[] = [];
  let chars = 0;
  for (const entry of context as SessionTextEntry[]) {
    if (typeof entry?.text !== "string" || (entry.role !== "user" && entry.role !== "assistant")) continue;
    const text = entry.compactSummary ? `${SUMMARY_MARKER}\n${entry.text}` : entry.text;
    if (text.length === 0) continue;
    chars += text.length;
    const last = messages.at(-1);
    // The Messages API wants roles to alternate: entries of one role in a row become one message.
    if (last && last.role === entry.role && Array.isArray(last.content))
      last.content.push({ type: "text", text });
    else messages.push({ role: entry.role, content: [{ type: "text", text }] });
  }
  // A history must start with the user; a leading assistant entry gets a user line before it.
  if (messages[0]?.role === "assistant")
    messages.unshift({ role: "user", content: [{ type: "text", text: "(earlier conversation resumed)" }] });
  return { messages, tokens: Math.ceil(chars / 4) };
}

function isStored(value: unknown): value is LoadedHistory {
  return (
    typeof value === "object" &&
    value !== null &&
    Array.isArray((value as LoadedHistory).messages) &&
    typeof (value as LoadedHistory).tokens === "number"
  );
}
