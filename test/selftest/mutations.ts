/**
 * The mutation catalogue of the suite's self-test, as data: each entry breaks exactly one rule of the API
 * (as the spec, `spec/`, states it) when the fault proxy applies it in front of the
 * reference server, and names the checks of which at least one must then fail (`breaks`).
 *
 * Hooks (all optional; see proxy.ts for the order they run in):
 * - `onRequest(call, tools)`: rewrite the request in place, or return a response to answer it without
 *   forwarding;
 * - `onEvents(events, call, tools)`: a 200 event stream, parsed; mutate or return a new list;
 * - `onSseText(text, call)`: the stream's raw text (framing faults a parser would smooth over);
 * - `onResponse(call, res, tools)`: status, headers, body of any answer; return a replacement.
 */
import { DEMO_FLOW_KEY, DEMO_MEMBER_KEY, demoConfigFile } from "../../reference-server/demo/workspace.ts";
import { outsideMutations } from "./outside-mutations.ts";
import { outsideMutations4 } from "./outside-mutations-4.ts";
import { outsideMutations5 } from "./outside-mutations-5.ts";
import { outsideMutations6 } from "./outside-mutations-6.ts";
import { outsideMutations7 } from "./outside-mutations-7.ts";
import { outsideMutations8 } from "./outside-mutations-8.ts";
import { outsideMutations9 } from "./outside-mutations-9.ts";
import {
  type Area,
  errorResponse,
  isEventStream,
  type Json,
  jsonOf,
  jsonResponse,
  type Mutation,
  ProxyCall,
  type ProxyResponse,
  type ProxyTools,
  parseSse,
  type SseEvent,
  withJson,
} from "./proxy-calls.ts";
import { tableMutations } from "./table-mutations.ts";

export type { Area, Mutation };

/**
 * The checks that exercise each area: `npm run mutation-score -- --area-only` runs these plus a mutation's
 * `breaks` (the full suite runs for the unbroken proxy and in `npm run mutation-score`).
 */
export const AREA_CHECKS: Record<Area, string[]> = {
  status: ["AUTH-*", "ERR-*", "CONVID-*"],
  headers: ["SEND-200-STREAM", "SSE-CONTENT-TYPE", "CONVID-*", "STATE-CREATED-PRIVATE", "MODELS-SHAPE"],
  sse: ["SSE-*", "SEND-TOOL-*"],
  // What a proxy or gateway in front of the API does to a turn's delivery.
  delivery: ["SSE-STREAMED-INCREMENTAL", "SSE-HEADERS-BEFORE-END", "SSE-CONTENT-TYPE"],
  shapes: ["MODELS-*", "LIST-*", "LIMIT-LIST-*", "GET-*", "TRANSCRIPT-*", "COMPACTION-*", "FORK-*"],
  state: ["STATE-*", "GUIDE-*", "SHARE-*"],
  send: ["SEND-*", "ROUTED-*", "LIMIT-MESSAGES-*", "FORK-MODEL-*"],
  silent: ["SEND-ATTACHMENT-*", "LIMIT-ATTACHMENT-*", "SEND-AUTOMATION-*", "STATE-RACE-*"],
  consistency: ["CONSIST-*", "ROUTED-*"],
  meaning: ["MEANING-*", "GET-TURN-COUNT", "LIST-SHAPE-ORDER"],
};

/**
 * The rows `npm test` runs (mutation.test.ts): the hand-written ones, and the sample of the table and outside
 * rows; `npm run mutation-score:catalogue` runs them all.
 */
export function inNpmTest(mutation: Mutation): boolean {
  return (mutation.table === undefined && mutation.outsideRound === undefined) || mutation.sample === true;
}

/** The `only` selection for one mutation: its area's checks plus the checks it declares it breaks. */
export function checksFor(mutation: Mutation): string[] {
  return [...new Set([...AREA_CHECKS[mutation.area], ...mutation.breaks])];
}

// ---------------------------------------------------------------------------------------------------------
// Small helpers the mutations share.

/** A check that runs a turn with the run's own key, from which `ledger.workingKey()` learns it. */
const WORKING_KEY = ["SEND-200-STREAM"];

const isSend = (call: ProxyCall) => call.route.kind === "send" || call.route.kind === "routed";

/** The send-message body, when the call is a send with a JSON object body. */
function sendBody(call: ProxyCall): Json {
  if (!isSend(call) || call.method !== "POST") return undefined;
  const body = call.json();
  return body !== null && typeof body === "object" && !Array.isArray(body) ? body : undefined;
}

/** Edits a send body in place (when the call is a send) and re-serialises it. */
function editSend(call: ProxyCall, edit: (body: Json) => void): void {
  const body = sendBody(call);
  if (!body) return;
  edit(body);
  call.setJson(body);
}

/** The newest user message's text of a send (string content, or its text blocks joined). */
function newestUserText(call: ProxyCall): string | undefined {
  const messages = sendBody(call)?.messages;
  if (!Array.isArray(messages)) return undefined;
  const last = [...messages].reverse().find((m) => m?.role === "user");
  if (typeof last?.content === "string") return last.content;
  if (!Array.isArray(last?.content)) return undefined;
  return last.content.map((b: Json) => (typeof b?.text === "string" ? b.text : "")).join("\n\n");
}

function attachmentsOf(body: Json): Json[] | undefined {
  const list = body?.metadata?.attachments;
  return Array.isArray(list) ? list : undefined;
}

/** Edits a JSON answer of the given route kinds (status 200) and returns the edited copy. */
function editJson(
  call: ProxyCall,
  res: ProxyResponse,
  kinds: string[],
  edit: (body: Json) => void,
): ProxyResponse | undefined {
  if (res.status !== 200 || !kinds.includes(call.route.kind) || call.method !== "GET") return undefined;
  const body = jsonOf(res);
  if (body === undefined) return undefined;
  edit(body);
  return withJson(res, body);
}

/** Sends that opened a conversation the proxy had not seen (their first turn). */
const firstTurns = new WeakSet<ProxyCall>();

/** The same request again with another key (a server that did not check what it should have). */
async function replayWith(
  call: ProxyCall,
  key: string | undefined,
  tools: ProxyTools,
): Promise<ProxyResponse | undefined> {
  if (!key) return undefined;
  const again = call.clone();
  again.key = key;
  const res = await tools.forward(again);
  tools.ledger.observe(again, res);
  // A turn replayed under another key created a conversation the caller cannot delete: the proxy does.
  const created = res.headers["x-conversation-id"];
  if (isEventStream(res) && created && call.route.agent) {
    const path = conversationPath(call.route.agent, created);
    tools.onClose(async () => void (await tools.forward(ProxyCall.make("DELETE", path, key))));
  }
  return res;
}

function conversationPath(agent: string, id: string): string {
  return `/api/agents/${encodeURIComponent(agent)}/conversations/${encodeURIComponent(id)}`;
}

