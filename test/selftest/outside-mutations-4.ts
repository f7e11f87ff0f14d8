/**
 * Outside round 4: breakages written from the API's text alone, by someone who had not read the checks
 * (nor the earlier rounds' rows), each a fault a real deployment could have. They aim at what a suite that
 * exercises each rule under one combination misses: a rule broken under one agent kind, key, route, turn
 * depth or input shape only; a field whose type is right and whose value is wrong; state that goes wrong
 * across time; headers.
 *
 * No row names a check: `breaks` stays empty and `outsideRound` is set, so the harness judges each row as
 * `agent-api check` judges a deployment (caught = any MUST failure other than the two stream-timing checks
 * every held stream fails; see harness.ts). `npm run mutation-score` runs them all, `npm test` the `sample`.
 *
 * The deployment these rows simulate knows its own agents and keys, so a fault "on the storage-backed agent
 * only" or "for a member's key" names the demo's storage agent or reads the proxy's ledger of owners.
 */
import { everyConversation } from "./conversation-rewrites.ts";
import {
  attachmentsOf,
  callerIsNotOwner,
  conversationPath,
  editSend,
  forwardAs,
  is2xx,
  isSendPost,
  listQuery,
  newestUser,
  promptText,
  sendAgent,
  sendBody,
  setQuery,
} from "./outside-helpers.ts";
import {
  errorResponse,
  isEventStream,
  type Json,
  jsonOf,
  jsonResponse,
  type Mutation,
  ProxyCall,
  type ProxyResponse,
  type ProxyTools,
  type SseEvent,
  withJson,
} from "./proxy-calls.ts";

/** The demo workspace's names, as the simulated deployment knows them. */
const DEMO = {
  defaultAgent: "demo-agent",
  storageAgent: "notes-agent",
  repoAgent: "acme-widgets",
  automations: ["nightly-summary"],
} as const;

/*
 * Rows the whole suite let pass when they were measured (before the suite's change for issue 29) carried a
 * knownGap marker; the suite's authors cleared each one when a change of theirs caught the row (the markers
 * left say why a row is still not a MUST failure of the named checks).
 */

/** A send that resumes a conversation this proxy already saw (turn depth 2 or more). */
function resumesKnown(call: ProxyCall, tools: ProxyTools): boolean {
  const id = sendBody(call)?.metadata?.conversation_id;
  return typeof id === "string" && tools.ledger.conversations.has(id);
}

/** `2026-11-28T01:02:03.456Z` shifted to the same instant written with a `+02:00` offset. */
function withOffset(iso: string): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  return `${new Date(t + 2 * 3600_000).toISOString().slice(0, 23)}+02:00`;
}

const withoutMillis = (iso: string) => (typeof iso === "string" ? iso.replace(/\.\d+Z$/, "Z") : iso);
const withMicros = (iso: string) => (typeof iso === "string" ? iso.replace(/\.(\d{3})Z$/, ".$1417Z") : iso);

/** Rewrites every conversation object of the answers of the routes named (all three when omitted). */
function conversationsOn(
  routes: string[] | undefined,
  edit: (c: Json, call: ProxyCall, tools: ProxyTools) => void,
) {
  return (call: ProxyCall, res: ProxyResponse, tools: ProxyTools) => {
    if (routes && !routes.includes(call.route.kind)) return undefined;
    return everyConversation(call, res, (c) => edit(c, call, tools));
  };
}

/** The blocks' events of a stream, by index. */
function textOfStream(events: SseEvent[]): string {
  return events
    .filter((e) => e.event === "content_block_delta" && e.data?.delta?.type === "text_delta")
    .map((e) => String(e.data.delta.text ?? ""))
    .join("");
}

