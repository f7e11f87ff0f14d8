/**
 * Breakages invented from outside the suite: written from the API's text by someone who had not read the
 * checks, each a fault a real deployment could have (a value right on one route and wrong on another, a
 * rule honoured for one legal input shape only, state that goes wrong across time, stream details, error
 * answers). They were run against the whole suite before the checks that now catch them were written;
 * `npm run mutation-score` runs them all, `npm test` the rows marked `sample`.
 */
import { everyConversation, foldId } from "./conversation-rewrites.ts";
import type { Mutation } from "./proxy-calls.ts";
import {
  errorResponse,
  isEventStream,
  type Json,
  jsonOf,
  jsonResponse,
  ProxyCall,
  type ProxyResponse,
  type ProxyTools,
  type SseEvent,
  withJson,
} from "./proxy-calls.ts";

const isSendPost = (call: ProxyCall) =>
  (call.route.kind === "send" || call.route.kind === "routed") && call.method === "POST";

/** Edits the JSON body of a send (per-agent or routed, as `routes` says) in place. */
function editSendBody(call: ProxyCall, routes: string[], edit: (body: Json) => void): undefined {
  if (!isSendPost(call) || !routes.includes(call.route.kind)) return;
  const body = call.json();
  if (body === null || typeof body !== "object" || Array.isArray(body)) return;
  edit(body);
  call.setJson(body);
}

/** A send that resumes a conversation this proxy saw created (the ledger knows the per-agent ones). */
function resumesKnown(call: ProxyCall, tools: ProxyTools): boolean {
  const id = call.json()?.metadata?.conversation_id;
  return typeof id === "string" && tools.ledger.conversations.has(id);
}

/** The same request again with another key, upstream. */
async function replayAs(call: ProxyCall, key: string | undefined, tools: ProxyTools) {
  if (!key) return undefined;
  const again = call.clone();
  again.key = key;
  return tools.forward(again);
}

function conversationPath(agent: string, id: string): string {
  return `/api/agents/${encodeURIComponent(agent)}/conversations/${encodeURIComponent(id)}`;
}

/** Groups a stream's block events by index: [start, delta..., stop] per block, in order of first sight. */
function blockGroups(events: SseEvent[]): { before: SseEvent[]; blocks: SseEvent[][]; after: SseEvent[] } {
  const first = events.findIndex((e) => e.event.startsWith("content_block_"));
  if (first < 0) return { before: events, blocks: [], after: [] };
  let last = first;
  for (let i = 0; i < events.length; i++) if (events[i].event.startsWith("content_block_")) last = i;
  const byIndex = new Map<number, SseEvent[]>();
  for (const e of events.slice(first, last + 1)) {
    const index = e.data?.index;
    if (typeof index !== "number") continue;
    const group = byIndex.get(index) ?? [];
    group.push(e);
    byIndex.set(index, group);
  }
  return { before: events.slice(0, first), blocks: [...byIndex.values()], after: events.slice(last + 1) };
}

function renumber(blocks: SseEvent[][]): SseEvent[] {
  return blocks.flatMap((group, index) =>
    group.map((e) => {
      e.data.index = index;
      return e;
    }),
  );
}

const blockType = (group: SseEvent[]) => group[0]?.data?.content_block?.type;

/** Rewrites the user messages' text blocks of a transcript answer. */
function editUserTexts(res: ProxyResponse, edit: (text: string) => string): ProxyResponse | undefined {
  const body = jsonOf(res);
  if (!Array.isArray(body?.messages)) return undefined;
  for (const m of body.messages)
    if (m?.role === "user" && Array.isArray(m.content))
      for (const b of m.content) if (typeof b?.text === "string") b.text = edit(b.text);
  return withJson(res, body);
}

/** An ISO instant written with a +02:00 offset: the same instant, not in UTC. */
function withOffset(value: string): string {
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) return value;
  return new Date(ms + 2 * 3_600_000).toISOString().replace("Z", "+02:00");
}

// ---------------------------------------------------------------------------------------------------------
// The model-routed send: "same body and behaviour as send-message".

