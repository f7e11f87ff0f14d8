/** Reading a messages-API request the way the API says: only the newest user message's text is used. */
import type { components } from "@agent-api/client/api-types";
import { badRequest } from "../errors/catalogue.ts";

type InputMessage = components["schemas"]["InputMessage"];
type UnreadMessage = components["schemas"]["UnreadMessage"];

type Blocks = Array<{ type: string; text?: string }>;

/** A string as it is; blocks: their text blocks joined by blank lines (other block types are not read). */
function textOf(content: string | Blocks): string {
  if (typeof content === "string") return content;
  return content
    .filter((block) => block.type === "text" && typeof block.text === "string")
    .map((block) => block.text as string)
    .join("\n\n");
}

/**
 * The newest `role: "user"` message's text: a string, or its text blocks joined by blank lines. The other
 * elements are never read (their shape is unchecked); the HTTP layer has checked this one is an InputMessage.
 */
export function newestUserText(messages: Array<InputMessage | UnreadMessage>): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message.role === "user") return textOf((message as InputMessage).content);
  }
  throw badRequest('messages: no element has role "user"');
}

/** `system` in either of the messages API's forms, as one string (undefined when absent). */
export function systemText(system: string | Blocks | undefined): string | undefined {
  return system === undefined ? undefined : textOf(system);
}

const TITLE_CHARS = 80;

/** Title derived from the first prompt: its first non-empty line, whitespace collapsed, cut at 80 characters. */
export function titleFrom(prompt: string): string {
  // One scan that stops past the title's length: splitting and collapsing every line of a prompt of
  // megabytes (millions of lines) to keep one line's first 80 characters was work and memory for nothing.
  let at = prompt.search(NOT_SPACE);
  let line = "";
  while (at >= 0 && at < prompt.length && prompt[at] !== "\n" && line.length <= TITLE_CHARS) {
    SPACES_IN_LINE.lastIndex = at;
    if (!SPACES_IN_LINE.test(prompt)) line += prompt[at++];
    else {
      at = SPACES_IN_LINE.lastIndex;
      if (at < prompt.length && prompt[at] !== "\n") line += " ";
    }
  }
  if (!line) return "Untitled conversation";
  return line.length <= TITLE_CHARS ? line : `${line.slice(0, TITLE_CHARS - 1)}…`;
}

const NOT_SPACE = /\S/;
/** A run of white space within one line (a CR before the line's LF included): one quantifier, no backtracking. */
const SPACES_IN_LINE = /[^\S\n]+/y;

/** Longest conversation id accepted, in characters (code points); the spec states the same limit. */
export const MAX_CONVERSATION_ID_CHARS = 256;

/** C0 controls, DEL and C1 controls: they cannot be shown, logged or typed back safely. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * The API allows "any string" as an id; the reference server takes any non-empty string of at most 256
 * characters without control characters, stored and returned verbatim (the X-Conversation-Id header carries
 * it percent-encoded when it cannot travel as it is).
 */
export function checkConversationId(id: string, field: string): void {
  // Bounded before counting: a UTF-16 length past twice the limit is past it in code points too, and
  // spreading an id of megabytes into an array of characters would cost memory for nothing.
  const chars = id.length > 2 * MAX_CONVERSATION_ID_CHARS ? id.length : [...id].length;
  if (chars === 0 || chars > MAX_CONVERSATION_ID_CHARS) {
    throw badRequest(`${field} must be 1 to ${MAX_CONVERSATION_ID_CHARS} characters`);
  }
  if (CONTROL.test(id)) throw badRequest(`${field} must not contain control characters`);
  // A lone surrogate has no UTF-8 form: it could be neither stored nor sent back as it came.
  if (!id.isWellFormed()) throw badRequest(`${field} is not well-formed Unicode (a lone surrogate)`);
  // URL clients resolve the path segments \`.\` and \`..\` (also as %2E) away, so such a conversation could
  // never be read, shared or deleted again.
  if (id === "." || id === "..")
    throw badRequest(`${field} must not be "." or ".." (not addressable in a URL path)`);
}