const inputMutations: Mutation[] = [
  {
    name: "text-blocks-first-only",
    area: "send",
    description:
      "`content` as an array of text blocks is joined with blank lines: a deployment that reads only the first block of the array",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => Array.isArray(newestUser(b)?.content) && newestUser(b).content.length >= 2,
        (b) => {
          const user = newestUser(b);
          user.content = user.content.slice(0, 1);
        },
      ),
  },
  {
    name: "text-blocks-joined-without-blank-line",
    area: "send",
    description:
      "Text blocks are joined with blank lines: a deployment that joins them with a single line break",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => Array.isArray(newestUser(b)?.content) && newestUser(b).content.length >= 2,
        (b) => {
          const user = newestUser(b);
          user.content = user.content
            .filter((x: Json) => x?.type === "text")
            .map((x: Json) => x.text)
            .join("\n");
        },
      ),
  },
  {
    name: "oldest-user-message-used",
    area: "send",
    description:
      "Only the newest element with role user is used: with several user messages, a deployment that reads the first",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => Array.isArray(b.messages) && b.messages.filter((m: Json) => m?.role === "user").length >= 2,
        (b) => {
          const first = b.messages.find((m: Json) => m?.role === "user");
          newestUser(b).content = first.content;
        },
      ),
  },
  {
    name: "trailing-assistant-message-read",
    area: "send",
    description:
      "Only the newest user element is used: a deployment that reads the last element whatever its role (an assistant prefill)",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) =>
          Array.isArray(b.messages) && b.messages.at(-1)?.role === "assistant" && newestUser(b) !== undefined,
        (b) => {
          const text = promptText(b.messages.at(-1));
          if (text) newestUser(b).content = text;
        },
      ),
  },
  {
    name: "non-text-blocks-read",
    area: "send",
    description: "Non-text blocks are not read: a deployment that turns them into text of the prompt",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) =>
          Array.isArray(newestUser(b)?.content) &&
          newestUser(b).content.some((x: Json) => x?.type !== "text"),
        (b) => {
          const user = newestUser(b);
          user.content = user.content.map((x: Json) =>
            x?.type === "text" ? x : { type: "text", text: JSON.stringify(x).slice(0, 200) },
          );
        },
      ),
  },
  {
    name: "empty-messages-runs-a-turn",
    area: "status",
    description: "`messages` must be non-empty: a deployment that runs a turn on an empty array (a greeting)",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => Array.isArray(b.messages) && b.messages.length === 0,
        (b) => {
          b.messages = [{ role: "user", content: "hello" }];
        },
      ),
  },
  {
    name: "ignored-field-tools-refused",
    area: "status",
    description:
      "`tools`, `tool_choice` and the other messages-API fields are accepted and ignored: a deployment that refuses `tools` with 400",
    breaks: [],
    onRequest: (call) => {
      const body = sendBody(call);
      if (body && ("tools" in body || "tool_choice" in body))
        return errorResponse(400, "invalid_request_error", "client-side tools are not supported");
    },
  },
  {
    name: "explicit-sync-delivery-refused",
    area: "status",
    description:
      'Only `delivery: "sync"` is supported: a deployment that answers 501 when it is sent explicitly',
    breaks: [],
    onRequest: (call) => {
      if (sendBody(call)?.metadata?.delivery === "sync")
        return errorResponse(501, "not_implemented", "delivery mode is not supported");
    },
  },
  {
    name: "unknown-automation-404",
    area: "status",
    description: "An unknown `automation` name is ignored: a deployment that answers 404 for it",
    breaks: [],
    onRequest: (call) => {
      const name = sendBody(call)?.metadata?.automation;
      if (typeof name === "string" && !(DEMO.automations as readonly string[]).includes(name))
        return errorResponse(404, "not_found_error", "Automation not found");
    },
  },
  {
    name: "empty-attachments-refused",
    area: "status",
    description: "`attachments` defaults to `[]`: a deployment that refuses an explicit empty array with 400",
    breaks: [],
    onRequest: (call) => {
      const list = attachmentsOf(sendBody(call));
      if (list && list.length === 0)
        return errorResponse(400, "invalid_request_error", "attachments must not be empty");
    },
  },
  {
    name: "malformed-attachment-refuses-turn",
    area: "status",
    description:
      "Malformed attachment entries are dropped silently: a deployment that refuses the whole turn with 400",
    breaks: [],
    onRequest: (call) => {
      const list = attachmentsOf(sendBody(call));
      const bad = list?.some(
        (a: Json) =>
          a === null ||
          typeof a !== "object" ||
          typeof a.name !== "string" ||
          typeof a.dataBase64 !== "string" ||
          typeof a.mediaType !== "string",
      );
      if (bad) return errorResponse(400, "invalid_request_error", "malformed attachment");
    },
  },
  {
    name: "attachment-duplicate-name-overwrites",
    area: "silent",
    description:
      "Attachment names are de-duplicated: a deployment where a later file of the same name overwrites the earlier",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => {
          const names = (attachmentsOf(b) ?? []).map((a: Json) => a?.name);
          return new Set(names).size < names.length;
        },
        (b) => {
          const list = attachmentsOf(b) ?? [];
          const last = new Map<string, Json>();
          for (const a of list) last.set(String(a?.name), a);
          b.metadata.attachments = list.filter((a: Json) => last.get(String(a?.name)) === a);
        },
      ),
  },
  {
    name: "attachment-cap-drops-the-tenth",
    area: "silent",
    description:
      "At most 10 files: anything past the cap is dropped; a deployment that drops the tenth file and keeps the eleventh",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => (attachmentsOf(b)?.length ?? 0) > 10,
        (b) => {
          b.metadata.attachments.splice(9, 1);
        },
      ),
  },
  {
    name: "storage-agent-drops-attachments",
    area: "silent",
    description:
      "Each attachment is written to `.uploads/<name>`: a deployment whose storage-backed agents receive none",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => sendAgent(call) === DEMO.storageAgent && attachmentsOf(b) !== undefined,
        (b) => {
          delete b.metadata.attachments;
        },
      ),
  },
  {
    name: "routed-send-drops-attachments",
    area: "send",
    description:
      "The model-routed send has the same body and behaviour: a deployment that drops its attachments",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => call.route.kind === "routed" && attachmentsOf(b) !== undefined,
        (b) => {
          delete b.metadata.attachments;
        },
      ),
  },
  {
    name: "storage-agent-ignores-isolated",
    area: "send",
    description:
      "`isolated: true` runs in a throwaway sandbox: a deployment that ignores it for storage-backed agents",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => sendAgent(call) === DEMO.storageAgent && b.metadata?.isolated === true,
        (b) => {
          delete b.metadata.isolated;
        },
      ),
  },
  {
    name: "long-conversation-id-truncated",
    area: "state",
    description:
      "An unknown `conversation_id` is used verbatim, any string: a deployment that stores the first 64 characters",
    breaks: [],
    onRequest: (call) => {
      const body = call.json();
      if (isSendPost(call)) {
        const id = body?.metadata?.conversation_id;
        if (typeof id === "string" && id.length > 64) {
          body.metadata.conversation_id = id.slice(0, 64);
          call.setJson(body);
        }
      } else if (
        call.route.kind === "fork" &&
        typeof body?.conversation_id === "string" &&
        body.conversation_id.length > 64
      ) {
        body.conversation_id = body.conversation_id.slice(0, 64);
        call.setJson(body);
      } else if (call.route.id !== undefined && call.route.id.length > 64 && call.route.agent) {
        const rest = call.path.split("?")[0].split("/").slice(6).join("/");
        call.path = `${conversationPath(call.route.agent, call.route.id.slice(0, 64))}${rest ? `/${rest}` : ""}`;
      }
      return undefined;
    },
  },
];

