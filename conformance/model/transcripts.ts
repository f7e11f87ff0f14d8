/**
 * The transcript (Resources/Transcript; Endpoints/Send a message): one user message per turn holding the newest
 * user text sent (text blocks joined with blank lines), in order, with its author; a fork's copied turns first.
 */

import type { LearnedChoices } from "./choices.ts";
import { expectRule } from "./mismatch.ts";
import { defineRules } from "./rules.ts";
import type { Actor, ConversationModel } from "./state.ts";

export const transcriptRules = defineRules("transcripts", {
  userTurns: {
    section: "Resources/Transcript",
    check: "MEANING-TRANSCRIPT-ORDER",
    text: "The transcript holds each turn's user message, in order, as sent (a fork's copied turns first)",
  },
  onePerTurn: {
    section: "Resources/Transcript",
    check: "MEANING-TRANSCRIPT-ORDER",
    text: "The transcript holds one user message per turn (Rule 1: one new user message per call): nothing else a send carries (earlier `messages` elements, `system`, attachments) is stored as a user message",
  },
  compactionShown: {
    section: "Endpoints/Get last compaction",
    check: "COMPACTION-NOT-EMPTY-TURN",
    text: "Last compaction tells a compaction step from an empty turn: `compacted` true only where the transcript holds the compaction's summary (a user message with `is_compact_summary` true)",
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
  authorIsSender: {
    section: "Resources/Transcript",
    check: "MEANING-TRANSCRIPT-AUTHOR",
    text: "Each user message's `author_user_id` is its sender's, at every depth and in a fork's copied turns: one id per key's user, different users' ids differ",
  },
  roles: {
    section: "Resources/Transcript",
    check: "TRANSCRIPT-SHAPE",
    text: "Each message's role is `user` or `assistant`, its content text blocks",
  },
});

/** The text of a message: its text blocks joined with blank lines. */
/**
 * A transcript's turn messages: its user messages but compaction summaries (Endpoints/Get a transcript:
 * `is_compact_summary`), from a transcript body or its `messages` array; anything else reads as none.
 */
export function turnMessages(transcript: unknown): Array<Record<string, unknown>> {
  const messages = isObject(transcript) && !Array.isArray(transcript) ? transcript.messages : transcript;
  if (!Array.isArray(messages)) return [];
  return messages.filter(
    (m): m is Record<string, unknown> => isObject(m) && m.role === "user" && m.is_compact_summary !== true,
  );
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;

export function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((b) => b && typeof b === "object" && (b as { type?: unknown }).type === "text")
    .map((b) => String((b as { text?: unknown }).text ?? ""))
    .join("\n\n");
}

export function judgeTranscript(messages: unknown, c: ConversationModel, choices?: LearnedChoices): void {
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
    judgeAuthorPresent(m);
    const sender = c.authors[users.length];
    if (choices && sender !== undefined) judgeAuthor(String(m.author_user_id), sender, users.length, choices);
    users.push(messageText(m.content));
  }
  expectRule(
    transcriptRules.userTurns,
    users.length === c.history.length && users.every((u, i) => u.trim() === c.history[i].trim()),
    JSON.stringify(c.history),
    JSON.stringify(users),
  );
}

const authorChoice = (actor: Actor) => `author_user_id of the ${actor} key's user`;

/** The id a key's user first shows is its id on every message it sent; another key's user has another. */
function judgeAuthor(id: string, sender: Actor, index: number, choices: LearnedChoices): void {
  const learned = choices.get(authorChoice(sender));
  if (learned === undefined) {
    const clash = (["owner", "member"] as const).find(
      (a) => a !== sender && choices.get(authorChoice(a)) === id,
    );
    expectRule(
      transcriptRules.authorIsSender,
      clash === undefined,
      `the ${sender} key's user's id (not the ${clash} key's ${id})`,
      `message ${index + 1} by ${id}`,
    );
    choices.observe(authorChoice(sender), id);
    return;
  }
  expectRule(
    transcriptRules.authorIsSender,
    id === learned,
    `${learned} (the ${sender} key's user, who sent message ${index + 1})`,
    id,
  );
}

/** A user message that is no compaction summary carries a non-empty `author_user_id` and `author_name`. */
/** A message of a transcript: role `user` or `assistant`, content an array of `{type: "text", text}` blocks. */
export function judgeMessageShape(m: Record<string, unknown>): void {
  expectRule(transcriptRules.roles, m.role === "user" || m.role === "assistant", "user or assistant", m.role);
  const blocks = Array.isArray(m.content) ? m.content : undefined;
  const bad = blocks?.find((b) => !isObject(b) || b.type !== "text" || typeof b.text !== "string");
  expectRule(
    transcriptRules.roles,
    blocks !== undefined && bad === undefined,
    `${m.role} content as an array of {type: "text", text} blocks`,
    JSON.stringify(bad ?? m.content).slice(0, 200),
  );
}

export function judgeAuthorPresent(m: Record<string, unknown>): void {
  expectRule(
    transcriptRules.author,
    typeof m.author_user_id === "string" &&
      m.author_user_id !== "" &&
      typeof m.author_name === "string" &&
      m.author_name !== "",
    "author_user_id and author_name on a user message",
    JSON.stringify({ author_user_id: m.author_user_id, author_name: m.author_name }),
  );
}
