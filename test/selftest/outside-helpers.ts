/**
 * What the outside rounds' rows (outside-mutations-4.ts to -7.ts) read of a call the same way: which
 * agent a send addresses, its body, its newest prompt, the paths of a conversation and of another agent's
 * route, who the caller is. One copy, so a fix to how the proxy's calls are read reaches every round.
 */
import { CONVERSATION_CARRIERS } from "./conversation-rewrites.ts";
import {
  isEventStream,
  type Json,
  jsonOf,
  jsonResponse,
  type ProxyCall,
  type ProxyResponse,
  type ProxyTools,
  parseSse,
  type SseEvent,
  serialiseSse,
  withJson,
} from "./proxy-calls.ts";

/** The demo workspace's names, as the simulated deployment knows them. */
export const DEMO = {
  defaultAgent: "demo-agent",
  storageAgent: "notes-agent",
  repoAgent: "acme-widgets",
  foreignAgent: "other-agent",
  automation: "nightly-summary",
} as const;

/** The demo workspace's agents (the foreign workspace has only `other-agent`). */
export const DEMO_AGENTS: readonly string[] = [DEMO.defaultAgent, DEMO.storageAgent, DEMO.repoAgent];

/** The agents' own instructions, as the deployment holds them. */
export const INSTRUCTIONS: Record<string, string> = {
  "demo-agent": "You are the demo agent of the reference server.",
  "notes-agent": "You are the notes agent. Your files hold the team's notes.",
  "acme-widgets": "You are the agent of the acme/widgets repository.",
};

export const is2xx = (res: ProxyResponse) => res.status >= 200 && res.status < 300;

/** The JSON body of a fork request, or undefined. */
export function forkBody(call: ProxyCall): Json {
  if (call.route.kind !== "fork" || call.method !== "POST") return undefined;
  const body = call.json();
  return body !== null && typeof body === "object" && !Array.isArray(body) ? body : undefined;
}

export const isSendPost = (call: ProxyCall) =>
  (call.route.kind === "send" || call.route.kind === "routed") && call.method === "POST";

/** The agent a send addresses: the path's, or the routed `model` (`<prefix>--<agent>` or a bare name). */
export function sendAgent(call: ProxyCall): string | undefined {
  if (call.route.kind === "send") return call.route.agent;
  const model = call.json()?.model;
  if (typeof model !== "string") return undefined;
  const cut = model.lastIndexOf("--");
  return cut < 0 ? model : model.slice(cut + 2);
}

/** The JSON body of a send, or undefined (not a send, or not an object). */
export function sendBody(call: ProxyCall): Json {
  if (!isSendPost(call)) return undefined;
  const body = call.json();
  return body !== null && typeof body === "object" && !Array.isArray(body) ? body : undefined;
}

/** Edits a send's body in place when `when` holds for it. */
export function editSend(
  call: ProxyCall,
  when: (body: Json) => boolean,
  edit: (body: Json) => void,
): undefined {
  const body = sendBody(call);
  if (!body || !when(body)) return;
  edit(body);
  call.setJson(body);
}

export function newestUser(body: Json): Json {
  const messages = Array.isArray(body?.messages) ? body.messages : [];
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]?.role === "user") return messages[i];
  return undefined;
}

export function promptText(message: Json): string {
  const content = message?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((b: Json) => b?.type === "text" && typeof b.text === "string")
    .map((b: Json) => b.text)
    .join("\n\n");
}

export const attachmentsOf = (body: Json): Json[] | undefined =>
  Array.isArray(body?.metadata?.attachments) ? body.metadata.attachments : undefined;

export function conversationPath(agent: string, id: string): string {
  return `/api/agents/${encodeURIComponent(agent)}/conversations/${encodeURIComponent(id)}`;
}

/** The path of `call` with its agent segment replaced (a conversation route read through another agent). */
export function throughAgent(call: ProxyCall, agent: string): string {
  const [pathname, query] = call.path.split("?");
  const parts = pathname.split("/");
  parts[3] = encodeURIComponent(agent);
  return `${parts.join("/")}${query ? `?${query}` : ""}`;
}

/** The caller is a known key other than the conversation's owner (a member, a Viewer). */
export function callerIsNotOwner(call: ProxyCall, tools: ProxyTools, id = call.conversationId): boolean {
  if (id === undefined || call.key === undefined) return false;
  const owner = tools.ledger.conversations.get(id)?.owner;
  return owner !== undefined && owner !== call.key;
}

