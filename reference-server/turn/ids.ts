/** The ids the server makes: a conversation's (when the request names none) and a session's. */
import { randomUUID } from "node:crypto";

export function newConversationId(): string {
  return `conv_${randomUUID()}`;
}

export function newSessionId(): string {
  return `sess_${randomUUID()}`;
}
