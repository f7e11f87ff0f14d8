/**
 * Rewrites both mutation tables use (table-mutations.ts, outside-mutations.ts): the conversation objects of
 * an answer, by route, and the ASCII folding of a server that rewrites the ids it stores.
 */
import { type Json, jsonOf, type ProxyCall, type ProxyResponse, withJson } from "./proxy-calls.ts";

/** The conversation objects of a JSON answer, by route: the single fetch, the list, the transcript. */
export const CONVERSATION_CARRIERS: Record<string, (body: Json) => Json[]> = {
  conversation: (body) => (body?.conversation ? [body.conversation] : []),
  list: (body) => (Array.isArray(body?.conversations) ? body.conversations : []),
  transcript: (body) => (body?.conversation ? [body.conversation] : []),
};

/** Rewrites every conversation object of a JSON answer (all three routes). */
export function everyConversation(call: ProxyCall, res: ProxyResponse, edit: (c: Json) => void) {
  if (res.status !== 200 || call.method !== "GET") return undefined;
  const carrier = CONVERSATION_CARRIERS[call.route.kind];
  if (!carrier) return undefined;
  const body = jsonOf(res);
  for (const c of carrier(body)) if (c) edit(c);
  return withJson(res, body);
}

/** Folds an id to ASCII: a server that rewrites ids it stores (accents dropped, spaces to dashes). */
export function foldId(id: string): string {
  return id
    .normalize("NFKD")
    .replace(/[^\x20-\x7E]/g, "")
    .replace(/ /g, "-");
}
