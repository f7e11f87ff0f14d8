/** Maps a session's context and the new prompt to Messages API messages (alternating, user first). */
import type Anthropic from "@anthropic-ai/sdk";
import type { SessionEntry } from "./types.ts";

type MessageParam = Anthropic.Messages.MessageParam;

/** Shown in place of text the API would reject (an empty user message, a leading assistant entry). */
const RESUMED_MARKER = "(earlier conversation resumed)";

export function promptWithAttachments(prompt: string, attachments: string[]): string {
  const text = prompt.trim().length > 0 ? prompt : "(empty message)";
  if (attachments.length === 0) return text;
  return `${text}\n\nAttached files (in your working directory): ${attachments.join(", ")}`;
}

/** Consecutive entries of one role are merged, since the API requires roles to alternate. */
export function toMessages(context: SessionEntry[], userText: string): MessageParam[] {
  const messages: Array<{ role: "user" | "assistant"; content: string }> = [];
  const entries: SessionEntry[] = [...context, { role: "user", text: userText }];
  if (entries[0].role === "assistant") messages.push({ role: "user", content: RESUMED_MARKER });
  for (const entry of entries) {
    const text = entry.compactSummary ? `[Summary of the earlier conversation]\n${entry.text}` : entry.text;
    const last = messages.at(-1);
    if (last && last.role === entry.role) last.content = `${last.content}\n\n${text}`;
    else messages.push({ role: entry.role, content: text });
  }
  return messages;
}

/** The context as plain text, for the compaction request. */
export function transcriptText(context: SessionEntry[]): string {
  return context.map((e) => `${e.compactSummary ? "summary" : e.role}: ${e.text}`).join("\n\n");
}