/** Polls the conversation upstream (50 ms) until `done(agent_session_id)` or the bound expires. */
async function pollSession(
  tools: ProxyTools,
  agent: string,
  id: string,
  key: string,
  done: (session: unknown) => boolean,
  boundMs = 5_000,
): Promise<void> {
  const deadline = Date.now() + boundMs;
  while (Date.now() < deadline) {
    const res = await tools.forward(ProxyCall.make("GET", conversationPath(agent, id), key));
    const session = jsonOf(res)?.conversation?.agent_session_id;
    if (res.status !== 200 || done(session)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function hasOutput(res: ProxyResponse): boolean {
  return res.body.includes("event: content_block_start");
}

/** The blocks' events only (content_block_*). */
const isBlockEvent = (e: SseEvent) => e.event.startsWith("content_block_");

/** Automations the demo workspace defines (the server's own list, read from its config). */
const DEMO_AUTOMATIONS = new Set(
  (demoConfigFile("/nonexistent").agents ?? []).flatMap((a) => (a.automations ?? []).map((x) => x.name)),
);

/** Each demo agent's default model (a fork told to use it explicitly no longer inherits one). */
const DEMO_DEFAULT_MODELS = new Map(
  (demoConfigFile("/nonexistent").agents ?? []).map((a) => [a.name, a.default_model]),
);

/** Drops one query parameter of a list request (a server that does not read that filter). */
function dropListParam(call: ProxyCall, name: string): undefined {
  if (call.route.kind !== "list") return;
  const url = call.url;
  url.searchParams.delete(name);
  call.path = url.pathname + url.search;
}

/** Edits a fork request's JSON body in place. */
function editFork(call: ProxyCall, edit: (body: Json) => void): undefined {
  if (call.route.kind !== "fork" || call.method !== "POST") return;
  const body = call.json() ?? {};
  edit(body);
  call.setJson(body);
}

/** The routes that address one conversation by the id in their path. */
const CONVERSATION_ROUTES = ["conversation", "transcript", "compaction", "fork"];

// ---------------------------------------------------------------------------------------------------------

export const mutations: Mutation[] = [
  // ---- status codes and authentication -----------------------------------------------------------------
  {
    name: "unshared-conversation-403",
    area: "status",
    description: "Another member's unshared conversation answers 403 instead of 404 (existence leaked)",
    breaks: ["CONVID-OTHERS-UNSHARED-404", "STATE-SHARE-FALSE", "STATE-SHARED-MEMBER-FORK"],
    onResponse(call, res, tools) {
      const id = call.conversationId;
      const known = id === undefined ? undefined : tools.ledger.conversations.get(id);
      if (res.status !== 404 || !known || known.owner === call.key || known.agent !== call.route.agent)
        return;
      return errorResponse(403, "permission_error", "You do not have access to this conversation");
    },
  },
  {
    name: "revoked-key-accepted",
    area: "status",
    description: "A revoked key is not refused: the request runs (as a key that works) instead of 401",
    breaks: ["AUTH-401-REVOKED"],
    needs: WORKING_KEY,
    async onResponse(call, res, tools) {
      if (res.status !== 401 || jsonOf(res)?.message !== "API key has been revoked") return;
      return replayWith(call, await tools.ledger.workingKey(), tools);
    },
  },
  {
    name: "revoked-key-generic-body",
    area: "status",
    description: 'A revoked key gets 401 without the body {"message": "API key has been revoked"}',
    breaks: ["AUTH-401-REVOKED"],
    onResponse(_call, res) {
      if (res.status !== 401 || jsonOf(res)?.message !== "API key has been revoked") return;
      return errorResponse(401, "authentication_error", "Invalid API key");
    },
  },
  {
    name: "missing-key-accepted",
    area: "status",
    description: "A request without X-Api-Key is served (as a key that works) instead of 401",
    breaks: ["AUTH-401-MISSING"],
    needs: WORKING_KEY,
    async onRequest(call, tools) {
      if (call.key !== undefined || call.route.kind === "flow" || call.headers.authorization) return;
      call.key = await tools.ledger.workingKey();
    },
  },
  {
    name: "unknown-key-403",
    area: "status",
    description: "An unrecognized or missing key gets 403 instead of 401",
    breaks: ["AUTH-401-UNKNOWN", "AUTH-401-MISSING"],
    onResponse(_call, res) {
      if (res.status !== 401 || jsonOf(res)?.message === "API key has been revoked") return;
      return errorResponse(403, "permission_error", "Forbidden");
    },
  },
  {
    name: "viewer-can-send",
    area: "status",
    description: "A Viewer-role key may run a turn (no 403 on send-message)",
    breaks: ["AUTH-403-VIEWER-SEND"],
    needs: WORKING_KEY,
    async onResponse(call, res, tools) {
      if (res.status !== 403 || call.route.kind !== "send") return;
      if (!String(jsonOf(res)?.message).includes("Viewer")) return;
      return replayWith(call, await tools.ledger.workingKey(), tools);
    },
  },
  {
    name: "shared-conversation-writable",
    area: "status",
    description: "Sending into another member's shared conversation runs a turn instead of 403",
    breaks: ["CONVID-OTHERS-SHARED-403"],
    async onResponse(call, res, tools) {
      if (res.status !== 403 || call.route.kind !== "send") return;
      const id = call.conversationId;
      const owner = id === undefined ? undefined : tools.ledger.conversations.get(id)?.owner;
      if (!owner || owner === call.key) return;
      return replayWith(call, owner, tools);
    },
  },
  {
    name: "foreign-agent-403",
    area: "status",
    description: "An agent of another workspace gives 403 instead of 404",
    breaks: ["AUTH-404-FOREIGN-AGENT", "CONVID-OTHER-WORKSPACE-404"],
    onResponse(_call, res) {
      if (res.status !== 404 || !String(jsonOf(res)?.message).startsWith("Agent not found")) return;
      return errorResponse(403, "permission_error", "This agent belongs to another workspace");
    },
  },
  {
    name: "conversation-404-without-message",
    area: "status",
    description: "A conversation of a different agent gives 404 without the message Conversation not found",
    breaks: ["CONVID-OTHER-AGENT-404"],
    onResponse(_call, res) {
      if (res.status !== 404 || jsonOf(res)?.message !== "Conversation not found") return;
      return errorResponse(404, "not_found_error", "Not found");
    },
  },
  {
    name: "async-delivery-runs",
    area: "status",
    description: 'metadata.delivery "async" runs the turn instead of answering 501',
    breaks: ["ERR-501-ASYNC"],
    onRequest(call) {
      editSend(call, (body) => {
        if (body.metadata?.delivery === "async") delete body.metadata.delivery;
      });
    },
  },
  {
    name: "fork-taken-id-replaced",
    area: "status",
    description: "Fork with a taken conversation_id creates a child with a generated id instead of 409",
    breaks: ["ERR-409-FORK-TAKEN"],
    async onResponse(call, res, tools) {
      if (res.status !== 409 || call.route.kind !== "fork") return;
      const again = call.clone();
      const body = again.json() ?? {};
      delete body.conversation_id;
      again.setJson(body);
      const retried = await tools.forward(again);
      tools.ledger.observe(again, retried);
      return retried;
    },
  },
  {
    name: "fork-at-turn-refused",
    area: "status",
    description: "Fork with at_turn beyond the conversation's length gives 400 instead of being clamped",
    breaks: ["FORK-AT-TURN-CLAMPED"],
    async onRequest(call, tools) {
      if (call.route.kind !== "fork" || typeof call.json()?.at_turn !== "number") return;
      const { agent, id } = call.route;
      if (!agent || !id) return;
      const parent = await tools.forward(ProxyCall.make("GET", conversationPath(agent, id), call.key));
      const turns = jsonOf(parent)?.conversation?.turn_count;
      if (typeof turns === "number" && call.json().at_turn > turns)
        return errorResponse(400, "invalid_request_error", `at_turn must be at most ${turns}`);
    },
  },
  {
    name: "delete-answers-200",
    area: "status",
    description: "Delete answers 200 with a body instead of 204 No Content",
    breaks: ["STATE-DELETE"],
    onResponse(call, res) {
      if (call.method !== "DELETE" || res.status !== 204) return;
      return jsonResponse(200, { deleted: true, id: call.route.id });
    },
  },
  {
    name: "admin-may-delete",
    area: "status",
    description: "A member who is not the owner may delete a conversation (admin override)",
    breaks: ["AUTH-OWNER-ONLY-DELETE"],
    async onResponse(call, res, tools) {
      if (call.method !== "DELETE" || res.status !== 403 || !call.route.id) return;
      return replayWith(call, tools.ledger.conversations.get(call.route.id)?.owner, tools);
    },
  },
  {
    name: "admin-may-share",
    area: "status",
    description: "A member who is not the owner may toggle sharing (admin override)",
    breaks: ["AUTH-OWNER-ONLY-SHARE"],
    async onResponse(call, res, tools) {
      if (call.method !== "POST" || call.route.kind !== "conversation" || res.status !== 403) return;
      return replayWith(call, tools.ledger.conversations.get(call.route.id ?? "")?.owner, tools);
    },
  },

  {
    name: "viewer-cannot-read",
    area: "status",
    description: "A Viewer-role key gets 403 when reading conversations (it may read them)",
    breaks: ["AUTH-VIEWER-READS"],
    async onRequest(call, tools) {
      if (
        call.method !== "GET" ||
        !call.key ||
        !["list", "conversation", "transcript"].includes(call.route.kind)
      )
        return;
      // Which keys are Viewers, probed once per key: a send with delivery "async" runs nothing (501) but
      // is refused with 403 first when the key may not run turns.
      const probed: Map<string, boolean> = tools.state.get("viewer") ?? new Map();
      tools.state.set("viewer", probed);
      if (!probed.has(call.key)) {
        const path = `/api/agents/${encodeURIComponent(call.route.agent ?? "")}/v1/messages`;
        const body = { messages: [{ role: "user", content: "probe" }], metadata: { delivery: "async" } };
        const probe = await tools.forward(ProxyCall.make("POST", path, call.key, body));
        probed.set(call.key, probe.status === 403);
      }
      if (probed.get(call.key))
        return errorResponse(403, "permission_error", "A Viewer key cannot read conversations");
    },
  },
  {
    name: "flow-key-refused",
    area: "status",
    description: "Invoking a deployed flow with its X-API-Key gets 401",
    breaks: ["FLOW-INVOKE"],
    onRequest(call) {
      if (call.route.kind === "flow") return errorResponse(401, "authentication_error", "Invalid API key");
    },
  },

  // ---- headers -----------------------------------------------------------------------------------------
  {
    name: "no-conversation-id-header",
    area: "headers",
    description: "send-message answers without the X-Conversation-Id header",
    breaks: ["SEND-200-STREAM", "CONVID-OMITTED-GENERATED", "STATE-CREATED-PRIVATE"],
    onResponse(_call, res) {
      if (!isEventStream(res)) return;
      const headers = { ...res.headers };
      delete headers["x-conversation-id"];
      return { ...res, headers };
    },
  },
  {
    name: "conversation-id-header-lowercased",
    area: "headers",
    description: "X-Conversation-Id carries a normalised (lower-cased) id, not the id verbatim",
    breaks: ["CONVID-UNKNOWN-VERBATIM"],
    onResponse(_call, res) {
      const id = res.headers["x-conversation-id"];
      if (!id) return;
      return { ...res, headers: { ...res.headers, "x-conversation-id": id.toLowerCase() } };
    },
  },
  {
    name: "stream-content-type-json",
    area: "headers",
    description: "A turn's event stream is sent with Content-Type application/json, not text/event-stream",
    breaks: ["SSE-CONTENT-TYPE", "SEND-200-STREAM"],
    onResponse(_call, res) {
      if (!isEventStream(res)) return;
      return { ...res, headers: { ...res.headers, "content-type": "application/json" } };
    },
  },
  {
    name: "json-content-type-text",
    area: "headers",
    description: "JSON answers are sent with Content-Type text/plain",
    breaks: ["MODELS-SHAPE", "AUTH-KEY-WORKS", "GET-SHAPE"],
    onResponse(_call, res) {
      if (!(res.headers["content-type"] ?? "").startsWith("application/json")) return;
      return { ...res, headers: { ...res.headers, "content-type": "text/plain; charset=utf-8" } };
    },
  },

  // ---- SSE framing and order ---------------------------------------------------------------------------
  {
    name: "done-sentinel",
    area: "sse",
    description: "The stream ends with a data: [DONE] sentinel after message_stop",
    breaks: ["SSE-DONE-SENTINEL"],
    onSseText: (text) => `${text}data: [DONE]\n\n`,
  },
  {
    name: "frames-without-event-line",
    area: "sse",
    description: 'Frames carry only a "data:" line (no "event:" line)',
    breaks: ["SSE-FRAME-LINES"],
    onSseText: (text) => text.replace(/^event: .*\n/gm, ""),
  },
  {
    name: "last-frame-unterminated",
    area: "sse",
    description: "The final frame is not ended by a blank line",
    breaks: ["SSE-FRAME-UNTERMINATED"],
    onSseText: (text) => text.replace(/\n\n$/, "\n"),
  },
  {
    name: "block-stop-before-delta",
    area: "sse",
    description: "content_block_stop arrives before its content_block_delta",
    breaks: ["SSE-BLOCK-TRIPLE"],
    onEvents(events) {
      const out = [...events];
      for (let i = 1; i < out.length; i++) {
        if (out[i].event === "content_block_stop" && out[i - 1].event === "content_block_delta") {
          [out[i - 1], out[i]] = [out[i], out[i - 1]];
        }
      }
      return out;
    },
  },
  {
    name: "text-delta-split",
    area: "sse",
    description: "A text block's text arrives in two content_block_delta events (blocks must arrive whole)",
    breaks: ["SSE-BLOCK-TRIPLE"],
    onEvents(events) {
      return events.flatMap((e) => {
        const text = e.data?.delta?.text;
        if (e.event !== "content_block_delta" || e.data.delta.type !== "text_delta" || text.length < 2)
          return [e];
        const half = Math.floor(text.length / 2);
        const part = (t: string) => ({
          event: e.event,
          data: { ...e.data, delta: { ...e.data.delta, text: t } },
        });
        return [part(text.slice(0, half)), part(text.slice(half))];
      });
    },
  },
  {
    name: "block-index-restarts",
    area: "sse",
    description: "Every content block has index 0 (the index restarts instead of running for the turn)",
    breaks: ["SSE-INDEX-RUNNING"],
    onEvents(events) {
      for (const e of events) if (isBlockEvent(e)) e.data.index = 0;
    },
  },
  {
    name: "no-message-stop",
    area: "sse",
    description: "The stream ends without message_stop",
    breaks: ["SSE-STOP-LAST"],
    onEvents: (events) => events.filter((e) => e.event !== "message_stop"),
  },
  {
    name: "event-after-message-stop",
    area: "sse",
    description: "An event follows message_stop",
    breaks: ["SSE-AFTER-STOP"],
    onEvents(events) {
      const delta = events.find((e) => e.event === "message_delta");
      return delta ? [...events, structuredClone(delta)] : events;
    },
  },
  {
    name: "usage-without-cost",
    area: "sse",
    description: "message_delta.usage lacks total_cost_usd",
    breaks: ["SSE-USAGE-FIVE-FIELDS"],
    onEvents(events) {
      for (const e of events) if (e.event === "message_delta") delete e.data.usage?.total_cost_usd;
    },
  },
  {
    name: "stop-reason-missing",
    area: "sse",
    description: "message_delta carries no stop_reason",
    breaks: ["SSE-MESSAGE-DELTA"],
    onEvents(events) {
      for (const e of events) if (e.event === "message_delta") delete e.data.delta?.stop_reason;
    },
  },
  {
    name: "event-name-disagrees-with-type",
    area: "sse",
    description: 'The message_start event\'s data has type "message" (the event name and type disagree)',
    breaks: ["SSE-TYPE-MATCHES-EVENT"],
    onEvents(events) {
      for (const e of events) if (e.event === "message_start") e.data.type = "message";
    },
  },
  {
    name: "unknown-event-name",
    area: "sse",
    description: "An event outside the API's list (message_progress) appears in the stream",
    breaks: ["SSE-UNKNOWN-EVENT"],
    onEvents(events) {
      const out = [...events];
      out.splice(1, 0, { event: "message_progress", data: { type: "message_progress" } });
      return out;
    },
  },
  {
    name: "message-start-repeated",
    area: "sse",
    description: "message_start is sent twice",
    breaks: ["SSE-MESSAGE-START-ONCE"],
    onEvents(events) {
      const start = events.find((e) => e.event === "message_start");
      if (!start) return;
      const out = [...events];
      out.splice(1, 0, structuredClone(start));
      return out;
    },
  },
  {
    name: "block-start-carries-text",
    area: "sse",
    description: "content_block_start of a text block carries the text instead of an empty string",
    breaks: ["SSE-START-EMPTY"],
    onEvents(events) {
      for (let i = 0; i + 1 < events.length; i++) {
        const [start, delta] = [events[i], events[i + 1]];
        if (start.event === "content_block_start" && start.data.content_block?.type === "text")
          start.data.content_block.text = delta.data?.delta?.text ?? "text";
      }
    },
  },
  {
    name: "thinking-without-signature",
    area: "sse",
    description: "A thinking block is not followed by a signature_delta",
    breaks: ["SSE-THINKING-SIGNATURE"],
    onEvents: (events) => events.filter((e) => e.data?.delta?.type !== "signature_delta"),
  },
  {
    name: "tool-input-partial-json",
    area: "sse",
    description: "A tool_use block's input_json_delta carries a partial JSON value",
    breaks: ["SSE-TOOL-INPUT-JSON"],
    onEvents(events) {
      for (const e of events) {
        const delta = e.data?.delta;
        if (delta?.type === "input_json_delta" && typeof delta.partial_json === "string")
          delta.partial_json = delta.partial_json.slice(0, Math.max(1, delta.partial_json.length - 2));
      }
    },
  },
  {
    name: "error-event-wrong-type",
    area: "sse",
    description: 'A failure after the stream opened is an error event whose error.type is not "api_error"',
    breaks: ["SSE-ERROR-EVENT"],
    onEvents(events) {
      for (const e of events)
        if (e.event === "error" && e.data?.error) e.data.error.type = "overloaded_error";
    },
  },
  {
    name: "stream-failure-as-500",
    area: "sse",
    description:
      "A turn that fails after its stream opened is answered 500 instead of 200 with an error event",
    breaks: ["SSE-ERROR-EVENT"],
    onResponse(_call, res) {
      if (!isEventStream(res)) return;
      const failure = parseSse(res.body.toString("utf8")).find((e) => e.event === "error");
      if (!failure) return;
      return errorResponse(500, "api_error", String(failure.data?.error?.message ?? "turn failed"));
    },
  },
  {
    name: "tool-blocks-without-opt-in",
    area: "sse",
    description: "tool_use and tool_result blocks are streamed although stream_tool_calls is not true",
    breaks: ["SEND-TOOL-BLOCKS-DEFAULT-OFF", "SSE-TOOL-BLOCKS-GATED"],
    onRequest(call) {
      editSend(call, (body) => {
        body.metadata = { ...body.metadata, stream_tool_calls: true };
      });
    },
  },
  {
    name: "client-tool-called",
    area: "sse",
    description: "A client-side tool definition is used: the turn calls the tool the request defined",
    breaks: ["SEND-NO-CLIENT-TOOLS"],
    onEvents(events, call) {
      const body = sendBody(call);
      const tool = Array.isArray(body?.tools) ? body.tools[0] : undefined;
      if (!tool?.name || body.metadata?.stream_tool_calls !== true) return;
      const index = events.filter((e) => e.event === "content_block_start").length;
      const at = events.findIndex((e) => e.event === "message_delta");
      const block: SseEvent[] = [
        {
          event: "content_block_start",
          data: {
            type: "content_block_start",
            index,
            content_block: { type: "tool_use", id: "toolu_client", name: tool.name, input: {} },
          },
        },
        {
          event: "content_block_delta",
          data: {
            type: "content_block_delta",
            index,
            delta: { type: "input_json_delta", partial_json: "{}" },
          },
        },
        { event: "content_block_stop", data: { type: "content_block_stop", index } },
      ];
      return [...events.slice(0, at), ...block, ...events.slice(at)];
    },
  },

  // ---- response shapes ---------------------------------------------------------------------------------
  {
    name: "conversations-oldest-first",
    area: "shapes",
    description: "The conversation list is ordered oldest activity first",
    breaks: ["LIST-SHAPE-ORDER"],
    onResponse(call, res) {
      return editJson(call, res, ["list"], (body) => body.conversations?.reverse());
    },
  },
  {
    name: "models-without-has-more",
    area: "shapes",
    description: "The models list has no has_more",
    breaks: ["MODELS-SHAPE"],
    onResponse(call, res) {
      return editJson(call, res, ["models"], (body) => delete body.has_more);
    },
  },
  {
    name: "default-model-not-first",
    area: "shapes",
    description: "The agent's default model is not first in the models list",
    breaks: ["SEND-MODEL-DEFAULT"],
    onResponse(call, res) {
      return editJson(call, res, ["models"], (body) => body.data?.reverse());
    },
  },
  {
    name: "list-limit-ignored",
    area: "shapes",
    description: "The list's limit is ignored (every conversation up to the maximum is returned)",
    breaks: ["LIMIT-LIST-RANGE"],
    onRequest(call) {
      if (call.route.kind !== "list") return;
      const url = call.url;
      url.searchParams.set("limit", "200");
      call.path = url.pathname + url.search;
    },
  },
  {
    name: "channel-filter-ignored",
    area: "shapes",
    description: "The list's channel filter is ignored",
    breaks: ["LIST-CHANNEL-FILTER"],
    onRequest(call) {
      if (call.route.kind !== "list") return;
      const url = call.url;
      url.searchParams.delete("channel");
      call.path = url.pathname + url.search;
    },
  },
  {
    name: "list-only-own",
    area: "shapes",
    description:
      "The conversation list holds only the caller's own conversations, not those shared with the workspace or owned by a channel",
    breaks: ["LIST-VISIBILITY"],
    onResponse(call, res) {
      return editJson(call, res, ["list"], (body) => {
        if (Array.isArray(body.conversations))
          body.conversations = body.conversations.filter((c: Json) => c?.is_owner === true);
      });
    },
  },
  {
    name: "compaction-not-flagged",
    area: "shapes",
    description:
      "A compaction is not reported: the transcript's summary message lacks is_compact_summary and last-compaction says compacted false",
    breaks: ["COMPACTION-FLAGGED"],
    onResponse(call, res) {
      return editJson(call, res, ["transcript", "compaction"], (body) => {
        for (const m of body.messages ?? []) delete m.is_compact_summary;
        if (body.compacted === true) body.compacted = false;
      });
    },
  },
  {
    name: "timestamps-without-ms",
    area: "shapes",
    description: "Conversation timestamps are ISO 8601 without milliseconds",
    breaks: ["GET-SHAPE"],
    onResponse(call, res) {
      return editJson(call, res, ["conversation"], (body) => {
        for (const field of ["created_at", "updated_at"]) {
          const value = body.conversation?.[field];
          if (typeof value === "string") body.conversation[field] = value.replace(/\.\d{3}Z$/, "Z");
        }
      });
    },
  },
  {
    name: "transcript-without-author",
    area: "shapes",
    description: "User messages of the transcript lack author_user_id",
    breaks: ["TRANSCRIPT-SHAPE"],
    onResponse(call, res) {
      return editJson(call, res, ["transcript"], (body) => {
        for (const m of body.messages ?? []) delete m.author_user_id;
      });
    },
  },
  {
    name: "compaction-flag-as-string",
    area: "shapes",
    description: 'Last compaction answers compacted as a string ("false"), not a boolean',
    breaks: ["COMPACTION-SHAPE"],
    onResponse(call, res) {
      return editJson(call, res, ["compaction"], (body) => {
        body.compacted = String(body.compacted);
      });
    },
  },
  {
    name: "fork-result-without-session",
    area: "shapes",
    description: "The fork result lacks agent_session_id",
    breaks: ["FORK-CUSTOM-ID"],
    onResponse(call, res) {
      if (call.route.kind !== "fork" || res.status !== 200) return;
      const body = jsonOf(res);
      delete body.agent_session_id;
      return withJson(res, body);
    },
  },

  // ---- state and transitions ---------------------------------------------------------------------------
  {
    name: "created-shared",
    area: "state",
    description: "A conversation created by send-message starts shared, not private",
    breaks: ["STATE-CREATED-PRIVATE"],
    async onResponse(call, res, tools) {
      const id = res.headers["x-conversation-id"];
      const seen: Set<string> = tools.state.get("seen") ?? new Set();
      tools.state.set("seen", seen);
      if (call.route.kind !== "send" || !isEventStream(res) || !id || seen.has(id) || !call.route.agent)
        return;
      seen.add(id);
      await tools.forward(
        ProxyCall.make("POST", conversationPath(call.route.agent, id), call.key, { shared: true }),
      );
    },
  },
  {
    name: "fork-changes-parent",
    area: "state",
    description: "Forking changes the parent (it becomes shared)",
    breaks: ["STATE-FORK-CHILD"],
    async onResponse(call, res, tools) {
      const { kind, agent, id } = call.route;
      if (kind !== "fork" || res.status !== 200 || !agent || !id) return;
      await tools.forward(ProxyCall.make("POST", conversationPath(agent, id), call.key, { shared: true }));
    },
  },
  {
    name: "fork-child-shared",
    area: "state",
    description: "A fork's child is created shared, not private",
    breaks: ["STATE-FORK-CHILD", "STATE-SHARED-MEMBER-FORK"],
    async onResponse(call, res, tools) {
      const child = jsonOf(res)?.conversation_id;
      if (call.route.kind !== "fork" || res.status !== 200 || typeof child !== "string" || !call.route.agent)
        return;
      await tools.forward(
        ProxyCall.make("POST", conversationPath(call.route.agent, child), call.key, { shared: true }),
      );
    },
  },
  {
    name: "fork-without-context",
    area: "state",
    description: "A fork copies none of the parent's turns (its first turn cannot answer from the parent)",
    breaks: ["STATE-FORK-CONTEXT"],
    onRequest(call) {
      if (call.route.kind !== "fork") return;
      const body = call.json() ?? {};
      if (body.at_turn !== undefined) return;
      call.setJson({ ...body, at_turn: 0 });
    },
  },
  {
    name: "delete-leaves-conversation",
    area: "state",
    description: "Delete answers 204 but the conversation stays readable",
    breaks: ["STATE-DELETE"],
    onRequest(call, tools) {
      if (call.method !== "DELETE" || call.route.kind !== "conversation") return;
      // Held back until the proxy closes, so the shared server is still cleaned up.
      const held = call.clone();
      tools.onClose(async () => void (await tools.forward(held)));
      return { status: 204, headers: {}, body: Buffer.alloc(0) };
    },
  },
  {
    name: "share-accepts-extra-properties",
    area: "state",
    description:
      "The share toggle accepts a body with properties besides shared (it must be exactly {shared})",
    breaks: ["SHARE-BODY-STRICT"],
    onRequest(call) {
      if (call.method !== "POST" || call.route.kind !== "conversation") return;
      const body = call.json();
      if (typeof body?.shared === "boolean") call.setJson({ shared: body.shared });
    },
  },
  {
    name: "unshare-ignored",
    area: "state",
    description: 'Toggling {"shared": false} answers as usual but the conversation stays shared',
    breaks: ["STATE-SHARE-FALSE"],
    async onRequest(call, tools) {
      if (call.method !== "POST" || call.route.kind !== "conversation" || call.json()?.shared !== false)
        return;
      const read = ProxyCall.make("GET", call.path, call.key);
      return tools.forward(read);
    },
  },
  {
    name: "title-follows-latest-prompt",
    area: "state",
    description: "The title is re-derived from the latest prompt instead of never changing",
    breaks: ["GET-TITLE-STABLE"],
    onRequest(call, tools) {
      const body = sendBody(call);
      const id = call.conversationId;
      const last = Array.isArray(body?.messages) ? body.messages.at(-1)?.content : undefined;
      if (id !== undefined && typeof last === "string") tools.state.set(`prompt:${id}`, last.slice(0, 80));
    },
    onResponse(call, res, tools) {
      return editJson(call, res, ["conversation"], (body) => {
        const prompt = tools.state.get(`prompt:${body.conversation?.id}`);
        if (prompt) body.conversation.title = prompt;
      });
    },
  },
  {
    name: "session-never-recorded",
    area: "state",
    description: "agent_session_id stays null after a turn with output",
    breaks: ["STATE-SESSION-RECORDED", "CONVID-OWN-RESUMES"],
    onResponse(call, res) {
      return editJson(call, res, ["conversation"], (body) => {
        if (body.conversation) body.conversation.agent_session_id = null;
      });
    },
  },
  {
    name: "session-reported-before-recorded",
    area: "state",
    description:
      "agent_session_id reads non-null before the session is recorded (resuming then has no memory)",
    breaks: ["CONVID-OWN-RESUMES", "STATE-EMPTY-TURN-CLEARS"],
    onResponse(call, res) {
      return editJson(call, res, ["conversation"], (body) => {
        if (body.conversation && body.conversation.agent_session_id === null)
          body.conversation.agent_session_id = "sess_pending";
      });
    },
  },
  {
    name: "empty-turn-keeps-session",
    area: "state",
    description: "A resumed turn with no output does not clear agent_session_id",
    breaks: ["STATE-EMPTY-TURN-CLEARS"],
    onResponse(call, res, tools) {
      return editJson(call, res, ["conversation"], (body) => {
        const c = body.conversation;
        if (!c) return;
        if (c.agent_session_id !== null) tools.state.set(`session:${c.id}`, c.agent_session_id);
        else c.agent_session_id = tools.state.get(`session:${c.id}`) ?? null;
      });
    },
  },
  {
    name: "empty-first-turn-session-recorded-late",
    area: "state",
    description:
      "A conversation whose only turn produced no output gets an agent_session_id anyway, recorded half a second after its stream closed (as a turn with output's is)",
    breaks: ["STATE-EMPTY-TURN-CLEARS"],
    onRequest(call, tools) {
      const id = call.conversationId;
      if (
        call.route.kind === "send" &&
        call.method === "POST" &&
        (!id || !tools.ledger.conversations.has(id))
      )
        firstTurns.add(call);
      return undefined;
    },
    onResponse(call, res, tools) {
      if (firstTurns.has(call) && isEventStream(res)) {
        const id = res.headers["x-conversation-id"] ?? call.conversationId;
        const events = parseSse(res.body.toString("utf8"));
        const blocks = events.some((e) => e.event === "content_block_start");
        if (id && !blocks) tools.state.set(`late:${id}`, Date.now() + 500);
        return undefined;
      }
      return editJson(call, res, ["conversation"], (body) => {
        const c = body.conversation;
        const due = c ? (tools.state.get(`late:${c.id}`) as number | undefined) : undefined;
        if (c && due !== undefined && Date.now() >= due && c.agent_session_id === null)
          c.agent_session_id = `sess_${c.id}`;
      });
    },
  },
  {
    name: "resume-loses-files",
    area: "state",
    description:
      "A resumed turn does not have the files an earlier turn wrote (every turn gets a fresh sandbox)",
    breaks: ["STATE-RESUME-KEEPS-FILES"],
    onRequest(call) {
      editSend(call, (body) => {
        body.metadata = { ...body.metadata, isolated: true };
      });
    },
  },
  {
    name: "session-recorded-immediately",
    area: "state",
    description:
      "agent_session_id is recorded before the stream closes, not a few seconds after (there is no race)",
    breaks: ["STATE-SESSION-NULL-AT-CLOSE", "STATE-RACE-MEMORY-LOST"],
    async onResponse(call, res, tools) {
      const id = res.headers["x-conversation-id"];
      const { kind, agent } = call.route;
      if (kind !== "send" || !isEventStream(res) || !id || !agent || !call.key) return;
      const output = hasOutput(res);
      await pollSession(tools, agent, id, call.key, (s) => (output ? s != null : s === null));
    },
  },

  // ---- send-message body rules -------------------------------------------------------------------------
  {
    name: "empty-messages-accepted",
    area: "send",
    description: "An empty or missing messages array runs a turn instead of being refused",
    breaks: ["LIMIT-MESSAGES-NONEMPTY"],
    onRequest(call) {
      editSend(call, (body) => {
        if (!Array.isArray(body.messages) || body.messages.length === 0)
          body.messages = [{ role: "user", content: "Say hello." }];
      });
    },
  },
  {
    name: "history-replayed",
    area: "send",
    description: "Every element of messages is read (history is replayed), not only the newest user one",
    breaks: ["SEND-NEWEST-USER-ONLY"],
    onRequest(call) {
      editSend(call, (body) => {
        if (!Array.isArray(body.messages) || body.messages.length < 2) return;
        const all = body.messages
          .map((m: Json) => (typeof m?.content === "string" ? m.content : ""))
          .join("\n\n");
        body.messages = [{ role: "user", content: all }];
      });
    },
  },
  {
    name: "newest-element-not-newest-user",
    area: "send",
    description:
      'The last element of messages is read whatever its role, not the newest element with role "user"',
    breaks: ["SEND-NEWEST-USER-ONLY"],
    onRequest(call) {
      editSend(call, (body) => {
        const last = Array.isArray(body.messages) ? body.messages.at(-1) : undefined;
        if (last && last.role !== "user") body.messages = [{ role: "user", content: last.content }];
      });
    },
  },
  {
    name: "read-only-default-false",
    area: "send",
    description: "A turn with an API key and no read_only commits and pushes (the default must be read-only)",
    breaks: ["REPO-READ-ONLY-DEFAULT"],
    onRequest(call) {
      editSend(call, (body) => {
        if (body.metadata?.read_only === undefined) body.metadata = { ...body.metadata, read_only: false };
      });
    },
  },
  {
    name: "content-blocks-last-only",
    area: "send",
    description: "Only the last text block of an array content is read (blocks are not joined)",
    breaks: ["SEND-CONTENT-BLOCKS"],
    onRequest(call) {
      editSend(call, (body) => {
        for (const m of Array.isArray(body.messages) ? body.messages : []) {
          if (!Array.isArray(m?.content)) continue;
          const texts = m.content.filter((b: Json) => b?.type === "text");
          m.content = texts.slice(-1);
        }
      });
    },
  },
  {
    name: "system-dropped",
    area: "send",
    description: "The system text is not applied to the turn",
    breaks: ["SEND-SYSTEM-APPLIED"],
    onRequest(call) {
      editSend(call, (body) => delete body.system);
    },
  },
  {
    name: "model-field-ignored",
    area: "send",
    description: "The model field does not select the turn's model",
    breaks: ["SEND-MODEL-SELECTS", "SEND-AUTOMATION-BODY-WINS"],
    onRequest(call) {
      if (call.route.kind === "send") editSend(call, (body) => delete body.model);
    },
  },
  {
    name: "max-tokens-honoured",
    area: "send",
    description: "max_tokens is applied (the reply is cut) instead of being accepted and ignored",
    breaks: ["SEND-IGNORED-FIELDS"],
    onEvents(events, call) {
      const max = sendBody(call)?.max_tokens;
      if (typeof max !== "number") return;
      for (const e of events) {
        const delta = e.data?.delta;
        if (delta?.type === "text_delta") delta.text = delta.text.slice(0, max * 4);
      }
    },
  },
  {
    name: "stream-false-answers-json",
    area: "send",
    description: "stream: false (or no stream field) answers one JSON message instead of an event stream",
    breaks: ["SEND-STREAM-FALSE"],
    onResponse(call, res) {
      const body = sendBody(call);
      if (!body || body.stream === true || !isEventStream(res)) return;
      const events = parseSse(res.body.toString("utf8"));
      const start = events.find((e) => e.event === "message_start")?.data.message ?? {};
      const end = events.find((e) => e.event === "message_delta")?.data ?? {};
      const text = events
        .filter((e) => e.data?.delta?.type === "text_delta")
        .map((e) => e.data.delta.text)
        .join("");
      return withJson(res, {
        ...start,
        content: [{ type: "text", text }],
        stop_reason: end.delta?.stop_reason,
        usage: end.usage,
      });
    },
  },
  {
    name: "isolated-ignored",
    area: "send",
    description: "isolated: true still runs in the conversation's sandbox with its files",
    breaks: ["SEND-ISOLATED"],
    onRequest(call) {
      editSend(call, (body) => delete body.metadata?.isolated);
    },
  },
  {
    name: "routed-bare-name-refused",
    area: "send",
    description: "The model-routed send refuses a bare agent name (only <prefix>--<agent> is routed)",
    breaks: ["ROUTED-BARE-NAME"],
    onRequest(call) {
      const model = call.route.kind === "routed" ? sendBody(call)?.model : undefined;
      if (typeof model === "string" && !model.includes("--"))
        return errorResponse(404, "not_found_error", `Agent not found: ${model}`);
    },
  },
  {
    name: "fork-model-dropped",
    area: "send",
    description: "A model given at fork time is not recorded on the child",
    breaks: ["FORK-MODEL-RECORDED"],
    onRequest(call) {
      if (call.route.kind !== "fork") return;
      const body = call.json() ?? {};
      delete body.model;
      call.setJson(body);
    },
  },

  // ---- silent failure modes ----------------------------------------------------------------------------
  {
    name: "excess-attachments-refused",
    area: "silent",
    description: "More than 10 attachments get a 400 instead of the excess being dropped silently",
    breaks: ["LIMIT-ATTACHMENT-COUNT"],
    onRequest(call) {
      if ((attachmentsOf(sendBody(call))?.length ?? 0) > 10)
        return errorResponse(400, "invalid_request_error", "At most 10 attachments per turn");
    },
  },
  {
    name: "attachment-size-cap-ignored",
    area: "silent",
    description: "Attachments past 10 MiB in total are kept (every file arrives, the cap is not applied)",
    breaks: ["LIMIT-ATTACHMENT-SIZE"],
    onRequest(call) {
      // The server enforces its cap on what it receives: shrinking each payload to 1 KiB lets every file
      // of an over-cap request arrive, which is what a server without the cap shows its caller.
      editSend(call, (body) => {
        for (const a of attachmentsOf(body) ?? []) {
          if (typeof a?.dataBase64 === "string" && a.dataBase64.length > 2048)
            a.dataBase64 = Buffer.from(a.dataBase64.slice(0, 2048), "base64").toString("base64");
        }
      });
    },
  },
  {
    name: "malformed-attachment-refused",
    area: "silent",
    description: "A malformed attachment entry gets a 400 instead of being dropped silently",
    breaks: ["SEND-ATTACHMENT-MALFORMED-DROPPED"],
    onRequest(call) {
      const list = attachmentsOf(sendBody(call)) ?? [];
      const wellFormed = (a: Json) =>
        typeof a?.name === "string" && typeof a.mediaType === "string" && typeof a.dataBase64 === "string";
      if (!list.every(wellFormed))
        return errorResponse(400, "invalid_request_error", "metadata.attachments: malformed entry");
    },
  },
  {
    name: "attachment-with-path-dropped",
    area: "silent",
    description: "An attachment whose name has a path is dropped instead of sanitized to its basename",
    breaks: ["SEND-ATTACHMENT-SANITIZED"],
    onRequest(call) {
      editSend(call, (body) => {
        const list = attachmentsOf(body);
        if (list) body.metadata.attachments = list.filter((a) => !/[/\\]/.test(String(a?.name)));
      });
    },
  },
  {
    name: "duplicate-attachment-overwritten",
    area: "silent",
    description: "Same-named attachments overwrite each other instead of being de-duplicated",
    breaks: ["SEND-ATTACHMENT-DEDUP"],
    onRequest(call) {
      editSend(call, (body) => {
        const list = attachmentsOf(body);
        if (!list) return;
        const last = new Map<unknown, Json>();
        for (const a of list) last.set(a?.name, a);
        body.metadata.attachments = [...last.values()];
      });
    },
  },
  {
    name: "unknown-automation-refused",
    area: "silent",
    description: "An unknown metadata.automation name gets 404 instead of being ignored",
    breaks: ["SEND-AUTOMATION-UNKNOWN-IGNORED"],
    onRequest(call) {
      const name = sendBody(call)?.metadata?.automation;
      if (typeof name === "string" && !DEMO_AUTOMATIONS.has(name))
        return errorResponse(404, "not_found_error", `Automation not found: ${name}`);
    },
  },
  {
    name: "race-waits-for-session",
    area: "silent",
    description:
      "A message sent before agent_session_id is recorded waits for it and resumes with memory (the API: no memory)",
    breaks: ["STATE-RACE-MEMORY-LOST"],
    async onRequest(call, tools) {
      const id = call.conversationId;
      const agent = call.route.agent;
      if (call.route.kind !== "send" || !id || !agent || !call.key || !tools.state.get(`output:${id}`))
        return;
      await pollSession(tools, agent, id, call.key, (s) => s != null, 3_000);
    },
    onResponse(call, res, tools) {
      const id = res.headers["x-conversation-id"];
      if (call.route.kind === "send" && isEventStream(res) && id)
        tools.state.set(`output:${id}`, hasOutput(res));
    },
  },
  // ---- added with the coverage table (conformance/COVERAGE.md): rules no check verified before -------
  {
    name: "since-filter-ignored",
    area: "shapes",
    description: "The list's since filter is ignored",
    breaks: ["LIST-SINCE-FILTER"],
    onRequest: (call) => dropListParam(call, "since"),
  },
  {
    name: "channel-id-filter-ignored",
    area: "shapes",
    description: "The list's channel_id filter is ignored",
    breaks: ["LIST-CHANNEL-ID-FILTER"],
    onRequest: (call) => dropListParam(call, "channel_id"),
  },
  {
    name: "notebook-path-filter-ignored",
    area: "shapes",
    description: "The list's notebook_path filter is ignored",
    breaks: ["LIST-NOTEBOOK-PATH-FILTER"],
    onRequest: (call) => dropListParam(call, "notebook_path"),
  },
  {
    name: "automation-filter-ignored",
    area: "shapes",
    description: "The list's automation filter is ignored",
    breaks: ["LIST-AUTOMATION-FILTER"],
    onRequest: (call) => dropListParam(call, "automation"),
  },
  {
    name: "list-default-limit-20",
    area: "shapes",
    description: "The list's limit defaults to 20, not 50",
    breaks: ["LIMIT-LIST-DEFAULT-50"],
    onRequest(call) {
      if (call.route.kind !== "list" || call.url.searchParams.has("limit")) return;
      const url = call.url;
      url.searchParams.set("limit", "20");
      call.path = url.pathname + url.search;
    },
  },
  {
    name: "list-timestamps-without-ms",
    area: "shapes",
    description: "Listed conversations' timestamps are ISO 8601 without milliseconds",
    breaks: ["LIST-TIMESTAMPS"],
    onResponse(call, res) {
      return editJson(call, res, ["list"], (body) => {
        for (const c of body.conversations ?? [])
          for (const field of ["created_at", "updated_at"])
            if (typeof c?.[field] === "string") c[field] = c[field].replace(/\.\d{3}Z$/, "Z");
      });
    },
  },
  {
    name: "channel-owned-hidden-from-member",
    area: "shapes",
    description:
      "A conversation owned by a channel is visible to one member only (not to every member of the workspace)",
    breaks: ["LIST-CHANNEL-OWNED-VISIBLE"],
    onResponse(call, res) {
      if (call.key !== DEMO_MEMBER_KEY) return;
      const channelOwned = (c: Json) => c?.is_owner === false && c?.shared === false;
      if (call.route.kind === "conversation" && channelOwned(jsonOf(res)?.conversation))
        return errorResponse(404, "not_found_error", "Conversation not found");
      return editJson(call, res, ["list"], (body) => {
        if (Array.isArray(body.conversations))
          body.conversations = body.conversations.filter((c: Json) => !channelOwned(c));
      });
    },
  },
  {
    name: "title-fixed",
    area: "shapes",
    description: "Every conversation gets the same title instead of one derived from its first prompt",
    breaks: ["GET-TITLE-FROM-PROMPT"],
    onResponse(call, res) {
      return editJson(call, res, ["conversation", "list", "transcript"], (body) => {
        for (const c of [body.conversation, ...(body.conversations ?? [])])
          if (c && typeof c.title === "string") c.title = "New conversation";
      });
    },
  },
  {
    name: "fork-at-turn-ignored",
    area: "state",
    description: "Fork ignores at_turn: the child always carries every turn",
    breaks: ["FORK-AT-TURN-CUTS"],
    onRequest: (call) => editFork(call, (body) => delete body.at_turn),
  },
  {
    name: "fork-default-first-turn",
    area: "state",
    description: "Fork without at_turn copies the first turn only, not all turns",
    breaks: ["FORK-DEFAULT-ALL-TURNS"],
    onRequest: (call) =>
      editFork(call, (body) => {
        if (body.at_turn === undefined) body.at_turn = 1;
      }),
  },
  {
    name: "fork-model-not-inherited",
    area: "state",
    description: "A fork without model does not inherit the parent's: the child gets the agent's default",
    breaks: ["FORK-MODEL-INHERITED"],
    onRequest: (call) =>
      editFork(call, (body) => {
        const fallback = DEMO_DEFAULT_MODELS.get(call.route.agent ?? "");
        if (body.model === undefined && body.automation === undefined && fallback) body.model = fallback;
      }),
  },
  {
    name: "fork-automation-dropped",
    area: "state",
    description: "An automation given at fork time is not recorded on the child",
    breaks: ["FORK-AUTOMATION-RECORDED"],
    onRequest: (call) => editFork(call, (body) => delete body.automation),
  },
  {
    name: "conversation-routes-without-key",
    area: "status",
    description:
      "The routes of one conversation (fetch, transcript, compaction, fork) serve a request without X-Api-Key",
    breaks: ["AUTH-401-EVERY-ROUTE"],
    needs: WORKING_KEY,
    async onRequest(call, tools) {
      if (call.key !== undefined || !CONVERSATION_ROUTES.includes(call.route.kind)) return;
      call.key = await tools.ledger.workingKey();
    },
  },
  {
    name: "conversation-routes-ignore-agent",
    area: "status",
    description:
      "The routes of one conversation find it by id whatever agent the path names (no 404 on another agent)",
    breaks: ["ERR-404-OTHER-AGENT-ROUTES"],
    onRequest(call, tools) {
      const { kind, agent, id } = call.route;
      const known = id === undefined ? undefined : tools.ledger.conversations.get(id);
      if (!CONVERSATION_ROUTES.includes(kind) || !known || !agent || known.agent === agent) return;
      const prefix = `/api/agents/${encodeURIComponent(agent)}/`;
      if (call.path.startsWith(prefix))
        call.path = `/api/agents/${encodeURIComponent(known.agent)}/${call.path.slice(prefix.length)}`;
    },
  },
  {
    name: "private-transcript-readable",
    area: "status",
    description: "Another member's unshared conversation is readable through its transcript (no 404)",
    breaks: ["ERR-404-PRIVATE-ROUTES"],
    async onResponse(call, res, tools) {
      if (call.route.kind !== "transcript" || res.status !== 404 || !call.route.id) return;
      const owner = tools.ledger.conversations.get(call.route.id)?.owner;
      if (!owner || owner === call.key) return;
      return replayWith(call, owner, tools);
    },
  },
  // ---- skip paths: a deployment that shows the deciding fact must fail, not skip ----------------------------
  {
    name: "failure-without-error-event",
    area: "sse",
    description:
      "A turn that fails after its stream opened just stops: no error event, no message_stop (the stream's end breaks the grammar)",
    breaks: ["SSE-ERROR-EVENT"],
    onEvents(events) {
      if (!events.some((e) => e.event === "error")) return;
      return events.filter((e) => e.event !== "error");
    },
  },
  {
    name: "failure-swallowed-as-end-turn",
    area: "sse",
    description:
      "A turn that fails after its stream opened ends as if it had answered: its error event becomes message_delta (end_turn) and message_stop",
    breaks: ["SSE-ERROR-EVENT"],
    knownGap:
      "a turn asked to fail that ends cleanly at message_stop looks, from outside, like a model that declined to fail (a real model does): the API gives no way to make a turn fail, nor a route that records a failure, so SSE-ERROR-EVENT skips",
    onEvents(events) {
      if (!events.some((e) => e.event === "error")) return;
      const usage = {
        input_tokens: 0,
        output_tokens: 0,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
        total_cost_usd: 0,
      };
      return [
        ...events.filter((e) => e.event !== "error"),
        {
          event: "message_delta",
          data: { type: "message_delta", delta: { stop_reason: "end_turn" }, usage },
        },
        { event: "message_stop", data: { type: "message_stop" } },
      ];
    },
  },
  {
    name: "compaction-route-constant",
    area: "shapes",
    description:
      'Last compaction always answers {compacted: false, summary: ""}, although the transcript shows the compaction',
    breaks: ["COMPACTION-FLAGGED"],
    onResponse(call, res) {
      return editJson(call, res, ["compaction"], (body) => {
        body.compacted = false;
        body.summary = "";
      });
    },
  },
  {
    name: "empty-turn-keeps-memory",
    area: "state",
    description:
      "A resumed turn with no output neither clears agent_session_id nor the session: the next turn still remembers",
    breaks: ["STATE-EMPTY-TURN-CLEAN-SESSION"],
    onRequest(call, tools) {
      const id = call.conversationId;
      const text = newestUserText(call);
      if (id === undefined || text === undefined) return;
      const word = /code word: (\S+?)\./.exec(text)?.[1];
      if (word) tools.state.set(`word:${id}`, word);
      if (/no output/i.test(text)) tools.state.set(`emptied:${id}`, true);
    },
    onEvents(events, call, tools) {
      const id = call.conversationId;
      const text = newestUserText(call) ?? "";
      const word = tools.state.get(`word:${id}`);
      if (!tools.state.get(`emptied:${id}`) || !word || !/what code word/i.test(text)) return;
      for (const e of events)
        if (e.event === "content_block_delta" && e.data?.delta?.type === "text_delta")
          e.data.delta.text = word;
      return events;
    },
    onResponse(call, res, tools) {
      const id = call.route.id;
      if (call.route.kind !== "conversation" || !tools.state.get(`emptied:${id}`)) return;
      return editJson(call, res, ["conversation"], (body) => {
        if (body.conversation && body.conversation.agent_session_id === null)
          body.conversation.agent_session_id = "kept-after-empty-turn";
      });
    },
  },
  {
    name: "created-at-read-time",
    area: "consistency",
    description:
      "The single fetch fills created_at with the time of the read, so it moves between two reads with nothing in between",
    breaks: [
      "CONSIST-ROUTES-AGREE",
      "CONSIST-SHARED-MEMBER-VIEW",
      "CONSIST-FORK-READBACK",
      "CONSIST-ROUTED-SEND",
      "CONSIST-ID-CHARACTERS",
    ],
    onResponse(call, res) {
      return editJson(call, res, ["conversation"], (body) => {
        if (body.conversation) body.conversation.created_at = new Date().toISOString();
      });
    },
  },
  {
    name: "resumed-turn-clears-session",
    area: "state",
    description:
      "A resumed turn that answered leaves agent_session_id null on the single fetch, as if it had produced no output",
    breaks: ["FORK-AT-TURN-CUTS", "FORK-DEFAULT-ALL-TURNS"],
    onRequest(call, tools) {
      const id = call.conversationId;
      if (id === undefined || newestUserText(call) === undefined) return;
      tools.state.set(`turns:${id}`, Number(tools.state.get(`turns:${id}`) ?? 0) + 1);
    },
    onResponse(call, res, tools) {
      if (call.route.kind !== "conversation" || Number(tools.state.get(`turns:${call.route.id}`) ?? 0) < 2)
        return;
      return editJson(call, res, ["conversation"], (body) => {
        if (body.conversation) body.conversation.agent_session_id = null;
      });
    },
  },
  // ---- values of a turn's stream and of the flow's key (issue 29: each judged by a named check) -------------
  {
    name: "turn-cost-in-cents",
    area: "meaning",
    description: "total_cost_usd carries the turn's cost in cents, not US dollars",
    breaks: ["MEANING-USAGE-COUNTS"],
    onEvents(events) {
      for (const e of events)
        if (e.event === "message_delta" && typeof e.data?.usage?.total_cost_usd === "number")
          e.data.usage.total_cost_usd *= 100;
      return events;
    },
  },
  {
    name: "message-id-fixed",
    area: "meaning",
    description: "message_start.message.id is one fixed string on every turn",
    breaks: ["MEANING-MESSAGE-START"],
    onEvents(events) {
      for (const e of events) if (e.event === "message_start" && e.data?.message) e.data.message.id = "msg_0";
      return events;
    },
  },
  {
    name: "stop-tool-use-with-tool-calls",
    area: "sse",
    description: "A turn with stream_tool_calls: true ends with stop_reason tool_use, not end_turn",
    breaks: ["SSE-STOP-REASON-TOOLS"],
    onEvents(events, call) {
      if (call.json()?.metadata?.stream_tool_calls !== true) return undefined;
      for (const e of events)
        if (e.event === "message_delta" && e.data?.delta) e.data.delta.stop_reason = "tool_use";
      return events;
    },
  },
  {
    name: "flow-unknown-key-accepted",
    area: "status",
    description: "The flow endpoint runs the flow for any X-API-Key, an unknown one included",
    breaks: ["FLOW-NO-KEY"],
    onRequest(call) {
      if (call.route.kind === "flow" && call.key !== undefined && call.key !== DEMO_FLOW_KEY)
        call.key = DEMO_FLOW_KEY;
      return undefined;
    },
  },
  ...tableMutations,
  ...outsideMutations,
  ...outsideMutations4,
  ...outsideMutations5,
  ...outsideMutations6,
  ...outsideMutations7,
  ...outsideMutations8,
  ...outsideMutations9,
  {
    name: "stream-buffered",
    area: "delivery",
    description:
      "The result is streamed back: a proxy that sends the headers at once but holds the body until the turn ends",
    breaks: ["SSE-STREAMED-INCREMENTAL"],
    stream: "buffered",
  },
  {
    name: "stream-held-until-end",
    area: "delivery",
    description:
      'A failure "arrives as an error event on a response already sent as 200": a proxy that sends nothing, headers included, until the turn ends',
    breaks: ["SSE-HEADERS-BEFORE-END"],
    stream: "held",
  },
];

const byName = new Map(mutations.map((m) => [m.name, m]));
if (byName.size !== mutations.length) throw new Error("duplicate mutation name");

export function mutationByName(name: string): Mutation | undefined {
  return byName.get(name);
}