const routeMutations: Mutation[] = [
  {
    name: "routed-bare-name-goes-to-default-agent",
    area: "send",
    description:
      "The model-routed send selects the agent by a routing string or a bare agent name: a deployment that sends a bare name to its default agent",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => call.route.kind === "routed" && typeof b.model === "string" && !b.model.includes("--"),
        (b) => {
          b.model = DEMO.defaultAgent;
        },
      ),
  },
  {
    name: "routed-send-omits-conversation-header",
    area: "headers",
    description:
      "A new conversation's generated id is returned in `X-Conversation-Id`: a deployment whose model-routed send leaves the header out",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "routed" || !isEventStream(res)) return undefined;
      if (sendBody(call)?.metadata?.conversation_id !== undefined) return undefined;
      const headers = { ...res.headers };
      delete headers["x-conversation-id"];
      return { ...res, headers };
    },
  },
  {
    name: "resumed-turn-header-new-id",
    area: "headers",
    description:
      "`X-Conversation-Id` names the conversation of the turn: a deployment that puts a fresh id in it on a resumed turn",
    breaks: [],
    sample: true,
    onResponse: (call, res, tools) => {
      if (!isSendPost(call) || !isEventStream(res) || !resumesKnown(call, tools)) return undefined;
      return { ...res, headers: { ...res.headers, "x-conversation-id": crypto.randomUUID() } };
    },
  },
  {
    name: "storage-agent-header-prefixed",
    area: "headers",
    description:
      "The generated id is returned in `X-Conversation-Id`: a deployment that prefixes it (`conv_`) for storage-backed agents",
    breaks: [],
    onResponse: (call, res) => {
      if (!isSendPost(call) || sendAgent(call) !== DEMO.storageAgent || !isEventStream(res)) return undefined;
      if (sendBody(call)?.metadata?.conversation_id !== undefined) return undefined;
      const id = res.headers["x-conversation-id"];
      if (!id) return undefined;
      return { ...res, headers: { ...res.headers, "x-conversation-id": `conv_${id}` } };
    },
  },
  {
    name: "models-revoked-generic-body",
    area: "status",
    description:
      "The models list has send-message's authentication: a deployment whose models route answers a revoked key with a generic 401 body",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "models" || res.status !== 401) return undefined;
      if (jsonOf(res)?.message !== "API key has been revoked") return undefined;
      return withJson(res, { message: "Unauthorized" });
    },
  },
  {
    name: "list-accepts-revoked-key",
    area: "status",
    description:
      "A revoked key gives 401: a deployment whose list route still accepts it (a stale key cache)",
    breaks: [],
    onResponse: async (call, res, tools) => {
      if (call.route.kind !== "list" || res.status !== 401) return undefined;
      if (jsonOf(res)?.message !== "API key has been revoked") return undefined;
      const key = await tools.ledger.workingKey(2_000);
      if (!key) return undefined;
      const again = call.clone();
      again.key = key;
      const answer = await tools.forward(again);
      const body = jsonOf(answer);
      if (answer.status === 200 && Array.isArray(body?.conversations)) body.conversations = [];
      return answer.status === 200 ? withJson(answer, body) : undefined;
    },
  },
  {
    name: "transcript-missing-key-404",
    area: "status",
    description: "A missing key gives 401: a deployment whose transcript route answers 404 without a key",
    breaks: [],
    onRequest: (call) => {
      if (call.route.kind === "transcript" && call.key === undefined)
        return errorResponse(404, "not_found_error", "Conversation not found");
    },
  },
  {
    name: "fork-unknown-key-403",
    area: "status",
    description: "An unrecognized key gives 401: a deployment whose fork route answers 403 for it",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "fork" || res.status !== 401 || call.key === undefined) return undefined;
      if (jsonOf(res)?.message === "API key has been revoked") return undefined;
      return withJson(
        res,
        { message: "Forbidden", error: { type: "permission_error", message: "Forbidden" } },
        403,
      );
    },
  },
  {
    name: "foreign-agent-list-empty",
    area: "status",
    description:
      "An agent in another workspace gives 404: a deployment whose list route answers it with an empty list",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "list" || res.status !== 404) return undefined;
      return withJson(res, { conversations: [] }, 200);
    },
  },
  {
    name: "foreign-agent-models-listed",
    area: "status",
    description:
      "An agent in another workspace gives 404: a deployment whose models route lists the workspace's default models for it",
    breaks: [],
    onResponse: async (call, res, tools) => {
      if (call.route.kind !== "models" || res.status !== 404) return undefined;
      return forwardAs(
        call,
        tools,
        { path: `/api/agents/${DEMO.defaultAgent}/v1/models` },
        (answer) => answer.status === 200,
      );
    },
  },
  {
    name: "fetch-through-other-agent",
    area: "status",
    description:
      "A conversation on a different agent gives 404: a deployment whose single fetch finds it through any agent's path",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const route = call.route;
      if (route.kind !== "conversation" || call.method !== "GET" || res.status !== 404 || !route.id)
        return undefined;
      const known = tools.ledger.conversations.get(route.id);
      if (!known || known.agent === route.agent) return undefined;
      return forwardAs(
        call,
        tools,
        { path: conversationPath(known.agent, route.id) },
        (answer) => answer.status === 200,
      );
    },
  },
  {
    name: "fork-across-agents",
    area: "status",
    description:
      "A conversation on a different agent gives 404: a deployment that forks it through another agent's path",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const route = call.route;
      if (route.kind !== "fork" || res.status !== 404 || !route.id) return undefined;
      const known = tools.ledger.conversations.get(route.id);
      if (!known || known.agent === route.agent) return undefined;
      return forwardAs(call, tools, { path: `${conversationPath(known.agent, route.id)}/fork` }, is2xx);
    },
  },
];

