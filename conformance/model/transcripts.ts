/**
 * The transcript (Resources/Transcript; Endpoints/Send a message): one user message per turn holding the newest
 * user text sent (text blocks joined with blank lines), in order, with its author; a fork's copied turns first.
 */
import { expectRule } from "./mismatch.ts";
import { defineRules } from "./rules.ts";
import type { ConversationModel } from "./state.ts";

export const transcriptRules = defineRules("transcripts", {
  userTurns: {
    section: "Resources/Transcript",
    check: "MEANING-TRANSCRIPT-ORDER",
    text: "The transcript holds each turn's user message, in order, as sent (a fork's copied turns first)",
  },
  newestUserOnly: {
    section: "Endpoints/Send a message",
    check: "SEND-NEWEST-USER-ONLY",
    text: "Only the newest `user` element of `messages` is used",
  },
  blocksJoined: {
    section: "Endpoints/Send a message",
    check: "CONSIST-CONTENT-JOIN",
    text: "Text blocks of `content` are joined with blank lines; non-text blocks are not read",
  },
  author: {
    section: "Resources/Transcript",
    check: "MEANING-TRANSCRIPT-AUTHOR",
    text: "`author_user_id` and `author_name` are present on user messages",
  },
  roles: {
    section: "Resources/Transcript",
    check: "TRANSCRIPT-SHAPE",
    text: "Each message's role is `user` or `assistant`, its content text blocks",
  },
});

/** The text of a message: its text blocks joined with blank lines. */
export function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((b) => b && typeof b === "object" && (b as { type?: unknown }).type === "text")
    .map((b) => String((b as { text?: unknown }).text ?? ""))
    .join("\n\n");
}

export function judgeTranscript(messages: unknown, c: ConversationModel): void {
  expectRule(transcriptRules.roles, Array.isArray(messages), "an array of messages", typeof messages);
  const list = messages as Array<Record<string, unknown>>;
  const users: string[] = [];
  for (const m of list) {
    expectRule(
      transcriptRules.roles,
      m.role === "user" || m.role === "assistant",
      "user or assistant",
      m.role,
    );
    if (m.role !== "user" || m.is_compact_summary === true) continue;
    expectRule(
      transcriptRules.author,
      typeof m.author_user_id === "string" && typeof m.author_name === "string",
      "author_user_id and author_name on a user message",
      Object.keys(m),
    );
    users.push(messageText(m.content));
  }
  expectRule(
    transcriptRules.userTurns,
    users.length === c.history.length && users.every((u, i) => u.trim() === c.history[i].trim()),
    JSON.stringify(c.history),
    JSON.stringify(users),
  );
}