export function usageOf(events: SseEvent[]): Json {
  return events.find((e) => e.event === "message_delta" && e.data?.usage)?.data.usage;
}

/** The list's query, as the deployment reads it. */
export function listQuery(call: ProxyCall): URLSearchParams | undefined {
  if (call.route.kind !== "list" || call.method !== "GET") return undefined;
  return call.url.searchParams;
}

export function setQuery(call: ProxyCall, query: URLSearchParams): void {
  const search = query.toString();
  call.path = `${call.path.split("?")[0]}${search ? `?${search}` : ""}`;
}

/** An error answer in the deployment's own error body shape. */
export function apiError(status: number, type: string, message: string): ProxyResponse {
  return jsonResponse(status, { type: "error", error: { type, message }, message });
}

/** Whether a send's conversation was unknown to the proxy when the request came in (a first turn). */
const freshSends = new WeakMap<ProxyCall, boolean>();

export function noteFresh(call: ProxyCall, tools: ProxyTools): undefined {
  if (!isSendPost(call)) return undefined;
  const id = call.conversationId;
  freshSends.set(call, id === undefined || !tools.ledger.conversations.has(id));
  return undefined;
}

export const isFresh = (call: ProxyCall) => freshSends.get(call) === true;

/** A send into a conversation the proxy saw created (a second or later turn). */
export function resumes(call: ProxyCall, tools: ProxyTools): boolean {
  const id = call.conversationId;
  return id !== undefined && tools.ledger.conversations.has(id);
}

/** The conversation id of a send's answer (the header), or of the request. */
export const answerId = (call: ProxyCall, res: ProxyResponse): string | undefined =>
  res.headers["x-conversation-id"] ?? call.conversationId;

/** A per-proxy map kept in the mutation's scratch state. */
export function bag<V>(tools: ProxyTools, name: string): Map<string, V> {
  let map = tools.state.get(name) as Map<string, V> | undefined;
  if (!map) {
    map = new Map<string, V>();
    tools.state.set(name, map);
  }
  return map;
}

/** Edits a 200 event stream held by `onResponse`; `edit` returns undefined to leave it as it was. */
export function rewriteStream(res: ProxyResponse, edit: (events: SseEvent[]) => SseEvent[] | undefined) {
  if (!isEventStream(res)) return undefined;
  const events = parseSse(res.body.toString("utf8"));
  const before = JSON.stringify(events);
  const out = edit(events);
  if (!out || JSON.stringify(out) === before) return undefined;
  return { ...res, body: Buffer.from(serialiseSse(out)) };
}

/** Edits the conversation objects of a GET answer (single fetch, list, transcript); `edit` says if it changed one. */
export function editConversations(
  call: ProxyCall,
  res: ProxyResponse,
  edit: (c: Json) => boolean,
): ProxyResponse | undefined {
  if (res.status !== 200 || call.method !== "GET") return undefined;
  const carrier = CONVERSATION_CARRIERS[call.route.kind];
  if (!carrier) return undefined;
  const body = jsonOf(res);
  let changed = false;
  for (const c of carrier(body)) if (c && edit(c)) changed = true;
  return changed ? withJson(res, body) : undefined;
}

/** Edits a 200 JSON answer of the route kind named; `edit` says whether it changed the body. */
export function editJson(
  call: ProxyCall,
  res: ProxyResponse,
  kind: string,
  edit: (body: Json) => boolean,
): ProxyResponse | undefined {
  if (call.route.kind !== kind || res.status !== 200) return undefined;
  const body = jsonOf(res);
  if (body === undefined || !edit(body)) return undefined;
  return withJson(res, body);
}

/**
 * The call sent again with another key, or through another path, as a deployment with the row's fault would
 * treat it: that answer is served when `accept` takes it, otherwise the call's own answer stands (undefined).
 */
export async function forwardAs(
  call: ProxyCall,
  tools: ProxyTools,
  change: { key?: string | undefined; path?: string },
  accept: (res: ProxyResponse) => boolean,
): Promise<ProxyResponse | undefined> {
  const again = call.clone();
  if ("key" in change) again.key = change.key;
  if (change.path !== undefined) again.path = change.path;
  const answer = await tools.forward(again);
  return accept(answer) ? answer : undefined;
}