const streamMutations: Mutation[] = [
  {
    name: "routed-message-start-model-is-routing-string",
    area: "sse",
    description:
      "`message_start.message.model` is the model of the turn: a deployment whose model-routed send echoes the routing string there",
    breaks: [],
    onEvents: (events, call) => {
      if (call.route.kind !== "routed") return undefined;
      const model = sendBody(call)?.model;
      for (const e of events)
        if (e.event === "message_start" && e.data?.message) e.data.message.model = model;
      return events;
    },
  },
  {
    name: "text-block-start-carries-text-on-resume",
    area: "sse",
    description:
      "`content_block_start` carries an empty text string: a deployment that puts the whole text there on resumed turns",
    breaks: [],
    onEvents: (events, call, tools) => {
      if (!resumesKnown(call, tools)) return undefined;
      for (const e of events) {
        if (e.event !== "content_block_start" || e.data?.content_block?.type !== "text") continue;
        const delta = events.find(
          (d) =>
            d.event === "content_block_delta" &&
            d.data?.index === e.data.index &&
            d.data?.delta?.type === "text_delta",
        );
        if (delta) e.data.content_block.text = delta.data.delta.text;
      }
      return events;
    },
  },
  {
    name: "index-starts-at-one-on-resume",
    area: "sse",
    description:
      "`index` is a running counter for the turn: a deployment that starts it at 1 on resumed turns",
    breaks: [],
    onEvents: (events, call, tools) => {
      if (!resumesKnown(call, tools)) return undefined;
      for (const e of events) if (typeof e.data?.index === "number") e.data.index += 1;
      return events;
    },
  },
  {
    name: "tool-input-split-on-repo-agent",
    area: "sse",
    description:
      "Blocks arrive whole (one complete delta): a deployment that streams a repository agent's tool input in two `input_json_delta`s",
    breaks: [],
    onEvents: (events, call) => {
      if (sendAgent(call) !== DEMO.repoAgent) return undefined;
      return events.flatMap((e) => {
        const partial = e.data?.delta?.partial_json;
        if (e.event !== "content_block_delta" || e.data?.delta?.type !== "input_json_delta") return [e];
        if (typeof partial !== "string" || partial.length < 2) return [e];
        const cut = Math.floor(partial.length / 2);
        return [
          {
            event: e.event,
            data: { ...e.data, delta: { ...e.data.delta, partial_json: partial.slice(0, cut) } },
          },
          {
            event: e.event,
            data: { ...e.data, delta: { ...e.data.delta, partial_json: partial.slice(cut) } },
          },
        ];
      });
    },
  },
  {
    name: "output-tokens-zero-with-text",
    area: "meaning",
    description:
      "`message_delta.usage` counts the turn: a deployment that reports 0 output tokens for a turn that produced text",
    breaks: [],
    onEvents: (events) => {
      if (textOfStream(events).length === 0) return undefined;
      for (const e of events)
        if (e.event === "message_delta" && e.data?.usage) e.data.usage.output_tokens = 0;
      return events;
    },
  },
  {
    name: "storage-agent-stop-before-delta",
    area: "sse",
    description:
      "The stream ends at `message_stop`: a deployment whose storage-backed agents send `message_delta` after it",
    breaks: [],
    onEvents: (events, call) => {
      if (sendAgent(call) !== DEMO.storageAgent) return undefined;
      const d = events.findIndex((e) => e.event === "message_delta");
      const s = events.findIndex((e) => e.event === "message_stop");
      if (d < 0 || s < 0 || d > s) return undefined;
      const out = events.slice();
      [out[d], out[s]] = [out[s], out[d]];
      return out;
    },
  },
];

