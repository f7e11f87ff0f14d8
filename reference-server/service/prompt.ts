/** Reading a messages-API request the way the seed says: only the newest user message's text is used. */
import type { components } from "../../generated/api-types.ts";
import { badRequest } from "./errors.ts";

type InputMessage = components["schemas"]["InputMessage"];

/** The newest `role: "user"` message's text: a string, or its text blocks joined by blank lines. */
export function newestUserText(messages: InputMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message.role !== "user") continue;
    if (typeof message.content === "string") return message.content;
    return message.content
      .filter((block) => block.type === "text" && typeof block.text === "string")
      .map((block) => block.text as string)
      .join("\n\n");
  }
  throw badRequest('messages: no element has role "user"');
}

const TITLE_CHARS = 80;

/** Title derived from the first prompt: its first non-empty line, whitespace collapsed, cut at 80 characters. */
export function titleFrom(prompt: string): string {
  const line = prompt
    .split(/\r?\n/)
    .map((l) => l.replace(/\s+/g, " ").trim())
    .find((l) => l.length > 0);
  if (!line) return "Untitled conversation";
  return line.length <= TITLE_CHARS ? line : `${line.slice(0, TITLE_CHARS - 1)}…`;
}

/** Longest conversation id accepted; ids travel in a header and in URL paths. */
export const MAX_CONVERSATION_ID_CHARS = 256;

/**
 * A conversation id must fit in the `X-Conversation-Id` header verbatim: printable ASCII only. The seed
 * allows "any string"; an id HTTP cannot carry back unchanged is refused with 400 rather than altered.
 */
export function checkConversationId(id: string, field: string): void {
  if (id.length === 0 || id.length > MAX_CONVERSATION_ID_CHARS) {
    throw badRequest(`${field} must be 1 to ${MAX_CONVERSATION_ID_CHARS} characters`);
  }
  if (!/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(id)) {
    throw badRequest(
      `${field} must be printable ASCII without leading or trailing spaces (it is returned in the X-Conversation-Id header)`,
    );
  }
  // URL clients resolve the path segments `.` and `..` (also as %2E) away, so such a conversation could
  // never be read, shared or deleted again.
  if (id === "." || id === "..")
    throw badRequest(`${field} must not be "." or ".." (not addressable in a URL path)`);
}