const routedRows: Mutation[] = [
  {
    name: "routed-conversation-id-ignored",
    area: "send",
    table: "field × route",
    sample: true,
    description:
      "The model-routed send ignores metadata.conversation_id: every routed turn starts a new conversation",
    breaks: ["ROUTED-BARE-NAME", "CONSIST-ROUTED-SAME-RULES"],
    onRequest(call) {
      editSendBody(call, ["routed"], (body) => {
        if (body.metadata) delete body.metadata.conversation_id;
      });
    },
  },
  {
    name: "routed-stream-tool-calls-ignored",
    area: "send",
    table: "field × route",
    description: "The model-routed send ignores metadata.stream_tool_calls (no tool blocks on that route)",
    breaks: ["CONSIST-ROUTED-SAME-RULES"],
    onRequest(call) {
      editSendBody(call, ["routed"], (body) => {
        if (body.metadata) delete body.metadata.stream_tool_calls;
      });
    },
  },
  {
    name: "routed-system-dropped",
    area: "send",
    table: "field × route",
    description: "The model-routed send drops the system field",
    breaks: ["CONSIST-ROUTED-SAME-RULES"],
    onRequest(call) {
      editSendBody(call, ["routed"], (body) => {
        delete body.system;
      });
    },
  },
  {
    name: "routed-async-runs",
    area: "send",
    table: "field × route",
    sample: true,
    description: 'The model-routed send runs a turn for metadata.delivery "async" instead of 501',
    breaks: ["ERR-501-ASYNC"],
    onRequest(call) {
      editSendBody(call, ["routed"], (body) => {
        if (body.metadata?.delivery === "async") delete body.metadata.delivery;
      });
    },
  },
  {
    name: "routed-viewer-can-send",
    area: "send",
    table: "field × route",
    sample: true,
    description: "A Viewer key runs a turn through the model-routed send (403 on the per-agent send only)",
    breaks: ["CONSIST-ROUTED-REFUSALS"],
    needs: ["SEND-200-STREAM"],
    async onResponse(call, res, tools) {
      if (res.status !== 403 || call.route.kind !== "routed") return;
      if (!String(jsonOf(res)?.message).includes("Viewer")) return;
      return replayAs(call, await tools.ledger.workingKey(), tools);
    },
  },
  {
    name: "routed-shared-conversation-writable",
    area: "send",
    table: "field × route",
    description:
      "A member's turn into another member's shared conversation runs through the model-routed send",
    breaks: ["CONSIST-ROUTED-REFUSALS"],
    async onResponse(call, res, tools) {
      if (res.status !== 403 || call.route.kind !== "routed") return;
      const id = call.conversationId;
      const owner = id === undefined ? undefined : tools.ledger.conversations.get(id)?.owner;
      if (!owner || owner === call.key) return;
      return replayAs(call, owner, tools);
    },
  },
  {
    name: "routed-missing-key-accepted",
    area: "send",
    table: "field × route",
    description: "The model-routed send runs a turn without X-Api-Key",
    breaks: ["AUTH-401-EVERY-ROUTE"],
    needs: ["SEND-200-STREAM"],
    async onRequest(call, tools) {
      if (call.route.kind !== "routed" || call.key !== undefined) return;
      call.key = await tools.ledger.workingKey();
    },
  },
  {
    name: "routed-stream-content-type-plain",
    area: "send",
    table: "field × route",
    description: "The model-routed send's event stream is served as text/plain",
    breaks: ["CONSIST-ROUTED-SEND", "ROUTED-BARE-NAME"],
    onResponse(call, res) {
      if (call.route.kind !== "routed" || !isEventStream(res)) return;
      return { ...res, headers: { ...res.headers, "content-type": "text/plain; charset=utf-8" } };
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// A rule honoured for one shape of input only.

const inputRows: Mutation[] = [
  {
    name: "key-header-case-only-on-models",
    area: "consistency",
    table: "rule × input",
    sample: true,
    description:
      "The key header is case-insensitive on the models list only: every other route reads it only as X-Api-Key",
    breaks: ["CONSIST-KEY-HEADER-CASE"],
    onRequest(call) {
      if (call.route.kind === "models" || call.route.kind === "flow" || call.route.kind === "other") return;
      const spelled = call.sentHeaderNames.find((name) => name.toLowerCase() === "x-api-key");
      if (spelled === undefined || spelled === "X-Api-Key") return;
      return errorResponse(401, "authentication_error", "Invalid API key");
    },
  },
  {
    name: "flow-key-header-exact",
    area: "consistency",
    table: "rule × input",
    description: "The flow endpoint reads its key only from a header spelled exactly X-API-Key",
    breaks: ["FLOW-INVOKE"],
    onRequest(call) {
      if (call.route.kind !== "flow") return;
      const spelled = call.sentHeaderNames.find((name) => name.toLowerCase() === "x-api-key");
      if (spelled === undefined || spelled === "X-API-Key") return;
      return errorResponse(401, "authentication_error", "Invalid API key");
    },
  },
  {
    name: "fork-custom-id-folded",
    area: "consistency",
    table: "rule × input",
    description:
      "A fork's child id with spaces or non-ASCII letters is stored folded to ASCII (reachable under the folded id only)",
    breaks: ["FORK-CUSTOM-ID"],
    onRequest(call, tools) {
      const folded: Set<string> = tools.state.get("folded") ?? new Set();
      tools.state.set("folded", folded);
      if (call.route.kind === "fork" && call.method === "POST") {
        const body = call.json();
        const id = body?.conversation_id;
        if (typeof id === "string" && foldId(id) !== id) {
          folded.add(id);
          body.conversation_id = foldId(id);
          call.setJson(body);
        }
        return;
      }
      // Read back under the id the caller chose: the server knows only the folded one.
      const id = call.route.id;
      if (id !== undefined && folded.has(id))
        call.path = call.path.replace(encodeURIComponent(id), encodeURIComponent(foldId(id)));
    },
  },
  {
    name: "stream-tool-calls-false-means-true",
    area: "send",
    table: "rule × input",
    description:
      "metadata.stream_tool_calls sent as false turns tool blocks on (the field's presence is read)",
    breaks: ["SEND-TOOL-BLOCKS-DEFAULT-OFF"],
    onRequest(call) {
      editSendBody(call, ["send", "routed"], (body) => {
        if (body.metadata?.stream_tool_calls === false) body.metadata.stream_tool_calls = true;
      });
    },
  },
  {
    name: "non-text-block-refused",
    area: "send",
    table: "rule × input",
    description:
      "A user message holding a non-text block (an image) is refused with 400 instead of the block being skipped",
    breaks: ["SEND-CONTENT-BLOCKS"],
    onRequest(call) {
      if (!isSendPost(call)) return;
      const messages = call.json()?.messages;
      if (!Array.isArray(messages)) return;
      const last = [...messages].reverse().find((m) => m?.role === "user");
      if (Array.isArray(last?.content) && last.content.some((b: Json) => b?.type !== "text"))
        return errorResponse(400, "invalid_request_error", "Only text content blocks are supported");
    },
  },
  {
    name: "non-ascii-user-text-mangled",
    area: "consistency",
    table: "rule × input",
    description:
      "Non-ASCII characters of a user message are stored as ? (the transcript and the title show them mangled)",
    breaks: ["CONSIST-CONTENT-JOIN"],
    onResponse(call, res) {
      if (res.status !== 200 || call.method !== "GET") return;
      const mangle = (text: string) => text.replace(/[^\s!-~]/g, "?");
      const edited = call.route.kind === "transcript" ? editUserTexts(res, mangle) : undefined;
      return everyConversation(call, edited ?? res, (c) => {
        if (typeof c.title === "string") c.title = mangle(c.title);
      });
    },
  },
  {
    name: "system-ignored-on-resume",
    area: "send",
    table: "rule × input",
    sample: true,
    description: "system is applied to a conversation's first turn only; a resumed turn's system is dropped",
    breaks: ["SEND-RESUMED-BODY-READ"],
    onRequest(call, tools) {
      if (!isSendPost(call) || !resumesKnown(call, tools)) return;
      editSendBody(call, ["send", "routed"], (body) => {
        delete body.system;
      });
    },
  },
  {
    name: "model-ignored-on-resume",
    area: "send",
    table: "rule × input",
    description:
      "model is read on a conversation's first turn only; a resumed turn runs on the first turn's model",
    breaks: ["SEND-RESUMED-BODY-READ"],
    onRequest(call, tools) {
      if (!isSendPost(call) || !resumesKnown(call, tools)) return;
      editSendBody(call, ["send"], (body) => {
        delete body.model;
      });
    },
  },
  {
    name: "stream-tool-calls-ignored-on-resume",
    area: "send",
    table: "rule × input",
    description: "stream_tool_calls is read on a conversation's first turn only",
    breaks: ["SEND-RESUMED-BODY-READ"],
    onRequest(call, tools) {
      if (!isSendPost(call) || !resumesKnown(call, tools)) return;
      editSendBody(call, ["send", "routed"], (body) => {
        if (body.metadata) delete body.metadata.stream_tool_calls;
      });
    },
  },
  {
    name: "attachments-dropped-on-resume",
    area: "silent",
    table: "rule × input",
    description: "Attachments are written for a conversation's first turn only; a resumed turn's are dropped",
    breaks: ["SEND-RESUMED-BODY-READ"],
    onRequest(call, tools) {
      if (!isSendPost(call) || !resumesKnown(call, tools)) return;
      editSendBody(call, ["send", "routed"], (body) => {
        if (body.metadata) delete body.metadata.attachments;
      });
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// Answers: a value right on one route and wrong on another; state across time; error answers.

const answerRows: Mutation[] = [
  {
    name: "conversation-header-missing-on-resume",
    area: "headers",
    table: "field × route",
    description: "X-Conversation-Id is sent for a new conversation only, not when the caller named one",
    breaks: ["LIST-SHAPE-ORDER", "GET-TITLE-FROM-PROMPT"],
    onResponse(call, res) {
      if (!isEventStream(res) || typeof call.json()?.metadata?.conversation_id !== "string") return;
      const headers = { ...res.headers };
      delete headers["x-conversation-id"];
      return { ...res, headers };
    },
  },
  {
    name: "conversation-header-differs-on-resume",
    area: "headers",
    table: "field × route",
    description: "A resumed turn's X-Conversation-Id names another id than the conversation resumed",
    breaks: ["CONVID-UNKNOWN-VERBATIM"],
    onResponse(call, res, tools) {
      const id = call.json()?.metadata?.conversation_id;
      if (!isEventStream(res) || typeof id !== "string" || !tools.ledger.conversations.has(id)) return;
      return { ...res, headers: { ...res.headers, "x-conversation-id": `${id}-turn` } };
    },
  },
  {
    name: "revoked-message-only-on-send",
    area: "status",
    table: "field × route",
    description: "The revoked-key message is given on send-message only; other routes answer a generic 401",
    breaks: ["AUTH-401-REVOKED"],
    onResponse(call, res) {
      if (res.status !== 401 || call.route.kind === "send") return;
      if (jsonOf(res)?.message !== "API key has been revoked") return;
      return errorResponse(401, "authentication_error", "Invalid API key");
    },
  },
  {
    name: "not-found-message-only-on-send",
    area: "status",
    table: "field × route",
    description:
      "A conversation of a different agent gives Conversation not found on send only; its conversation routes answer a bare 404",
    breaks: ["ERR-404-OTHER-AGENT-ROUTES"],
    onResponse(call, res) {
      if (res.status !== 404 || call.route.kind === "send" || call.route.kind === "routed") return;
      if (jsonOf(res)?.message !== "Conversation not found") return;
      return errorResponse(404, "not_found_error", "Not found");
    },
  },
  {
    name: "unknown-key-404-on-conversation-routes",
    area: "status",
    table: "field × route",
    description:
      "An unrecognized key gets 404 on the conversation routes (the lookup runs before the key is judged)",
    breaks: ["AUTH-401-EVERY-ROUTE"],
    onResponse(call, res) {
      if (res.status !== 401 || call.key === undefined) return;
      if (!["conversation", "transcript", "compaction", "fork"].includes(call.route.kind)) return;
      if (jsonOf(res)?.message === "API key has been revoked") return;
      return errorResponse(404, "not_found_error", "Conversation not found");
    },
  },
  {
    name: "member-transcript-empty",
    area: "consistency",
    table: "field × route",
    description: "A member reading a shared conversation's transcript gets no messages (the owner sees them)",
    breaks: ["CONSIST-SHARED-MEMBER-VIEW"],
    onResponse(call, res, tools) {
      if (call.route.kind !== "transcript" || res.status !== 200 || !call.route.id) return;
      const owner = tools.ledger.conversations.get(call.route.id)?.owner;
      if (!owner || owner === call.key) return;
      const body = jsonOf(res);
      if (!Array.isArray(body?.messages)) return;
      body.messages = [];
      return withJson(res, body);
    },
  },
  {
    name: "timestamps-with-offset",
    area: "shapes",
    table: "field × route",
    description: "Conversation timestamps are written with a +02:00 offset (the same instant, not in UTC)",
    breaks: ["GET-SHAPE", "LIST-TIMESTAMPS"],
    onResponse(call, res) {
      return everyConversation(call, res, (c) => {
        for (const field of ["created_at", "updated_at"])
          if (typeof c[field] === "string") c[field] = withOffset(c[field]);
      });
    },
  },
  {
    name: "compaction-summary-empty",
    area: "shapes",
    table: "field × route",
    description:
      "last-compaction says compacted true with an empty summary (the transcript shows the summary)",
    breaks: ["COMPACTION-FLAGGED"],
    onResponse(call, res) {
      if (call.route.kind !== "compaction" || res.status !== 200) return;
      const body = jsonOf(res);
      if (body?.compacted !== true) return;
      body.summary = "";
      return withJson(res, body);
    },
  },
  {
    name: "transcript-assistant-text-truncated",
    area: "consistency",
    table: "field × route",
    description:
      "The transcript stores an assistant reply cut to its first 8 characters (the stream had all of it)",
    breaks: ["TRANSCRIPT-SHAPE"],
    onResponse(call, res) {
      if (call.route.kind !== "transcript" || res.status !== 200) return;
      const body = jsonOf(res);
      if (!Array.isArray(body?.messages)) return;
      for (const m of body.messages)
        if (m?.role === "assistant" && Array.isArray(m.content))
          for (const b of m.content) if (typeof b?.text === "string") b.text = b.text.slice(0, 8);
      return withJson(res, body);
    },
  },
  {
    name: "transcript-newest-first",
    area: "consistency",
    table: "field × route",
    sample: true,
    description: "The transcript lists messages newest first",
    breaks: ["MEANING-TRANSCRIPT-ORDER"],
    onResponse(call, res) {
      if (call.route.kind !== "transcript" || res.status !== 200) return;
      const body = jsonOf(res);
      if (!Array.isArray(body?.messages) || body.messages.length < 2) return;
      body.messages.reverse();
      return withJson(res, body);
    },
  },
  {
    name: "delete-then-send-refused",
    area: "state",
    table: "rule × input",
    sample: true,
    description:
      "A deleted conversation's id cannot be used again: a send naming it gets 404 instead of creating it anew",
    breaks: ["CONSIST-DELETED-ID-NEW"],
    onResponse(call, res, tools) {
      const deleted: Set<string> = tools.state.get("deleted") ?? new Set();
      tools.state.set("deleted", deleted);
      if (
        call.route.kind === "conversation" &&
        call.method === "DELETE" &&
        res.status === 204 &&
        call.route.id
      )
        deleted.add(call.route.id);
      return undefined;
    },
    onRequest(call, tools) {
      const deleted: Set<string> | undefined = tools.state.get("deleted");
      const id = call.json()?.metadata?.conversation_id;
      if (isSendPost(call) && typeof id === "string" && deleted?.has(id))
        return errorResponse(404, "not_found_error", "Conversation not found");
    },
  },
  {
    name: "delete-keeps-history-for-reused-id",
    area: "state",
    table: "rule × input",
    description:
      "Deleting a conversation leaves its messages behind: a new conversation created with the same id shows them",
    breaks: ["CONSIST-DELETED-ID-NEW"],
    async onRequest(call, tools) {
      if (call.route.kind !== "conversation" || call.method !== "DELETE" || !call.route.id) return;
      const res = await tools.forward(ProxyCall.make("GET", `${call.path.split("?")[0]}/messages`, call.key));
      const messages = jsonOf(res)?.messages;
      if (Array.isArray(messages)) {
        const kept: Map<string, Json[]> = tools.state.get("kept") ?? new Map();
        tools.state.set("kept", kept);
        kept.set(call.route.id, messages);
      }
    },
    onResponse(call, res, tools) {
      const kept: Map<string, Json[]> | undefined = tools.state.get("kept");
      const id = call.route.id;
      if (!kept || !id || !kept.has(id) || call.method !== "GET" || res.status !== 200) return;
      if (call.route.kind === "transcript") {
        const body = jsonOf(res);
        if (!Array.isArray(body?.messages)) return;
        body.messages = [...(kept.get(id) ?? []), ...body.messages];
        return withJson(res, body);
      }
    },
  },
  {
    name: "fork-child-follows-parent",
    area: "state",
    table: "rule × input",
    sample: true,
    description:
      "A fork's child is a live view of its parent: turns on the parent after the fork show in the child's transcript",
    breaks: ["CONSIST-FORK-READBACK"],
    async onResponse(call, res, tools) {
      const forks: Map<string, { agent: string; parent: string; count: number }> =
        tools.state.get("forks") ?? new Map();
      tools.state.set("forks", forks);
      if (call.route.kind === "fork" && res.status === 200 && call.route.agent && call.route.id) {
        const child = jsonOf(res)?.conversation_id;
        const parent = await tools.forward(
          ProxyCall.make("GET", `${conversationPath(call.route.agent, call.route.id)}/messages`, call.key),
        );
        const count = jsonOf(parent)?.messages?.length;
        if (typeof child === "string" && typeof count === "number")
          forks.set(child, { agent: call.route.agent, parent: call.route.id, count });
        return;
      }
      const fork = call.route.id ? forks.get(call.route.id) : undefined;
      if (!fork || call.route.kind !== "transcript" || res.status !== 200) return;
      const parent = await tools.forward(
        ProxyCall.make("GET", `${conversationPath(fork.agent, fork.parent)}/messages`, call.key),
      );
      const later = jsonOf(parent)?.messages?.slice(fork.count);
      const body = jsonOf(res);
      if (!Array.isArray(later) || later.length === 0 || !Array.isArray(body?.messages)) return;
      body.messages.push(...later);
      return withJson(res, body);
    },
  },
  {
    name: "session-forgotten-after-a-while",
    area: "state",
    table: "rule × input",
    description:
      "agent_session_id is reported null again 3 s after it was recorded (the conversation reads as if never resumed)",
    breaks: ["STATE-SESSION-RECORDED"],
    knownGap:
      "a recorded session that a deployment forgets after a while, with no turn between, shows only to a reader who waits; the suite reads each conversation within seconds of its turns and the API's own horizon (resumed days or weeks later) is beyond any run",
    onResponse(call, res, tools) {
      const seen: Map<string, number> = tools.state.get("seen") ?? new Map();
      tools.state.set("seen", seen);
      return everyConversation(call, res, (c) => {
        if (typeof c.id !== "string" || c.agent_session_id === null) return;
        const first = seen.get(c.id) ?? Date.now();
        seen.set(c.id, first);
        if (Date.now() - first > 3_000) c.agent_session_id = null;
      });
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// The event stream.

const streamRows: Mutation[] = [
  {
    name: "tool-result-before-tool-use",
    area: "sse",
    table: "rule × input",
    sample: true,
    description: "With stream_tool_calls, a tool_result block arrives before the tool_use block it answers",
    breaks: ["SEND-TOOL-BLOCKS"],
    onEvents(events) {
      const { before, blocks, after } = blockGroups(events);
      const use = blocks.findIndex((g) => blockType(g) === "tool_use");
      const result = blocks.findIndex((g) => blockType(g) === "tool_result");
      if (use < 0 || result < 0 || result < use) return;
      const [moved] = blocks.splice(result, 1);
      blocks.splice(use, 0, moved);
      return [...before, ...renumber(blocks), ...after];
    },
  },
  {
    name: "tool-result-id-mismatch",
    area: "sse",
    table: "rule × input",
    description: "A tool_result block's tool_use_id names no tool_use block of the turn",
    breaks: ["SEND-TOOL-BLOCKS"],
    onEvents(events) {
      for (const e of events) {
        const block = e.event === "content_block_start" ? e.data?.content_block : undefined;
        if (block?.type === "tool_result" && typeof block.tool_use_id === "string")
          block.tool_use_id = `${block.tool_use_id}x`;
      }
      return events;
    },
  },
  {
    name: "index-restarts-after-tool-result",
    area: "sse",
    table: "rule × input",
    description:
      "The block index restarts at 0 after each tool_result block (per model message, not per turn)",
    breaks: ["SSE-INDEX-RUNNING"],
    onEvents(events) {
      const { before, blocks, after } = blockGroups(events);
      if (!blocks.some((g) => blockType(g) === "tool_result")) return;
      let next = 0;
      for (const group of blocks) {
        for (const e of group) e.data.index = next;
        next = blockType(group) === "tool_result" ? 0 : next + 1;
      }
      return [...before, ...blocks.flat(), ...after];
    },
  },
  {
    name: "usage-cost-negative",
    area: "meaning",
    table: "field × route",
    description: "message_delta.usage.total_cost_usd is negative",
    breaks: ["SSE-EVENT-SCHEMA", "MEANING-USAGE-COUNTS"],
    onEvents(events) {
      for (const e of events) {
        const usage = e.event === "message_delta" ? e.data?.usage : undefined;
        if (usage && typeof usage.total_cost_usd === "number")
          usage.total_cost_usd = -Math.abs(usage.total_cost_usd) - 0.001;
      }
      return events;
    },
  },
  {
    name: "usage-tokens-negative",
    area: "meaning",
    table: "field × route",
    description: "message_delta.usage counts cache tokens as -1 (unknown written as a negative count)",
    breaks: ["SSE-EVENT-SCHEMA", "MEANING-USAGE-COUNTS"],
    onEvents(events) {
      for (const e of events) {
        const usage = e.event === "message_delta" ? e.data?.usage : undefined;
        if (usage) {
          usage.cache_read_input_tokens = -1;
          usage.cache_creation_input_tokens = -1;
        }
      }
      return events;
    },
  },
  {
    name: "keep-alive-bare-line",
    area: "sse",
    table: "rule × input",
    description: 'A keep-alive written as a bare line "ping" (no colon, no event) between frames',
    breaks: ["SSE-FRAME-LINES"],
    knownGap:
      "legal framing since issue 29 item 5: the SSE standard reads a line with no colon as a field of that name with an empty value, which clients skip; the suite now reports it as INFO (SSE-NO-PING), never a MUST failure",
    onSseText(text) {
      const cut = text.indexOf("\n\n");
      return cut < 0 ? text : `${text.slice(0, cut + 2)}ping\n\n${text.slice(cut + 2)}`;
    },
  },
  {
    name: "stop-reason-empty",
    area: "sse",
    table: "rule × input",
    description: "message_delta.delta.stop_reason is an empty string",
    breaks: ["SSE-MESSAGE-DELTA", "SSE-STOP-REASON"],
    onEvents(events) {
      for (const e of events)
        if (e.event === "message_delta" && e.data?.delta && typeof e.data.delta.stop_reason === "string")
          e.data.delta.stop_reason = "";
      return events;
    },
  },
  {
    name: "message-delta-before-last-block-stop",
    area: "sse",
    table: "rule × input",
    description:
      "message_delta comes before the last content_block_stop (the turn's end announced mid-block)",
    breaks: ["SSE-BLOCK-TRIPLE"],
    onEvents(events) {
      const delta = events.findIndex((e) => e.event === "message_delta");
      const lastStop = events.map((e) => e.event).lastIndexOf("content_block_stop");
      if (delta < 0 || lastStop < 0 || lastStop > delta) return;
      const [moved] = events.splice(delta, 1);
      events.splice(lastStop, 0, moved);
      return events;
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// A second round, after the first was closed: other callers' views, more input shapes, evident meanings.

/** Whether `key` is a Viewer, probed once per key (delivery "async": 403 for a Viewer, 501 for anyone else). */
async function isViewer(call: ProxyCall, tools: ProxyTools): Promise<boolean> {
  const probed: Map<string, boolean> = tools.state.get("viewer") ?? new Map();
  tools.state.set("viewer", probed);
  const key = call.key;
  if (!key || !call.route.agent) return false;
  if (!probed.has(key)) {
    const path = `/api/agents/${encodeURIComponent(call.route.agent)}/v1/messages`;
    const body = { messages: [{ role: "user", content: "probe" }], metadata: { delivery: "async" } };
    const probe = await tools.forward(ProxyCall.make("POST", path, key, body));
    probed.set(key, probe.status === 403);
  }
  return probed.get(key) === true;
}

const secondRows: Mutation[] = [
  {
    name: "member-noop-share-accepted",
    area: "status",
    table: "rule × input",
    description:
      "A member's share toggle that would change nothing ({shared: true} on a shared conversation) answers 200 (owner only)",
    breaks: ["AUTH-OWNER-ONLY-SHARE"],
    async onRequest(call, tools) {
      if (call.route.kind !== "conversation" || call.method !== "POST" || !call.route.id) return;
      const owner = tools.ledger.conversations.get(call.route.id)?.owner;
      const sent = call.json()?.shared;
      if (!owner || owner === call.key || typeof sent !== "boolean") return;
      const now = jsonOf(await tools.forward(ProxyCall.make("GET", call.path, owner)))?.conversation?.shared;
      if (now === sent) return jsonResponse(200, { shared: now });
    },
  },
  {
    name: "member-delete-answers-204",
    area: "status",
    table: "rule × input",
    description:
      "A member's delete of another member's shared conversation answers 204 (and deletes nothing)",
    breaks: ["AUTH-OWNER-ONLY-DELETE"],
    onRequest(call, tools) {
      if (call.route.kind !== "conversation" || call.method !== "DELETE" || !call.route.id) return;
      const owner = tools.ledger.conversations.get(call.route.id)?.owner;
      if (owner && owner !== call.key && call.key) return { status: 204, headers: {}, body: Buffer.alloc(0) };
    },
  },
  {
    name: "fork-at-turn-zero-copies-all",
    area: "state",
    table: "rule × input",
    sample: true,
    description: "Fork at_turn 0 copies every turn (0 read as absent)",
    breaks: ["FORK-AT-TURN-CUTS"],
    onRequest(call) {
      if (call.route.kind !== "fork" || call.method !== "POST") return;
      const body = call.json();
      if (body?.at_turn !== 0) return;
      delete body.at_turn;
      call.setJson(body);
    },
  },
  {
    name: "since-microseconds-ignored",
    area: "consistency",
    table: "rule × input",
    description:
      "since with six fraction digits (as Python's isoformat writes it) is ignored: the list unfiltered",
    breaks: ["CONSIST-SINCE-FORMS"],
    onRequest(call) {
      if (call.route.kind !== "list") return;
      const url = call.url;
      const since = url.searchParams.get("since");
      if (since === null || !/\.\d{4,}/.test(since)) return;
      url.searchParams.delete("since");
      call.path = url.pathname + url.search;
    },
  },
  {
    name: "channel-filter-dropped-with-limit",
    area: "shapes",
    table: "rule × input",
    description: "channel is ignored when limit is also given (the filters combine)",
    breaks: ["LIST-CHANNEL-FILTER"],
    onRequest(call) {
      if (call.route.kind !== "list") return;
      const url = call.url;
      if (!url.searchParams.has("channel") || !url.searchParams.has("limit")) return;
      url.searchParams.delete("channel");
      call.path = url.pathname + url.search;
    },
  },
  {
    name: "title-empty-for-block-content",
    area: "consistency",
    table: "rule × input",
    description:
      "A conversation whose first prompt was sent as text blocks gets an empty title (only string content is read for it)",
    breaks: ["GET-TITLE-FROM-PROMPT"],
    onResponse(call, res, tools) {
      const turned: Set<string> = tools.state.get("turned") ?? new Set();
      const blocky: Set<string> = tools.state.get("blocky") ?? new Set();
      tools.state.set("turned", turned);
      tools.state.set("blocky", blocky);
      if (isSendPost(call) && isEventStream(res)) {
        const body = call.json();
        const id = res.headers["x-conversation-id"] ?? body?.metadata?.conversation_id;
        if (typeof id !== "string" || turned.has(id)) return;
        turned.add(id);
        const messages = Array.isArray(body?.messages) ? body.messages : [];
        const last = [...messages].reverse().find((m: Json) => m?.role === "user");
        if (Array.isArray(last?.content)) blocky.add(id);
        return;
      }
      return everyConversation(call, res, (c) => {
        if (blocky.has(c.id)) c.title = "";
      });
    },
  },
  {
    name: "stream-false-without-conversation-header",
    area: "headers",
    table: "rule × input",
    description: "A send with stream: false answers its event stream without X-Conversation-Id",
    breaks: ["SEND-STREAM-FALSE"],
    onResponse(call, res) {
      if (!isSendPost(call) || !isEventStream(res) || call.json()?.stream !== false) return;
      const headers = { ...res.headers };
      delete headers["x-conversation-id"];
      return { ...res, headers };
    },
  },
  {
    name: "models-order-per-key",
    area: "consistency",
    table: "field × route",
    description:
      "The models list puts the agent's default first for the first key that asks only; other keys get another order",
    breaks: ["CONSIST-MODELS-EVERY-KEY"],
    onResponse(call, res, tools) {
      if (call.route.kind !== "models" || res.status !== 200 || !call.key) return;
      const first = tools.state.get("first") ?? call.key;
      tools.state.set("first", first);
      const body = jsonOf(res);
      if (first === call.key || !Array.isArray(body?.data) || body.data.length < 2) return;
      body.data.reverse();
      return withJson(res, body);
    },
  },
  {
    name: "author-user-id-constant",
    area: "meaning",
    table: "field × route",
    description: "Every user message's author_user_id and author_name are the same, whoever sent it",
    breaks: ["MEANING-TRANSCRIPT-AUTHOR"],
    onResponse(call, res) {
      if (call.route.kind !== "transcript" || res.status !== 200) return;
      const body = jsonOf(res);
      if (!Array.isArray(body?.messages)) return;
      for (const m of body.messages)
        if (m?.role === "user" && "author_user_id" in m) {
          m.author_user_id = "user-0";
          m.author_name = "Workspace";
        }
      return withJson(res, body);
    },
  },
  {
    name: "prompt-flagged-as-compaction",
    area: "meaning",
    table: "field × route",
    description:
      "The first user message of every transcript is flagged is_compact_summary (a client hides the caller's own prompt)",
    breaks: ["CONSIST-CONTENT-JOIN", "MEANING-TRANSCRIPT-ORDER"],
    onResponse(call, res) {
      if (call.route.kind !== "transcript" || res.status !== 200) return;
      const body = jsonOf(res);
      const first = Array.isArray(body?.messages)
        ? body.messages.find((m: Json) => m?.role === "user")
        : undefined;
      if (!first) return;
      first.is_compact_summary = true;
      return withJson(res, body);
    },
  },
  {
    name: "deleted-still-visible-to-member",
    area: "consistency",
    table: "field × route",
    description:
      "A deleted shared conversation is gone for its owner but a member who read it still gets it from the single fetch",
    breaks: ["CONSIST-DELETED-EVERYWHERE"],
    onResponse(call, res, tools) {
      const cached: Map<string, ProxyResponse> = tools.state.get("cached") ?? new Map();
      const deleted: Set<string> = tools.state.get("deleted") ?? new Set();
      tools.state.set("cached", cached);
      tools.state.set("deleted", deleted);
      const id = call.route.id;
      if (call.route.kind !== "conversation" || !id) return;
      const owner = tools.ledger.conversations.get(id)?.owner;
      if (call.method === "DELETE" && res.status === 204) deleted.add(id);
      if (call.method !== "GET" || !owner || owner === call.key) return;
      if (res.status === 200) cached.set(`${id}\n${call.key}`, res);
      if (res.status === 404 && deleted.has(id)) return cached.get(`${id}\n${call.key}`);
    },
  },
  {
    name: "unshare-leaves-member-list",
    area: "consistency",
    table: "field × route",
    description:
      "A conversation shared once stays in members' lists after it is made private again (the single fetch says 404)",
    breaks: ["STATE-SHARE-FALSE"],
    async onResponse(call, res, tools) {
      const once: Map<string, string> = tools.state.get("once") ?? new Map();
      tools.state.set("once", once);
      const id = call.route.id;
      if (call.route.kind === "conversation" && call.method === "POST" && id && res.status < 300) {
        if (call.json()?.shared === true && call.key) once.set(id, call.key);
        return;
      }
      if (call.route.kind !== "list" || res.status !== 200 || !call.route.agent) return;
      const body = jsonOf(res);
      if (!Array.isArray(body?.conversations)) return;
      const listed = new Set(body.conversations.map((c: Json) => c?.id));
      for (const [sharedId, owner] of once) {
        if (owner === call.key || listed.has(sharedId)) continue;
        const got = jsonOf(
          await tools.forward(ProxyCall.make("GET", conversationPath(call.route.agent, sharedId), owner)),
        )?.conversation;
        if (got) body.conversations.push({ ...got, is_owner: false });
      }
      return withJson(res, body);
    },
  },
  {
    name: "viewer-list-leaves-out-shared",
    area: "status",
    table: "rule × input",
    description:
      "A Viewer key's list leaves out conversations shared with the workspace (the Viewer reads them only by id)",
    breaks: ["AUTH-VIEWER-READS"],
    async onResponse(call, res, tools) {
      if (call.route.kind !== "list" || res.status !== 200 || !(await isViewer(call, tools))) return;
      const body = jsonOf(res);
      if (!Array.isArray(body?.conversations)) return;
      body.conversations = body.conversations.filter((c: Json) => c?.is_owner === true);
      return withJson(res, body);
    },
  },
  {
    name: "fork-child-created-at-parent",
    area: "meaning",
    table: "field × route",
    description: "A fork's child carries its parent's created_at (not the time it was created)",
    breaks: ["CONSIST-FORK-READBACK"],
    onResponse(call, res, tools) {
      const created: Map<string, string> = tools.state.get("created") ?? new Map();
      const parents: Map<string, string> = tools.state.get("parents") ?? new Map();
      tools.state.set("created", created);
      tools.state.set("parents", parents);
      if (call.route.kind === "fork" && res.status === 200 && call.route.id) {
        const child = jsonOf(res)?.conversation_id;
        if (typeof child === "string") parents.set(child, call.route.id);
        return;
      }
      return everyConversation(call, res, (c) => {
        const parent = parents.get(c.id);
        if (parent === undefined) {
          if (typeof c.created_at === "string") created.set(c.id, c.created_at);
          return;
        }
        const at = created.get(parent);
        if (at) c.created_at = at;
      });
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// A third round: the routed send's traces in the stored state, reads other than the fetch, edge values.

/** The user prompt texts of the routed sends seen (to find their messages in a transcript). */
function routedPrompt(call: ProxyCall): string | undefined {
  const messages = call.json()?.messages;
  const last = Array.isArray(messages)
    ? [...messages].reverse().find((m: Json) => m?.role === "user")
    : undefined;
  return typeof last?.content === "string" ? last.content : undefined;
}

const thirdRows: Mutation[] = [
  {
    name: "member-compaction-404",
    area: "status",
    table: "field × route",
    description:
      "Last compaction of a conversation shared with the workspace answers 404 to everyone but the owner (the fetch and transcript let them read)",
    breaks: ["CONSIST-SHARED-MEMBER-VIEW"],
    onResponse(call, res, tools) {
      if (call.route.kind !== "compaction" || res.status !== 200 || !call.route.id) return;
      const owner = tools.ledger.conversations.get(call.route.id)?.owner;
      if (owner && owner !== call.key) return errorResponse(404, "not_found_error", "Conversation not found");
    },
  },
  {
    name: "routed-turn-leaves-updated-at",
    area: "consistency",
    table: "field × route",
    description: "A turn through the model-routed send does not move the conversation's updated_at",
    breaks: ["CONSIST-ROUTED-SAME-RULES"],
    async onRequest(call, tools) {
      const frozen: Map<string, string> = tools.state.get("frozen") ?? new Map();
      tools.state.set("frozen", frozen);
      const id = call.json()?.metadata?.conversation_id;
      if (!isSendPost(call) || typeof id !== "string") return;
      if (call.route.kind !== "routed") {
        frozen.delete(id);
        return;
      }
      const known = tools.ledger.conversations.get(id);
      if (!known) return;
      const before = jsonOf(
        await tools.forward(ProxyCall.make("GET", conversationPath(known.agent, id), known.owner)),
      )?.conversation?.updated_at;
      if (typeof before === "string") frozen.set(id, before);
    },
    onResponse(call, res, tools) {
      const frozen: Map<string, string> | undefined = tools.state.get("frozen");
      if (!frozen || frozen.size === 0) return;
      return everyConversation(call, res, (c) => {
        const at = frozen.get(c.id);
        if (at) c.updated_at = at;
      });
    },
  },
  {
    name: "routed-turns-missing-from-transcript",
    area: "consistency",
    table: "field × route",
    description:
      "Turns run through the model-routed send are not stored in the transcript (turn_count still counts them)",
    breaks: ["CONSIST-ROUTED-SAME-RULES"],
    onResponse(call, res, tools) {
      const prompts: Set<string> = tools.state.get("prompts") ?? new Set();
      tools.state.set("prompts", prompts);
      if (call.route.kind === "routed" && isEventStream(res)) {
        const text = routedPrompt(call);
        const id = res.headers["x-conversation-id"] ?? call.json()?.metadata?.conversation_id;
        if (text && typeof id === "string") prompts.add(`${id}\n${text}`);
        return;
      }
      if (call.route.kind !== "transcript" || res.status !== 200 || prompts.size === 0) return;
      const body = jsonOf(res);
      if (!Array.isArray(body?.messages)) return;
      const kept: Json[] = [];
      let dropping = false;
      for (const m of body.messages) {
        if (m?.role === "user") {
          const text = (Array.isArray(m.content) ? m.content : [])
            .map((b: Json) => b?.text ?? "")
            .join("\n\n");
          dropping = prompts.has(`${call.route.id}\n${text}`);
        }
        if (!dropping) kept.push(m);
      }
      body.messages = kept;
      return withJson(res, body);
    },
  },
  {
    name: "index-skips-after-thinking",
    area: "sse",
    table: "rule × input",
    description:
      "The block index skips a number after a thinking block (0, 2, 3: the signature counted as a block)",
    breaks: ["SSE-INDEX-RUNNING"],
    onEvents(events) {
      const { before, blocks, after } = blockGroups(events);
      const thinking = blocks.findIndex((g) => blockType(g) === "thinking");
      if (thinking < 0) return;
      blocks.forEach((group, index) => {
        for (const e of group) e.data.index = index > thinking ? index + 1 : index;
      });
      return [...before, ...blocks.flat(), ...after];
    },
  },
  {
    name: "list-limit-one-gives-two",
    area: "shapes",
    table: "rule × input",
    description: "limit 1 returns two conversations (an off-by-one at the range's low edge)",
    breaks: ["LIMIT-LIST-RANGE"],
    onRequest(call) {
      if (call.route.kind !== "list") return;
      const url = call.url;
      if (url.searchParams.get("limit") !== "1") return;
      url.searchParams.set("limit", "2");
      call.path = url.pathname + url.search;
    },
  },
  {
    name: "list-limit-capped-at-default",
    area: "shapes",
    table: "rule × input",
    description: "A limit above 50 is capped at 50 (the default taken for the maximum of 200)",
    breaks: ["LIST-SHAPE-ORDER", "LIMIT-LIST-OUT-OF-RANGE", "CONSIST-ROUTES-AGREE"],
    onRequest(call) {
      if (call.route.kind !== "list") return;
      const url = call.url;
      const limit = Number(url.searchParams.get("limit"));
      if (!(limit > 50)) return;
      url.searchParams.set("limit", "50");
      call.path = url.pathname + url.search;
    },
  },
];

export const outsideMutations: Mutation[] = [
  ...routedRows,
  ...inputRows,
  ...answerRows,
  ...streamRows,
  ...secondRows,
  ...thirdRows,
];