/** Conversation ids whose first prompt came as text blocks, learned from the send's answer. */
function rememberCreated(
  call: ProxyCall,
  res: ProxyResponse,
  tools: ProxyTools,
  key: string,
  when: (body: Json) => boolean,
) {
  const body = sendBody(call);
  if (!body || !isEventStream(res) || !when(body)) return;
  const id = res.headers["x-conversation-id"];
  const known: Set<string> = tools.state.get(key) ?? new Set();
  tools.state.set(key, known);
  if (id && body.metadata?.conversation_id === undefined) known.add(id);
  else if (id && !tools.ledger.conversations.has(id)) known.add(id);
}

const valueMutations: Mutation[] = [
  {
    name: "updated-at-stuck-at-creation",
    area: "consistency",
    description:
      "`updated_at` moves with the conversation's activity: a deployment that keeps it at `created_at`",
    breaks: [],
    sample: true,
    onResponse: conversationsOn(undefined, (c) => {
      c.updated_at = c.created_at;
    }),
  },
  {
    name: "resumed-updated-at-without-ms",
    area: "shapes",
    description:
      "Timestamps carry milliseconds: a deployment whose resumed turns write `updated_at` to the second",
    breaks: [],
    onResponse: conversationsOn(undefined, (c) => {
      if (typeof c.turn_count === "number" && c.turn_count >= 2) c.updated_at = withoutMillis(c.updated_at);
    }),
  },
  {
    name: "fetch-timestamps-with-offset",
    area: "shapes",
    description:
      "Timestamps are in UTC: a deployment whose single fetch writes the same instant with a +02:00 offset",
    breaks: [],
    onResponse: conversationsOn(["conversation"], (c) => {
      c.created_at = withOffset(c.created_at);
      c.updated_at = withOffset(c.updated_at);
    }),
  },
  {
    name: "transcript-timestamps-microseconds",
    area: "shapes",
    description:
      "Timestamps carry milliseconds: a deployment whose transcript's conversation carries microseconds",
    breaks: [],
    onResponse: conversationsOn(["transcript"], (c) => {
      c.created_at = withMicros(c.created_at);
      c.updated_at = withMicros(c.updated_at);
    }),
  },
  {
    name: "turn-count-counts-messages",
    area: "consistency",
    description: "`turn_count` counts turns: a deployment that counts messages (user and assistant)",
    breaks: [],
    onResponse: conversationsOn(undefined, (c) => {
      if (typeof c.turn_count === "number") c.turn_count *= 2;
    }),
  },
  {
    name: "turn-count-lags-one",
    area: "consistency",
    description: "`turn_count` counts turns: a deployment that leaves out the latest turn once there are two",
    breaks: [],
    onResponse: conversationsOn(undefined, (c) => {
      if (typeof c.turn_count === "number" && c.turn_count >= 2) c.turn_count -= 1;
    }),
  },
  {
    name: "fork-child-turn-count-plus-one",
    area: "consistency",
    description:
      "A fork copies history up to `at_turn`: a deployment whose child's `turn_count` counts the fork as a turn",
    breaks: [],
    onResponse: conversationsOn(undefined, (c) => {
      if (c.parent_conversation_id && typeof c.turn_count === "number") c.turn_count += 1;
    }),
  },
  {
    name: "forked-at-turn-not-clamped",
    area: "consistency",
    description:
      "`at_turn` is clamped to the conversation's length: a deployment whose fork result echoes the asked turn",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "fork" || res.status < 200 || res.status >= 300) return undefined;
      const asked = call.json()?.at_turn;
      const body = jsonOf(res);
      if (typeof asked !== "number" || !body || typeof body.forked_at_turn !== "number") return undefined;
      if (asked <= body.forked_at_turn) return undefined;
      body.forked_at_turn = asked;
      return withJson(res, body);
    },
  },
  {
    name: "forked-at-index-zero-based",
    area: "consistency",
    description:
      "`forked_at_turn_index` records the fork's turn: a deployment that stores it zero-based, one below the fork result's `forked_at_turn`",
    breaks: [],
    onResponse: conversationsOn(undefined, (c) => {
      if (typeof c.forked_at_turn_index === "number" && c.forked_at_turn_index > 0)
        c.forked_at_turn_index -= 1;
    }),
  },
  {
    name: "title-empty-for-block-prompt",
    area: "consistency",
    description:
      "`title` is derived from the first prompt: a deployment that leaves it empty when that prompt came as text blocks",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (isSendPost(call)) {
        rememberCreated(call, res, tools, "block-titled", (b) => Array.isArray(newestUser(b)?.content));
        return undefined;
      }
      const ids: Set<string> = tools.state.get("block-titled") ?? new Set();
      return everyConversation(call, res, (c) => {
        if (ids.has(c.id)) c.title = "";
      });
    },
  },
  {
    name: "created-at-moves-on-resume",
    area: "state",
    description:
      "`created_at` is when the conversation was created: a deployment that moves it with each resumed turn",
    breaks: [],
    onResponse: conversationsOn(undefined, (c) => {
      if (typeof c.turn_count === "number" && c.turn_count >= 2) c.created_at = c.updated_at;
    }),
  },
  {
    name: "fork-child-updated-at-from-parent",
    area: "consistency",
    description:
      "A fork child is a conversation of its own: a deployment that copies the parent's `updated_at` into it (before the child's `created_at`)",
    breaks: [],
    onResponse: async (call, res, tools) => {
      if (call.method !== "GET" || res.status !== 200) return undefined;
      const body = jsonOf(res);
      const items: Json[] = body?.conversation
        ? [body.conversation]
        : Array.isArray(body?.conversations)
          ? body.conversations
          : [];
      const agent = call.route.agent;
      if (!agent || !["conversation", "list", "transcript"].includes(call.route.kind)) return undefined;
      for (const c of items) {
        if (!c?.parent_conversation_id) continue;
        const parent = await tools.forward(
          ProxyCall.make("GET", conversationPath(agent, c.parent_conversation_id), call.key),
        );
        const at = jsonOf(parent)?.conversation?.updated_at;
        if (typeof at === "string" && c.turn_count === (c.forked_at_turn_index ?? c.turn_count))
          c.updated_at = at;
      }
      return withJson(res, body);
    },
  },
  {
    name: "fork-bumps-parent-activity",
    area: "state",
    description:
      "Forking leaves the parent unchanged: a deployment that moves the parent's `updated_at` to the fork's time",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (call.route.kind === "fork" && res.status >= 200 && res.status < 300 && call.route.id) {
        tools.state.set(`forked:${call.route.id}`, new Date().toISOString());
        return undefined;
      }
      return everyConversation(call, res, (c) => {
        const at = tools.state.get(`forked:${c.id}`);
        if (typeof at === "string" && at > c.updated_at) c.updated_at = at;
      });
    },
  },
  {
    name: "member-sees-is-owner-in-list",
    area: "consistency",
    description:
      "`is_owner` says whether the caller owns it: a deployment whose list says true for every conversation",
    breaks: [],
    onResponse: conversationsOn(["list"], (c) => {
      c.is_owner = true;
    }),
  },
  {
    name: "member-sees-null-session",
    area: "consistency",
    description:
      "`agent_session_id` is the conversation's session pointer: a deployment that shows null to a reader who is not the owner",
    breaks: [],
    onResponse: conversationsOn(undefined, (c, call, tools) => {
      if (callerIsNotOwner(call, tools, c.id)) c.agent_session_id = null;
    }),
  },
  {
    name: "list-shared-flag-stale",
    area: "state",
    description:
      "A share toggle sets `shared`: a deployment whose list keeps showing the value from before the toggle (a stale cache)",
    breaks: [],
    onRequest: async (call, tools) => {
      if (call.route.kind !== "conversation" || call.method !== "POST" || !call.route.agent || !call.route.id)
        return;
      if (typeof call.json()?.shared !== "boolean") return;
      const before = await tools.forward(
        ProxyCall.make("GET", conversationPath(call.route.agent, call.route.id), call.key),
      );
      const was = jsonOf(before)?.conversation?.shared;
      if (typeof was === "boolean" && !tools.state.has(`stale:${call.route.id}`))
        tools.state.set(`stale:${call.route.id}`, was);
      return undefined;
    },
    onResponse: conversationsOn(["list"], (c, _call, tools) => {
      const was = tools.state.get(`stale:${c.id}`);
      if (typeof was === "boolean") c.shared = was;
    }),
  },
  {
    name: "unshared-stays-in-member-list",
    area: "state",
    description:
      "Shared `false` makes a conversation private again: a deployment whose members keep seeing it in their list",
    breaks: [],
    onResponse: (call, res, tools) => {
      const route = call.route;
      const seen: Map<string, Json> = tools.state.get("shared-seen") ?? new Map();
      tools.state.set("shared-seen", seen);
      if (route.kind === "conversation" && call.method === "POST" && res.status >= 200 && res.status < 300) {
        if (call.json()?.shared === false && route.id) tools.state.set(`unshared:${route.id}`, true);
        if (call.json()?.shared === true && route.id) tools.state.delete(`unshared:${route.id}`);
        return undefined;
      }
      if (route.kind !== "list" || call.method !== "GET" || res.status !== 200) return undefined;
      const body = jsonOf(res);
      if (!Array.isArray(body?.conversations)) return undefined;
      for (const c of body.conversations) if (c?.shared === true && !c.is_owner) seen.set(c.id, { ...c });
      const present = new Set(body.conversations.map((c: Json) => c?.id));
      for (const [id, c] of seen) {
        if (
          !present.has(id) &&
          tools.state.get(`unshared:${id}`) &&
          tools.ledger.conversations.get(id)?.agent === route.agent
        )
          body.conversations.push({ ...c });
      }
      return withJson(res, body);
    },
  },
  {
    name: "fork-child-inherits-shared",
    area: "state",
    description: "A fork's child is private: a deployment whose child of a shared conversation is shared too",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const route = call.route;
      if (route.kind !== "fork" || res.status < 200 || res.status >= 300 || !route.agent || !route.id)
        return undefined;
      const parent = await tools.forward(
        ProxyCall.make("GET", conversationPath(route.agent, route.id), call.key),
      );
      const child = jsonOf(res)?.conversation_id;
      if (jsonOf(parent)?.conversation?.shared !== true || typeof child !== "string") return undefined;
      await tools.forward(
        ProxyCall.make("POST", conversationPath(route.agent, child), call.key, { shared: true }),
      );
      return undefined;
    },
  },
  {
    name: "member-fork-owned-by-parent-owner",
    area: "state",
    description:
      "A fork's child is owned by the caller: a deployment that makes a member's fork the parent owner's",
    breaks: [],
    onRequest: async (call, tools) => {
      if (call.route.kind !== "fork" || call.method !== "POST" || !callerIsNotOwner(call, tools))
        return undefined;
      const again = call.clone();
      again.key = tools.ledger.conversations.get(call.conversationId ?? "")?.owner;
      return tools.forward(again);
    },
  },
  {
    name: "member-fork-of-unshared-allowed",
    area: "status",
    description:
      "A fork needs a caller who may read the conversation: a deployment that lets a member fork another's private one",
    breaks: [],
    onResponse: async (call, res, tools) => {
      if (call.route.kind !== "fork" || res.status !== 404 || !callerIsNotOwner(call, tools))
        return undefined;
      return forwardAs(
        call,
        tools,
        { key: tools.ledger.conversations.get(call.conversationId ?? "")?.owner },
        is2xx,
      );
    },
  },
  {
    name: "member-transcript-of-unshared",
    area: "status",
    description:
      "Another user's unshared conversation gives 404: a deployment whose transcript route serves it to a member",
    breaks: [],
    sample: true,
    onResponse: async (call, res, tools) => {
      if (call.route.kind !== "transcript" || res.status !== 404 || !callerIsNotOwner(call, tools))
        return undefined;
      const again = call.clone();
      again.key = tools.ledger.conversations.get(call.conversationId ?? "")?.owner;
      const answer = await tools.forward(again);
      if (answer.status !== 200) return undefined;
      const body = jsonOf(answer);
      if (body?.conversation) body.conversation.is_owner = false;
      return withJson(answer, body);
    },
  },
  {
    name: "delete-cascades-to-forks",
    area: "state",
    description:
      "A fork's child is independent of its parent: a deployment that deletes the children when the parent is deleted",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const route = call.route;
      if (route.kind === "fork" && res.status >= 200 && res.status < 300 && route.id) {
        const child = jsonOf(res)?.conversation_id;
        const children: string[] = tools.state.get(`children:${route.id}`) ?? [];
        if (typeof child === "string") children.push(child);
        tools.state.set(`children:${route.id}`, children);
        return undefined;
      }
      if (
        route.kind !== "conversation" ||
        call.method !== "DELETE" ||
        res.status !== 204 ||
        !route.id ||
        !route.agent
      )
        return undefined;
      for (const child of tools.state.get(`children:${route.id}`) ?? []) {
        const owner = tools.ledger.conversations.get(child)?.owner;
        await tools.forward(ProxyCall.make("DELETE", conversationPath(route.agent, child), owner));
      }
      return undefined;
    },
  },
  {
    name: "second-delete-204",
    area: "status",
    description:
      "A deleted conversation is removed: a deployment that answers a second delete of it with 204 again",
    breaks: [],
    onResponse: (call, res, tools) => {
      const route = call.route;
      if (route.kind !== "conversation" || call.method !== "DELETE" || !route.id) return undefined;
      if (res.status === 204) {
        tools.state.set(`deleted:${route.id}`, true);
        return undefined;
      }
      if (res.status === 404 && tools.state.get(`deleted:${route.id}`))
        return { status: 204, headers: {}, body: Buffer.alloc(0) };
      return undefined;
    },
  },
  {
    name: "member-delete-noop-204",
    area: "status",
    description:
      "Only the owner may delete: a deployment that answers a member's delete with 204 and keeps the conversation",
    breaks: [],
    onRequest: (call, tools) => {
      if (call.route.kind !== "conversation" || call.method !== "DELETE" || !callerIsNotOwner(call, tools))
        return;
      return { status: 204, headers: {}, body: Buffer.alloc(0) };
    },
  },
  {
    name: "member-share-toggle-noop-200",
    area: "status",
    description:
      "Only the owner may toggle sharing: a deployment that answers a member's toggle with 200 and changes nothing",
    breaks: [],
    onRequest: (call, tools) => {
      if (call.route.kind !== "conversation" || call.method !== "POST" || !callerIsNotOwner(call, tools))
        return;
      return jsonResponse(200, { shared: call.json()?.shared });
    },
  },
  {
    name: "share-string-boolean-accepted",
    area: "status",
    description: 'The share body holds a boolean: a deployment that takes `{"shared": "true"}` as true',
    breaks: [],
    knownGap:
      "outside round 4: the explorer finds it (sharing.bodyExact), but the rule's check, SHARE-BODY-STRICT, is a SHOULD: the API states what a share body must be, not what a deployment answers to another one",
    onRequest: (call) => {
      if (call.route.kind !== "conversation" || call.method !== "POST") return;
      const body = call.json();
      if (body && (body.shared === "true" || body.shared === "false"))
        call.setJson({ ...body, shared: body.shared === "true" });
      return undefined;
    },
  },
];

const listMutations: Mutation[] = [
  {
    name: "list-limit-200-refused",
    area: "status",
    description: "`limit` is 1 to 200: a deployment that refuses 200 with 400 (an off-by-one bound)",
    breaks: [],
    onRequest: (call) => {
      if (listQuery(call)?.get("limit") === "200")
        return errorResponse(400, "invalid_request_error", "limit must be below 200");
    },
  },
  {
    name: "list-limit-one-ignored",
    area: "consistency",
    description: "`limit` bounds the list: a deployment that ignores `limit=1` and answers the default",
    breaks: [],
    onRequest: (call) => {
      const q = listQuery(call);
      if (q?.get("limit") !== "1") return;
      q.delete("limit");
      setQuery(call, q);
      return undefined;
    },
  },
  {
    name: "list-limit-off-by-one",
    area: "consistency",
    description:
      "`limit` bounds the list: a deployment that answers one fewer than `limit` when more are there",
    breaks: [],
    onRequest: (call) => {
      const q = listQuery(call);
      const limit = Number(q?.get("limit"));
      if (!q || !Number.isInteger(limit) || limit < 2 || limit > 200) return;
      q.set("limit", String(limit - 1));
      setQuery(call, q);
      return undefined;
    },
  },
  {
    name: "list-since-ignored-with-channel",
    area: "consistency",
    description: "The list's filters combine: a deployment that ignores `since` when `channel` is given too",
    breaks: [],
    onRequest: (call) => {
      const q = listQuery(call);
      if (!q?.has("since") || !q.has("channel")) return;
      q.delete("since");
      setQuery(call, q);
      return undefined;
    },
  },
  {
    name: "list-since-offset-read-as-utc",
    area: "consistency",
    description: "`since` is ISO 8601: a deployment that reads a `+hh:mm` offset as if the time were UTC",
    breaks: [],
    onRequest: (call) => {
      const q = listQuery(call);
      const since = q?.get("since");
      if (!q || !since || !/[+-]\d\d:?\d\d$/.test(since)) return;
      q.set("since", `${since.replace(/[+-]\d\d:?\d\d$/, "")}Z`);
      setQuery(call, q);
      return undefined;
    },
  },
  {
    name: "list-since-without-fraction-refused",
    area: "status",
    description: "`since` is ISO 8601: a deployment that refuses a time without fractional seconds with 400",
    breaks: [],
    onRequest: (call) => {
      const since = listQuery(call)?.get("since");
      if (since && /T\d\d:\d\d:\d\d(Z|[+-]\d\d:?\d\d)$/.test(since))
        return errorResponse(400, "invalid_request_error", "since must carry milliseconds");
    },
  },
  {
    name: "list-automation-ignored-with-limit",
    area: "consistency",
    description:
      "The list's filters combine: a deployment that ignores `automation` when `limit` is given too",
    breaks: [],
    onRequest: (call) => {
      const q = listQuery(call);
      if (!q?.has("automation") || !q.has("limit")) return;
      q.delete("automation");
      setQuery(call, q);
      return undefined;
    },
  },
  {
    name: "list-channel-filter-hides-shared",
    area: "consistency",
    description:
      "Visible: conversations shared with the workspace: a deployment whose `channel`-filtered list shows only the caller's own",
    breaks: [],
    onResponse: (call, res) => {
      if (!listQuery(call)?.has("channel") || res.status !== 200) return undefined;
      const body = jsonOf(res);
      if (!Array.isArray(body?.conversations)) return undefined;
      body.conversations = body.conversations.filter(
        (c: Json) => c?.is_owner !== false || c?.shared !== true,
      );
      return withJson(res, body);
    },
  },
];

export const outsideMutations4: Mutation[] = [
  ...inputMutations,
  ...routeMutations,
  ...streamMutations,
  ...valueMutations,
  ...listMutations,
].map((m) => ({ ...m, outsideRound: 4 }));
