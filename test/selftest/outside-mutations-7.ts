/**
 * Outside round 7: breakages written from the API's text alone, by someone who had not read the checks (nor
 * the model, the explorer, the sweeps or the earlier rounds' rows beyond their names), each a fault a real
 * deployment could have. Like rounds 4 to 6 they aim at what a suite that exercises each rule under one
 * combination misses: a rule broken under one agent kind (the main demo agent, the storage-backed agent with
 * files, the repository-backed agent), one key role (admin, member, Viewer, no key, unknown, revoked, another
 * workspace's, the flow key), one route (per-agent or model-routed send, bare name or routing string, each
 * conversation route through another agent's path), one turn depth or one input shape (`system`, each
 * `metadata` flag, attachments of each shape, fork bodies, list filters combined); a field of the right type
 * holding a wrong value; state going wrong across time (forks of forks, deletes while a child lives, share
 * toggles in sequence, defaults recorded for later turns); which status wins when two apply; what a stream's
 * events mean. Each row cites the API section and rule it departs from.
 *
 * No row names a check: `breaks` stays empty and `outsideRound` is set, so the harness judges each row as
 * `agent-api check` judges a deployment (harness.ts). The deployment these rows simulate knows its own
 * agents, keys, models and instructions (the demo's); who owns a conversation comes from the proxy's ledger,
 * what happened to a conversation (forks, toggles, deletes, turns) from the traffic the row has seen. A row
 * changes an answer only where its fault applies: anything else goes through untouched.
 */
import {
  DEMO_ADMIN_KEY,
  DEMO_FLOW_KEY,
  DEMO_MEMBER_KEY,
  DEMO_REVOKED_KEY,
  DEMO_VIEWER_KEY,
  OTHER_ADMIN_KEY,
} from "../../reference-server/demo/workspace.ts";
import {
  answerId,
  apiError,
  attachmentsOf,
  bag,
  conversationPath,
  DEMO,
  DEMO_AGENTS,
  editConversations,
  editJson,
  editSend,
  forkBody,
  INSTRUCTIONS,
  is2xx,
  isFresh,
  isSendPost,
  listQuery,
  newestUser,
  noteFresh,
  promptText,
  resumes,
  rewriteStream,
  sendAgent,
  sendBody,
  setQuery,
  throughAgent,
  usageOf,
} from "./outside-helpers.ts";
import {
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

/**
 * Rows the whole suite let pass, explorer off, before the suite's changes for round 7 (7791f06: 38 of the 71
 * caught) and after them (66 caught): left failing for the suite's authors, who clear the marker when a change
 * of theirs catches the row.
 */
const HELD = "outside round 7, before and after the suite's change";

/**
 * Caught only at SHOULD: the API says the share body "must be exactly one property `shared`" but shows no
 * answer for another one, so SHARE-BODY-STRICT (SHOULD) asks for a 4xx, and a body that holds a boolean
 * `shared` beside other properties is not judged as a MUST failure when a deployment applies it.
 */
const SHOULD_ONLY =
  "outside round 7: judged by SHARE-BODY-STRICT, a SHOULD check (the refusal of another body is not shown)";

/** Every key the deployment recognises (the flow key only on the flow endpoint). */
const KNOWN_KEYS: readonly string[] = [
  DEMO_ADMIN_KEY,
  DEMO_MEMBER_KEY,
  DEMO_VIEWER_KEY,
  DEMO_REVOKED_KEY,
  OTHER_ADMIN_KEY,
];

/** The agents' default models, as the deployment holds them (their instructions: outside-helpers.ts). */
const DEFAULT_MODEL: Record<string, string> = {
  "demo-agent": "demo-large",
  "notes-agent": "demo-small",
  "acme-widgets": "demo-large",
};
/** The order the agents' models were configured in (the default is not always the first configured). */
const CONFIGURED_MODELS: Record<string, string[]> = {
  "demo-agent": ["demo-small", "demo-large"],
  "notes-agent": ["demo-small"],
  "acme-widgets": ["demo-large"],
};

const MIB = 1024 * 1024;
const HOUR_MS = 3_600_000;

/** Records fork results: child → parent, and the result's `forked_at_turn`. */
function noteFork(call: ProxyCall, res: ProxyResponse, tools: ProxyTools): Json {
  if (call.route.kind !== "fork" || call.method !== "POST" || !is2xx(res)) return undefined;
  const result = jsonOf(res);
  if (typeof result?.conversation_id !== "string" || call.route.id === undefined) return undefined;
  bag<string>(tools, "parentOf").set(result.conversation_id, call.route.id);
  return result;
}

/** A share toggle the deployment accepted: records the value in the conversation's toggle history. */
function noteToggle(call: ProxyCall, res: ProxyResponse, tools: ProxyTools): boolean | undefined {
  if (call.route.kind !== "conversation" || call.method !== "POST" || !is2xx(res)) return undefined;
  const shared = call.json()?.shared;
  if (typeof shared !== "boolean" || call.route.id === undefined) return undefined;
  const history = bag<boolean[]>(tools, "toggles");
  history.set(call.route.id, [...(history.get(call.route.id) ?? []), shared]);
  return shared;
}

const isShared = (tools: ProxyTools, id: string) => bag<boolean[]>(tools, "toggles").get(id)?.at(-1) === true;

/** Text deltas of a stream, rewritten; returns whether any changed. */
function mapText(events: SseEvent[], edit: (text: string) => string): boolean {
  let changed = false;
  for (const e of events) {
    if (e.event !== "content_block_delta" || e.data?.delta?.type !== "text_delta") continue;
    const text = String(e.data.delta.text ?? "");
    const out = edit(text);
    if (out !== text) {
      e.data.delta.text = out;
      changed = true;
    }
  }
  return changed;
}

const blockStarts = (events: SseEvent[]) => events.filter((e) => e.event === "content_block_start");
const hasThinking = (events: SseEvent[]) =>
  blockStarts(events).some((e) => e.data?.content_block?.type === "thinking");

/** Sorts a list of conversations newest activity first (as the list route orders them). */
const byActivity = (a: Json, b: Json) =>
  String(b?.updated_at ?? "").localeCompare(String(a?.updated_at ?? ""));

/** The list's `limit` as the deployment reads it (default 50). */
function listLimit(call: ProxyCall): number {
  const n = Number(call.url.searchParams.get("limit") ?? 50);
  return Number.isInteger(n) && n > 0 ? n : 50;
}

/** Fetches a conversation upstream with `key` (a read: not a firing). */
async function fetchConversation(tools: ProxyTools, agent: string, id: string, key: string | undefined) {
  const res = await tools.forward(ProxyCall.make("GET", conversationPath(agent, id), key));
  return res.status === 200 ? jsonOf(res)?.conversation : undefined;
}

// ---------------------------------------------------------------------------------------------------------
// Send a message: input shapes, metadata flags, turn depth.

const sendRows: Mutation[] = [
  {
    name: "system-dropped-on-resume",
    area: "send",
    description:
      "Send a message, `system`: appended to the agent's own instructions for the turn it is sent with: a deployment that reads `system` on a conversation's first turn only and drops it on every resumed turn",
    breaks: [],
    onRequest: (call, tools) =>
      editSend(
        call,
        (b) => typeof b.system === "string" && b.system !== "" && resumes(call, tools),
        (b) => {
          delete b.system;
        },
      ),
  },
  {
    name: "storage-agent-system-replaces-instructions",
    area: "send",
    description:
      "Send a message, `system`: appended to the agent's own instructions; never replaces them: a deployment whose storage-backed agent with files loses its own instructions when a caller sends `system` (the agent repeats only the caller's text)",
    breaks: [],
    knownGap: HELD,
    onEvents: (events, call) => {
      const system = sendBody(call)?.system;
      if (sendAgent(call) !== DEMO.storageAgent || typeof system !== "string" || system.trim() === "")
        return undefined;
      const own = INSTRUCTIONS[DEMO.storageAgent];
      mapText(events, (text) =>
        text.includes(own) ? text.replace(`${own}\n\n`, "").replace(own, "") : text,
      );
      return events;
    },
  },
  {
    name: "routed-send-joins-all-user-messages",
    area: "send",
    description:
      "Model-routed send: same body and behaviour as send-message, where only the newest `user` element of `messages` is used: a deployment whose routed send joins the text of every user message into the prompt",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) =>
          call.route.kind === "routed" &&
          Array.isArray(b.messages) &&
          b.messages.filter((m: Json) => m?.role === "user" && promptText(m) !== "").length >= 2,
        (b) => {
          const all = b.messages
            .filter((m: Json) => m?.role === "user")
            .map(promptText)
            .filter((t: string) => t !== "");
          newestUser(b).content = all.join("\n\n");
        },
      ),
  },
  {
    name: "max-tokens-truncates-reply",
    area: "send",
    description:
      "Send a message: `max_tokens` is accepted and ignored: a deployment that honours a small `max_tokens` by cutting the reply's text (about four characters a token) and ending with stop reason `max_tokens`",
    breaks: [],
    onEvents: (events, call) => {
      const max = sendBody(call)?.max_tokens;
      if (typeof max !== "number" || max <= 0) return undefined;
      const cut = Math.max(1, Math.floor(max * 4));
      if (!mapText(events, (text) => (text.length > cut ? text.slice(0, cut) : text))) return undefined;
      for (const e of events)
        if (e.event === "message_delta" && e.data?.delta) e.data.delta.stop_reason = "max_tokens";
      return events;
    },
  },
  {
    name: "routed-stream-false-answers-json",
    area: "delivery",
    description:
      "Send a message, `stream`: a value of `false` still yields an event stream (model-routed send: same behaviour): a deployment whose routed send answers `stream: false` with one JSON message in the messages-API shape",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "routed" || sendBody(call)?.stream !== false || !isEventStream(res))
        return undefined;
      const events = parseSse(res.body.toString("utf8"));
      const start = events.find((e) => e.event === "message_start")?.data?.message ?? {};
      const text = events
        .filter((e) => e.event === "content_block_delta" && e.data?.delta?.type === "text_delta")
        .map((e) => String(e.data.delta.text ?? ""))
        .join("");
      const stop = events.find((e) => e.event === "message_delta")?.data?.delta?.stop_reason ?? "end_turn";
      return withJson(res, {
        id: start.id,
        type: "message",
        role: "assistant",
        model: start.model,
        content: text === "" ? [] : [{ type: "text", text }],
        stop_reason: stop,
        stop_sequence: null,
        usage: usageOf(events) ?? start.usage,
      });
    },
  },
  {
    name: "dotted-conversation-id-rewritten",
    area: "state",
    description:
      "Conversation id resolution: an unknown id is created with that id verbatim (any string): a deployment that stores an id holding dots with the dots turned into dashes (and answers that id in X-Conversation-Id)",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => typeof b.metadata?.conversation_id === "string" && b.metadata.conversation_id.includes("."),
        (b) => {
          b.metadata.conversation_id = b.metadata.conversation_id.replaceAll(".", "-");
        },
      ),
  },
  {
    name: "storage-agent-ignores-caller-conversation-id",
    area: "state",
    description:
      "Conversation id resolution: unknown id: created with that id verbatim: a deployment whose storage-backed agent with files ignores a caller-chosen new id and generates one (so the caller's id never resumes)",
    breaks: [],
    onRequest: (call, tools) =>
      editSend(
        call,
        (b) =>
          sendAgent(call) === DEMO.storageAgent &&
          typeof b.metadata?.conversation_id === "string" &&
          !tools.ledger.conversations.has(b.metadata.conversation_id),
        (b) => {
          delete b.metadata.conversation_id;
        },
      ),
  },
  {
    name: "attachment-non-text-media-dropped",
    area: "silent",
    description:
      "Attachment, `mediaType`: the media type of the file (any file may be attached, up to the caps): a deployment that silently drops every well-formed attachment whose media type is not `text/*` (images, PDFs, archives)",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) =>
          (attachmentsOf(b) ?? []).some(
            (a: Json) =>
              typeof a?.mediaType === "string" &&
              !a.mediaType.startsWith("text/") &&
              typeof a.name === "string",
          ),
        (b) => {
          b.metadata.attachments = attachmentsOf(b)?.filter(
            (a: Json) =>
              !(
                typeof a?.mediaType === "string" &&
                !a.mediaType.startsWith("text/") &&
                typeof a.name === "string"
              ),
          );
        },
      ),
  },
  {
    name: "attachment-size-cap-on-encoded-length",
    area: "silent",
    description:
      "Limits, attachment size: 10 MiB decoded, total: a deployment that measures the cap on the base64 text (a third larger), so files of 7.5 to 10 MiB decoded in total are dropped",
    breaks: [],
    onRequest: (call) => {
      const list = attachmentsOf(sendBody(call));
      if (!list) return undefined;
      let encoded = 0;
      let decoded = 0;
      const kept: Json[] = [];
      for (const a of list) {
        const data = typeof a?.dataBase64 === "string" ? a.dataBase64 : "";
        const size = Buffer.from(data, "base64").length;
        if (encoded + data.length > 10 * MIB && decoded + size <= 10 * MIB) continue;
        encoded += data.length;
        decoded += size;
        kept.push(a);
      }
      if (kept.length === list.length) return undefined;
      const body = sendBody(call);
      body.metadata.attachments = kept;
      call.setJson(body);
      return undefined;
    },
  },
  {
    name: "attachment-over-count-cap-413",
    area: "status",
    description:
      "Send a message, `metadata.attachments`: anything past the caps is dropped silently (Errors: silent failure modes): a deployment that refuses a turn carrying more than 10 attachments with 413",
    breaks: [],
    onRequest: (call) =>
      (attachmentsOf(sendBody(call))?.length ?? 0) > 10
        ? apiError(413, "request_too_large", "At most 10 attachments per turn")
        : undefined,
  },
  {
    name: "member-key-defaults-read-only-false",
    area: "send",
    description:
      "Send a message, `read_only`: `true` for API-key calls (rule 3: read-only unless the caller asks otherwise): a deployment that defaults `read_only` to false for an Operator key on the repository-backed agent (its turns commit and push)",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) =>
          sendAgent(call) === DEMO.repoAgent &&
          call.key === DEMO_MEMBER_KEY &&
          b.metadata?.read_only === undefined,
        (b) => {
          b.metadata = { ...(b.metadata ?? {}), read_only: false };
        },
      ),
  },
  {
    name: "automation-model-lost-on-resume",
    area: "send",
    description:
      "Send a message, `metadata.automation`: its stored model becomes the turn's default (then the agent's): a deployment that applies the automation's model on a conversation's first turn only and runs resumed turns on the agent's default",
    breaks: [],
    onRequest: (call, tools) =>
      editSend(
        call,
        (b) =>
          sendAgent(call) === DEMO.defaultAgent &&
          b.metadata?.automation === DEMO.automation &&
          b.model === undefined &&
          resumes(call, tools),
        (b) => {
          b.model = DEFAULT_MODEL[DEMO.defaultAgent];
        },
      ),
  },
  {
    name: "unknown-automation-uses-first-automation",
    area: "silent",
    description:
      "Send a message, `metadata.automation`: an unknown name is ignored: a deployment that falls back to the agent's first active automation (its prompt and model become the turn's defaults)",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) =>
          sendAgent(call) === DEMO.defaultAgent &&
          typeof b.metadata?.automation === "string" &&
          b.metadata.automation !== DEMO.automation,
        (b) => {
          b.metadata.automation = DEMO.automation;
        },
      ),
  },
  {
    name: "routed-async-delivery-runs-sync",
    area: "delivery",
    description:
      'Model-routed send: same behaviour as send-message, where `metadata.delivery` `"async"` returns 501: a deployment whose routed send runs an async request as a sync turn (200 and a stream)',
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => call.route.kind === "routed" && b.metadata?.delivery === "async",
        (b) => {
          b.metadata.delivery = "sync";
        },
      ),
  },
  {
    name: "repo-agent-streams-tools-when-flag-false",
    area: "sse",
    description:
      "Events, rule 1: `tool_use` and `tool_result` blocks only when `stream_tool_calls` is true: a deployment whose repository-backed agent streams tool blocks when the caller set `stream_tool_calls: false` explicitly",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => sendAgent(call) === DEMO.repoAgent && b.metadata?.stream_tool_calls === false,
        (b) => {
          b.metadata.stream_tool_calls = true;
        },
      ),
  },
  {
    name: "routed-bare-repo-agent-name-404",
    area: "send",
    description:
      "Model-routed send: `model` holds a routing string or a bare agent name (a repository-backed agent is named `<owner>-<repo>`): a deployment that cannot resolve the repository-backed agent's bare name and answers 404",
    breaks: [],
    onRequest: (call) => {
      const model = sendBody(call)?.model;
      if (call.route.kind !== "routed" || model !== DEMO.repoAgent) return undefined;
      return apiError(404, "not_found_error", `Agent not found: ${model}`);
    },
  },
  {
    name: "routed-resume-foreign-conversation-creates-new",
    area: "state",
    description:
      "Conversation id resolution: an id that belongs to a different agent gives 404 `Conversation not found` (model-routed send: same behaviour): a deployment whose routed send starts a new conversation instead (200, a generated id)",
    breaks: [],
    onRequest: (call, tools) =>
      editSend(
        call,
        (b) => {
          const id = b.metadata?.conversation_id;
          const owner = typeof id === "string" ? tools.ledger.conversations.get(id) : undefined;
          return call.route.kind === "routed" && owner !== undefined && owner.agent !== sendAgent(call);
        },
        (b) => {
          delete b.metadata.conversation_id;
        },
      ),
  },
];

// ---------------------------------------------------------------------------------------------------------
// Which status wins; keys and roles.

const statusRows: Mutation[] = [
  {
    name: "async-delivery-beats-unknown-key",
    area: "status",
    description:
      "Authentication, rule 4: a missing or unrecognized key gives 401: a deployment that checks `metadata.delivery` first and answers an async request with no key or an unknown key 501",
    breaks: [],
    onRequest: (call) => {
      if (sendBody(call)?.metadata?.delivery !== "async") return undefined;
      if (call.key !== undefined && KNOWN_KEYS.includes(call.key)) return undefined;
      return apiError(501, "invalid_request_error", "Only sync delivery is supported");
    },
  },
  {
    name: "repo-agent-foreign-conversation-403",
    area: "status",
    description:
      "Conversation id resolution: an id that belongs to a different agent gives 404 with message `Conversation not found`: a deployment whose repository-backed agent answers 403 to a send naming another agent's conversation",
    breaks: [],
    onRequest: (call, tools) => {
      const id = call.conversationId;
      if (call.route.kind !== "send" || call.route.agent !== DEMO.repoAgent || id === undefined)
        return undefined;
      const known = tools.ledger.conversations.get(id);
      if (!known || known.agent === DEMO.repoAgent) return undefined;
      return apiError(403, "permission_error", "This conversation cannot be written through this agent");
    },
  },
  {
    name: "routed-foreign-conversation-generic-404",
    area: "shapes",
    description:
      "Errors, 404: a conversation on a different agent or workspace gives message `Conversation not found`: a deployment whose routed send answers that 404 with a generic `Not found` message",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "routed" || res.status !== 404) return undefined;
      const body = jsonOf(res);
      if (body?.message !== "Conversation not found") return undefined;
      return withJson(res, {
        type: "error",
        error: { type: "not_found_error", message: "Not found" },
        message: "Not found",
      });
    },
  },
  {
    name: "routed-member-send-into-shared-runs",
    area: "state",
    description:
      "Conversation id resolution: someone else's conversation shared with the workspace gives 403 (readable, not writable; fork instead): a deployment whose routed send runs the member's turn inside the owner's shared conversation",
    breaks: [],
    onRequest: (call, tools) => {
      const id = call.conversationId;
      if (call.route.kind !== "routed" || !isSendPost(call) || id === undefined) return undefined;
      const owner = tools.ledger.conversations.get(id)?.owner;
      if (!owner || owner === call.key || !isShared(tools, id)) return undefined;
      if (call.key !== DEMO_ADMIN_KEY && call.key !== DEMO_MEMBER_KEY) return undefined;
      call.key = owner;
      return undefined;
    },
    onResponse: (call, res, tools) => {
      noteToggle(call, res, tools);
      return undefined;
    },
  },
  {
    name: "foreign-key-transcript-403",
    area: "status",
    description:
      "Authentication, rule 2: a key reaches only its workspace's agents; an agent in another workspace gives 404: a deployment whose transcript route answers another workspace's key 403 (leaking that the agent exists)",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "transcript" || call.key !== OTHER_ADMIN_KEY || res.status !== 404)
        return undefined;
      if (!DEMO_AGENTS.includes(call.route.agent ?? "")) return undefined;
      return apiError(403, "permission_error", "This key cannot read this agent's conversations");
    },
  },
  {
    name: "revoked-key-fork-403",
    area: "status",
    description:
      'Authentication, rule 4: a revoked key gives 401 with body `{"message": "API key has been revoked"}`: a deployment whose fork route answers a revoked key 403 `permission_error`',
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "fork" || call.key !== DEMO_REVOKED_KEY || res.status !== 401) return undefined;
      return apiError(403, "permission_error", "API key has been revoked");
    },
  },
  {
    name: "missing-key-compaction-served",
    area: "status",
    description:
      'Authentication, rule 1 and 4: every request carries `X-Api-Key`; a missing key gives 401: a deployment whose last-compaction route answers a request with no key 200 `{compacted: false, summary: ""}`',
    breaks: [],
    onRequest: (call) =>
      call.route.kind === "compaction" && call.method === "GET" && call.key === undefined
        ? jsonResponse(200, { compacted: false, summary: "" })
        : undefined,
  },
  {
    name: "unknown-key-foreign-agent-404",
    area: "status",
    description:
      "Authentication, rule 4: a missing or unrecognized key gives 401 (before any agent is looked up): a deployment that answers 404 `Agent not found` to a bad key on another workspace's agent",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.agent !== DEMO.foreignAgent || res.status !== 401) return undefined;
      if (call.key !== undefined && KNOWN_KEYS.includes(call.key)) return undefined;
      return apiError(404, "not_found_error", `Agent not found: ${DEMO.foreignAgent}`);
    },
  },
  {
    name: "fork-onto-parent-id-accepted",
    area: "status",
    description:
      "Fork a conversation, `conversation_id`: id for the child; 409 if taken: a deployment that accepts the parent's own id as the child's id (200, a fork result naming the parent as its own child)",
    breaks: [],
    onRequest: async (call, tools) => {
      const body = forkBody(call);
      const id = call.route.id;
      if (!body || id === undefined || body.conversation_id !== id || !call.route.agent) return undefined;
      const conv = await fetchConversation(tools, call.route.agent, id, call.key);
      if (!conv) return undefined;
      return jsonResponse(200, {
        conversation_id: id,
        parent_conversation_id: id,
        forked_at_turn: conv.turn_count,
        agent_session_id: conv.agent_session_id ?? "",
      });
    },
  },
  {
    name: "admin-deletes-members-conversation",
    area: "status",
    description:
      "Authentication, rule 5: only the conversation owner may delete, with no admin override: a deployment that lets an Admin key delete a member's conversation (204, gone)",
    breaks: [],
    onRequest: (call, tools) => {
      const id = call.route.id;
      if (call.route.kind !== "conversation" || call.method !== "DELETE" || call.key !== DEMO_ADMIN_KEY)
        return undefined;
      const owner = id === undefined ? undefined : tools.ledger.conversations.get(id)?.owner;
      if (!owner || owner === call.key) return undefined;
      call.key = owner;
      return undefined;
    },
  },
  {
    name: "admin-shares-members-conversation",
    area: "status",
    description:
      "Toggle sharing: owner only (Authentication, rule 5: no admin override): a deployment that lets an Admin key share or unshare a member's conversation",
    breaks: [],
    onRequest: (call, tools) => {
      const id = call.route.id;
      if (call.route.kind !== "conversation" || call.method !== "POST" || call.key !== DEMO_ADMIN_KEY)
        return undefined;
      const owner = id === undefined ? undefined : tools.ledger.conversations.get(id)?.owner;
      if (!owner || owner === call.key) return undefined;
      call.key = owner;
      return undefined;
    },
  },
  {
    name: "share-toggle-extra-property-accepted",
    area: "status",
    description:
      "Toggle sharing: the body must be exactly one property `shared` holding a boolean: a deployment that accepts a body with further properties and applies `shared`",
    breaks: [],
    knownGap: SHOULD_ONLY,
    onRequest: (call) => {
      if (call.route.kind !== "conversation" || call.method !== "POST") return undefined;
      const body = call.json();
      if (typeof body?.shared !== "boolean" || Object.keys(body).length < 2) return undefined;
      call.setJson({ shared: body.shared });
      return undefined;
    },
  },
  {
    name: "share-toggle-empty-body-unshares",
    area: "state",
    description:
      'Toggle sharing: the body must be exactly `{"shared": true}` or `{"shared": false}`: a deployment that reads an empty object as `shared: false` and unshares the conversation',
    breaks: [],
    onRequest: (call) => {
      if (call.route.kind !== "conversation" || call.method !== "POST") return undefined;
      const body = call.json();
      if (body === null || typeof body !== "object" || Array.isArray(body) || Object.keys(body).length > 0)
        return undefined;
      call.setJson({ shared: false });
      return undefined;
    },
  },
  {
    name: "repo-agent-delete-200-with-body",
    area: "status",
    description:
      "Delete a conversation: response `204 No Content`: a deployment whose repository-backed agent answers a delete 200 with a JSON body",
    breaks: [],
    onResponse: (call, res) =>
      call.route.kind === "conversation" &&
      call.method === "DELETE" &&
      call.route.agent === DEMO.repoAgent &&
      res.status === 204
        ? jsonResponse(200, { deleted: true, id: call.route.id })
        : undefined,
  },
  {
    name: "unknown-agent-models-empty-200",
    area: "status",
    description:
      "List models: same authentication and error behaviour as send-message, so it can check that an agent name and key work together: a deployment that answers an agent name it does not know 200 with an empty list",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "models" || res.status !== 404 || call.key === undefined) return undefined;
      if (!KNOWN_KEYS.includes(call.key) || call.key === DEMO_REVOKED_KEY) return undefined;
      const agent = call.route.agent ?? "";
      if (DEMO_AGENTS.includes(agent) || agent === DEMO.foreignAgent) return undefined;
      return jsonResponse(200, { data: [], has_more: false });
    },
  },
  {
    name: "routed-viewer-runs-turn",
    area: "status",
    description:
      "Authentication, rule 3: running a turn needs Admin, Builder or Operator; a Viewer key gets 403 when sending (model-routed send: same behaviour): a deployment whose routed send runs a Viewer's turn",
    breaks: [],
    onRequest: (call) => {
      if (call.route.kind !== "routed" || call.method !== "POST" || call.key !== DEMO_VIEWER_KEY)
        return undefined;
      call.key = DEMO_ADMIN_KEY;
      return undefined;
    },
  },
  {
    name: "compaction-through-other-agent",
    area: "status",
    description:
      "Errors, 404: a conversation on a different agent gives 404: a deployment whose last-compaction route serves a conversation of another agent of the workspace when addressed through this agent's path",
    breaks: [],
    onRequest: (call, tools) => {
      const id = call.route.id;
      if (call.route.kind !== "compaction" || id === undefined) return undefined;
      const home = tools.ledger.conversations.get(id)?.agent;
      if (!home || home === call.route.agent || !DEMO_AGENTS.includes(call.route.agent ?? ""))
        return undefined;
      call.path = throughAgent(call, home);
      return undefined;
    },
  },
  {
    name: "transcript-through-other-agent",
    area: "status",
    description:
      "Errors, 404: a conversation on a different agent gives 404 (message `Conversation not found`): a deployment whose transcript route serves another agent's conversation through this agent's path",
    breaks: [],
    onRequest: (call, tools) => {
      const id = call.route.id;
      if (call.route.kind !== "transcript" || id === undefined) return undefined;
      const home = tools.ledger.conversations.get(id)?.agent;
      if (!home || home === call.route.agent || !DEMO_AGENTS.includes(call.route.agent ?? ""))
        return undefined;
      call.path = throughAgent(call, home);
      return undefined;
    },
  },
  {
    name: "flow-key-header-spelling-required",
    area: "status",
    description:
      "Invoke a deployed flow: header `X-API-Key` (Authentication, rule 1: the same header as `X-Api-Key`; header names are case-insensitive): a deployment whose flow endpoint accepts the key only spelled exactly `X-API-Key` and answers 401 otherwise",
    breaks: [],
    onRequest: (call) => {
      if (call.route.kind !== "flow" || call.key === undefined) return undefined;
      if (call.sentHeaderNames.includes("X-API-Key")) return undefined;
      return apiError(401, "authentication_error", "Missing or unrecognized API key");
    },
  },
  {
    name: "flow-charset-content-type-415",
    area: "status",
    description:
      "Invoke a deployed flow: `Content-Type: application/json`: a deployment that refuses `application/json; charset=utf-8` (the same media type with a parameter) with 415",
    breaks: [],
    onRequest: (call) => {
      if (call.route.kind !== "flow" || call.key !== DEMO_FLOW_KEY) return undefined;
      const type = call.headers["content-type"] ?? "";
      return type.includes(";")
        ? apiError(415, "invalid_request_error", "Content-Type must be application/json")
        : undefined;
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// Forks across time.

const forkRows: Mutation[] = [
  {
    name: "fork-of-fork-parent-is-root",
    area: "consistency",
    description:
      "Fork result and Conversation, `parent_conversation_id`: set on forks (the conversation forked): a deployment that names the root conversation as the parent when a fork's child is forked again",
    breaks: [],
    onResponse: (call, res, tools) => {
      const parentOf = bag<string>(tools, "parentOf");
      const rooted = bag<string>(tools, "rooted");
      if (call.route.kind === "fork") {
        const result = noteFork(call, res, tools);
        const parent = call.route.id;
        if (!result || parent === undefined) return undefined;
        let root = parent;
        while (parentOf.has(root) && parentOf.get(root) !== root) root = parentOf.get(root) as string;
        if (root === parent) return undefined;
        rooted.set(result.conversation_id, root);
        return withJson(res, { ...result, parent_conversation_id: root });
      }
      return editConversations(call, res, (c) => {
        const root = rooted.get(c.id);
        if (root === undefined || c.parent_conversation_id === root) return false;
        c.parent_conversation_id = root;
        return true;
      });
    },
  },
  {
    name: "fork-of-fork-index-cumulative",
    area: "consistency",
    description:
      "Fork result, `forked_at_turn` and Conversation, `forked_at_turn_index`: the turn of the conversation forked: a deployment that, forking a fork's child, adds the child's own fork point to it",
    breaks: [],
    onResponse: (call, res, tools) => {
      const at = bag<number>(tools, "forkedAt");
      const shifted = bag<number>(tools, "shifted");
      if (call.route.kind === "fork") {
        const result = noteFork(call, res, tools);
        if (!result || typeof result.forked_at_turn !== "number" || call.route.id === undefined)
          return undefined;
        const base = at.get(call.route.id);
        at.set(result.conversation_id, result.forked_at_turn);
        if (base === undefined || base === 0) return undefined;
        const value = result.forked_at_turn + base;
        at.set(result.conversation_id, value);
        shifted.set(result.conversation_id, value);
        return withJson(res, { ...result, forked_at_turn: value });
      }
      return editConversations(call, res, (c) => {
        const value = shifted.get(c.id);
        if (value === undefined || c.forked_at_turn_index === value) return false;
        c.forked_at_turn_index = value;
        return true;
      });
    },
  },
  {
    name: "fork-model-default-lost-after-first-turn",
    area: "state",
    description:
      "Fork a conversation, `model`: recorded on the child as a default for its future turns: a deployment that applies the fork's model to the child's first turn only and runs later turns on the agent's default",
    breaks: [],
    onRequest: (call, tools) => {
      const id = call.conversationId;
      const model = id === undefined ? undefined : bag<string>(tools, "forkModel").get(id);
      const agent = sendAgent(call) ?? "";
      if (!isSendPost(call) || id === undefined || model === undefined) return undefined;
      const turns = bag<number>(tools, "childTurns");
      const seen = turns.get(id) ?? 0;
      turns.set(id, seen + 1);
      const body = sendBody(call);
      if (seen < 1 || body?.model !== undefined || !DEFAULT_MODEL[agent] || DEFAULT_MODEL[agent] === model)
        return undefined;
      body.model = DEFAULT_MODEL[agent];
      call.setJson(body);
      return undefined;
    },
    onResponse: (call, res, tools) => {
      const model = forkBody(call)?.model;
      const result = noteFork(call, res, tools);
      if (result && typeof model === "string")
        bag<string>(tools, "forkModel").set(result.conversation_id, model);
      return undefined;
    },
  },
  {
    name: "fork-child-first-message-compact-summary",
    area: "meaning",
    description:
      "Message object, `is_compact_summary`: `true` on a user message that represents an automatic compaction: a deployment that marks the first copied user message of a fork's child as a compaction summary",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (noteFork(call, res, tools)) return undefined;
      const id = call.route.id;
      if (id === undefined || !bag<string>(tools, "parentOf").has(id)) return undefined;
      return editJson(call, res, "transcript", (body) => {
        const first = Array.isArray(body.messages)
          ? body.messages.find((m: Json) => m?.role === "user")
          : undefined;
        if (!first || first.is_compact_summary === true) return false;
        first.is_compact_summary = true;
        return true;
      });
    },
  },
  {
    name: "fork-child-compaction-reports-compacted",
    area: "meaning",
    description:
      "Get last compaction: `{compacted, summary}` tells an empty turn from a compaction step: a deployment that reports a fork's copied history as a compaction of the child (`compacted: true`)",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (noteFork(call, res, tools)) return undefined;
      const id = call.route.id;
      const parent = id === undefined ? undefined : bag<string>(tools, "parentOf").get(id);
      if (parent === undefined) return undefined;
      return editJson(call, res, "compaction", (body) => {
        if (body.compacted === true) return false;
        body.compacted = true;
        body.summary = `Forked from ${parent}`;
        return true;
      });
    },
  },
  {
    name: "deleted-parent-listed-while-child-lives",
    area: "state",
    description:
      "States and transitions, delete: the conversation is removed (fork: the child is a conversation of its own): a deployment that keeps listing a deleted conversation for as long as a fork of it exists",
    breaks: [],
    onRequest: async (call, tools) => {
      const id = call.route.id;
      if (
        call.route.kind !== "conversation" ||
        call.method !== "DELETE" ||
        id === undefined ||
        !call.route.agent
      )
        return undefined;
      const hasChild = [...bag<string>(tools, "parentOf").values()].includes(id);
      if (!hasChild) return undefined;
      const conv = await fetchConversation(tools, call.route.agent, id, call.key);
      if (conv) bag<Json>(tools, "deletedParents").set(id, { agent: call.route.agent, key: call.key, conv });
      return undefined;
    },
    onResponse: (call, res, tools) => {
      if (noteFork(call, res, tools)) return undefined;
      const gone = bag<Json>(tools, "deletedParents");
      if (
        call.route.kind === "conversation" &&
        call.method === "DELETE" &&
        res.status !== 204 &&
        call.route.id
      )
        gone.delete(call.route.id);
      const query = listQuery(call);
      if (!query || res.status !== 200 || [...query.keys()].some((k) => k !== "limit")) return undefined;
      const body = jsonOf(res);
      const list: Json[] = Array.isArray(body?.conversations) ? body.conversations : [];
      let changed = false;
      for (const [id, saved] of gone) {
        if (saved.agent !== call.route.agent || saved.key !== call.key || list.some((c) => c?.id === id))
          continue;
        list.push(saved.conv);
        changed = true;
      }
      if (!changed) return undefined;
      list.sort(byActivity);
      return withJson(res, { ...body, conversations: list.slice(0, listLimit(call)) });
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// Conversation fields, lists and transcripts.

const conversationRows: Mutation[] = [
  {
    name: "routed-title-from-model-string",
    area: "consistency",
    description:
      "Conversation, `title`: derived from the first prompt at creation: a deployment that titles a conversation created by the model-routed send with the request's `model` (the routing string)",
    breaks: [],
    onRequest: noteFresh,
    onResponse: (call, res, tools) => {
      const titles = bag<string>(tools, "titles");
      if (call.route.kind === "routed" && isEventStream(res)) {
        const id = answerId(call, res);
        const model = sendBody(call)?.model;
        if (id && isFresh(call) && typeof model === "string" && !titles.has(id)) titles.set(id, model);
        return undefined;
      }
      return editConversations(call, res, (c) => {
        const title = titles.get(c.id);
        if (title === undefined || c.title === title) return false;
        c.title = title;
        return true;
      });
    },
  },
  {
    name: "title-from-attachment-name",
    area: "consistency",
    description:
      "Conversation, `title`: derived from the first prompt at creation: a deployment that titles a conversation whose first turn carries attachments with the first attachment's file name",
    breaks: [],
    onRequest: noteFresh,
    onResponse: (call, res, tools) => {
      const titles = bag<string>(tools, "titles");
      if (isSendPost(call)) {
        const first = attachmentsOf(sendBody(call))?.[0];
        const id = answerId(call, res);
        if (isEventStream(res) && id && isFresh(call) && typeof first?.name === "string" && first.name !== "")
          titles.set(id, first.name);
        return undefined;
      }
      return editConversations(call, res, (c) => {
        const title = titles.get(c.id);
        if (title === undefined || c.title === title) return false;
        c.title = title;
        return true;
      });
    },
  },
  {
    name: "isolated-conversation-channel-notebook",
    area: "shapes",
    description:
      "Conversation, `channel`: a conversation made through the API is `INTERACTIVE` (`NOTEBOOK` is a notebook's): a deployment that reports a conversation created by an `isolated` turn as `NOTEBOOK`",
    breaks: [],
    knownGap: HELD,
    onRequest: noteFresh,
    onResponse: (call, res, tools) => {
      const isolated = bag<boolean>(tools, "isolated");
      if (isSendPost(call)) {
        const id = answerId(call, res);
        if (isEventStream(res) && id && isFresh(call) && sendBody(call)?.metadata?.isolated === true)
          isolated.set(id, true);
        return undefined;
      }
      return editConversations(call, res, (c) => {
        if (!isolated.has(c.id) || c.channel === "NOTEBOOK") return false;
        c.channel = "NOTEBOOK";
        return true;
      });
    },
  },
  {
    name: "owner-not-owner-after-unshare",
    area: "state",
    description:
      "Conversation, `is_owner`: whether the caller owns it (share toggle false: private again): a deployment that reads `is_owner: false` to its owner once a conversation has been shared and unshared",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (noteToggle(call, res, tools) !== undefined) return undefined;
      const toggles = bag<boolean[]>(tools, "toggles");
      return editConversations(call, res, (c) => {
        const history = toggles.get(c.id) ?? [];
        const owner = tools.ledger.conversations.get(c.id)?.owner;
        if (!history.includes(true) || history.at(-1) !== false || owner !== call.key || c.is_owner !== true)
          return false;
        c.is_owner = false;
        return true;
      });
    },
  },
  {
    name: "share-toggles-counted-as-turns",
    area: "state",
    description:
      "Conversation, `turn_count`: the conversation's turns (a share toggle is not a turn): a deployment that counts each accepted share toggle as a turn",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (noteToggle(call, res, tools) !== undefined) return undefined;
      const toggles = bag<boolean[]>(tools, "toggles");
      return editConversations(call, res, (c) => {
        const n = toggles.get(c.id)?.length ?? 0;
        if (n === 0 || typeof c.turn_count !== "number") return false;
        c.turn_count += n;
        return true;
      });
    },
  },
  {
    name: "list-session-pointers-all-newest",
    area: "consistency",
    description:
      "Conversation, `agent_session_id`: pointer to the agent session the conversation resumes: a deployment whose list reports the newest conversation's session pointer on every listed conversation that has one",
    breaks: [],
    onResponse: (call, res) => {
      if (!listQuery(call)) return undefined;
      return editJson(call, res, "list", (body) => {
        const list: Json[] = Array.isArray(body.conversations) ? body.conversations : [];
        const newest = list.find((c) => typeof c?.agent_session_id === "string")?.agent_session_id;
        let changed = false;
        for (const c of list) {
          if (typeof c?.agent_session_id === "string" && c.agent_session_id !== newest) {
            c.agent_session_id = newest;
            changed = true;
          }
        }
        return changed;
      });
    },
  },
  {
    name: "repo-agent-created-at-an-hour-ahead",
    area: "shapes",
    description:
      "Conventions: timestamps are ISO 8601 in UTC (Conversation, `created_at`): a deployment whose repository-backed agent's single-conversation fetch gives `created_at` in local time marked `Z`, an hour ahead",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.agent !== DEMO.repoAgent || call.route.kind !== "conversation") return undefined;
      return editConversations(call, res, (c) => {
        const t = Date.parse(c.created_at);
        if (!Number.isFinite(t)) return false;
        c.created_at = new Date(t + HOUR_MS).toISOString();
        return true;
      });
    },
  },
  {
    name: "member-transcript-author-name-is-id",
    area: "shapes",
    description:
      "Message object, `author_name`: present on user messages (the author's name, beside `author_user_id`): a deployment that fills an Operator member's messages' `author_name` with the user id",
    breaks: [],
    knownGap: HELD,
    onResponse: (call, res, tools) => {
      if (call.route.kind !== "transcript") return undefined;
      const id = call.route.id;
      const owner = id === undefined ? undefined : tools.ledger.conversations.get(id)?.owner;
      if (owner !== DEMO_MEMBER_KEY) return undefined;
      return editJson(call, res, "transcript", (body) => {
        let changed = false;
        for (const m of Array.isArray(body.messages) ? body.messages : []) {
          if (
            m?.role === "user" &&
            typeof m.author_user_id === "string" &&
            m.author_name !== m.author_user_id
          ) {
            m.author_name = m.author_user_id;
            changed = true;
          }
        }
        return changed;
      });
    },
  },
  {
    name: "viewer-transcript-newest-first",
    area: "consistency",
    description:
      "Get a transcript, `messages`: the conversation's messages in the messages-API shape (in turn order): a deployment that serves a Viewer key the messages newest first",
    breaks: [],
    onResponse: (call, res) => {
      if (call.key !== DEMO_VIEWER_KEY) return undefined;
      return editJson(call, res, "transcript", (body) => {
        if (!Array.isArray(body.messages) || body.messages.length < 2) return false;
        body.messages.reverse();
        return true;
      });
    },
  },
  {
    name: "transcript-system-as-user-message",
    area: "consistency",
    description:
      "Send a message, `system`: appended to the agent's instructions (Transcript: messages are the conversation's user and assistant turns): a deployment that stores a turn's `system` text as an extra user message before its prompt",
    breaks: [],
    onResponse: (call, res, tools) => {
      const systems = bag<Array<{ turn: number; text: string }>>(tools, "systems");
      const turns = bag<number>(tools, "turns");
      if (isSendPost(call)) {
        const id = answerId(call, res);
        if (!isEventStream(res) || !id) return undefined;
        const turn = turns.get(id) ?? 0;
        turns.set(id, turn + 1);
        const system = sendBody(call)?.system;
        if (typeof system === "string" && system !== "")
          systems.set(id, [...(systems.get(id) ?? []), { turn, text: system }]);
        return undefined;
      }
      const id = call.route.id;
      const list = id === undefined ? undefined : systems.get(id);
      if (!list) return undefined;
      return editJson(call, res, "transcript", (body) => {
        if (!Array.isArray(body.messages)) return false;
        const out: Json[] = [];
        let userIndex = 0;
        let changed = false;
        for (const m of body.messages) {
          if (m?.role === "user" && m.is_compact_summary !== true) {
            const extra = list.find((s) => s.turn === userIndex);
            if (extra) {
              out.push({ ...m, content: [{ type: "text", text: extra.text }] });
              changed = true;
            }
            userIndex++;
          }
          out.push(m);
        }
        body.messages = out;
        return changed;
      });
    },
  },
  {
    name: "list-channel-id-ignored-with-since",
    area: "consistency",
    description:
      "List conversations: `channel_id` and `since` filter together: a deployment that drops the `channel_id` filter when `since` is also given",
    breaks: [],
    onRequest: (call) => {
      const query = listQuery(call);
      if (!query?.has("channel_id") || !query.has("since")) return undefined;
      query.delete("channel_id");
      setQuery(call, query);
      return undefined;
    },
  },
  {
    name: "list-limit-capped-at-100",
    area: "consistency",
    description:
      "List conversations, `limit`: 1 to 200 (Limits: 1 to 200, default 50): a deployment that serves at most 100 conversations whatever larger `limit` is asked",
    breaks: [],
    onRequest: (call) => {
      const query = listQuery(call);
      const n = Number(query?.get("limit"));
      if (!query || !Number.isInteger(n) || n <= 100 || n > 200) return undefined;
      query.set("limit", "100");
      setQuery(call, query);
      return undefined;
    },
  },
  {
    name: "admin-list-includes-members-private",
    area: "state",
    description:
      "Conversation, visibility: a caller sees the conversations it owns, those shared with the workspace and channel-owned ones (Authentication, rule 5: no admin override): a deployment whose list shows an Admin key the members' private conversations too",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const query = listQuery(call);
      if (!query || call.key !== DEMO_ADMIN_KEY || res.status !== 200) return undefined;
      const body = jsonOf(res);
      if (!Array.isArray(body?.conversations)) return undefined;
      const other = await tools.forward(ProxyCall.make("GET", call.path, DEMO_MEMBER_KEY));
      const theirs: Json[] = jsonOf(other)?.conversations ?? [];
      const extra = theirs
        .filter(
          (c) =>
            c?.is_owner === true &&
            c.shared === false &&
            !body.conversations.some((m: Json) => m?.id === c.id),
        )
        .map((c) => ({ ...c, is_owner: false }));
      if (extra.length === 0) return undefined;
      const list = [...body.conversations, ...extra].sort(byActivity).slice(0, listLimit(call));
      return withJson(res, { ...body, conversations: list });
    },
  },
  {
    name: "deleted-shared-stays-in-member-list",
    area: "state",
    description:
      "States and transitions, delete: the conversation is removed (Visible to a caller: shared ones): a deployment that keeps showing a deleted shared conversation in the other members' lists",
    breaks: [],
    onRequest: async (call, tools) => {
      const id = call.route.id;
      if (
        call.route.kind !== "conversation" ||
        call.method !== "DELETE" ||
        id === undefined ||
        !call.route.agent
      )
        return undefined;
      if (!isShared(tools, id)) return undefined;
      const conv = await fetchConversation(tools, call.route.agent, id, call.key);
      if (conv) bag<Json>(tools, "deletedShared").set(id, { agent: call.route.agent, owner: call.key, conv });
      return undefined;
    },
    onResponse: (call, res, tools) => {
      noteToggle(call, res, tools);
      const gone = bag<Json>(tools, "deletedShared");
      if (
        call.route.kind === "conversation" &&
        call.method === "DELETE" &&
        res.status !== 204 &&
        call.route.id
      )
        gone.delete(call.route.id);
      const query = listQuery(call);
      if (!query || res.status !== 200 || [...query.keys()].some((k) => k !== "limit")) return undefined;
      const body = jsonOf(res);
      const list: Json[] = Array.isArray(body?.conversations) ? body.conversations : [];
      let changed = false;
      for (const [id, saved] of gone) {
        if (saved.agent !== call.route.agent || saved.owner === call.key || list.some((c) => c?.id === id))
          continue;
        list.push({ ...saved.conv, shared: true, is_owner: false });
        changed = true;
      }
      if (!changed) return undefined;
      list.sort(byActivity);
      return withJson(res, { ...body, conversations: list.slice(0, listLimit(call)) });
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// Models list.

const modelRows: Mutation[] = [
  {
    name: "member-models-default-not-first",
    area: "shapes",
    description:
      "List models: the agent's configured default model is first: a deployment that lists an Operator key the models in the order they were configured (the default first only for Admin keys)",
    breaks: [],
    onResponse: (call, res) => {
      const order = CONFIGURED_MODELS[call.route.agent ?? ""];
      if (call.key !== DEMO_MEMBER_KEY || !order) return undefined;
      return editJson(call, res, "models", (body) => {
        if (!Array.isArray(body.data) || body.data.length < 2) return false;
        const before = body.data.map((m: Json) => m?.id).join(",");
        const rank = (m: Json) => (order.includes(m?.id) ? order.indexOf(m.id) : order.length);
        body.data.sort((a: Json, b: Json) => rank(a) - rank(b));
        return body.data.map((m: Json) => m?.id).join(",") !== before;
      });
    },
  },
  {
    name: "single-model-listed-twice",
    area: "shapes",
    description:
      "List models: `data` lists the agent's models, the default first: a deployment that, for an agent with one model, lists the default once as the default and once again as a model",
    breaks: [],
    onResponse: (call, res) =>
      editJson(call, res, "models", (body) => {
        if (!Array.isArray(body.data) || body.data.length !== 1) return false;
        body.data = [body.data[0], { ...body.data[0] }];
        return true;
      }),
  },
];

// ---------------------------------------------------------------------------------------------------------
// Streams: what events mean.

const streamRows: Mutation[] = [
  {
    name: "signature-delta-before-thinking-delta",
    area: "sse",
    description:
      "Events, rule 1: a `thinking` block is followed by a `signature_delta`: a deployment that sends the signature delta before the block's `thinking_delta`",
    breaks: [],
    onEvents: (events) => {
      let changed = false;
      for (let i = 0; i + 1 < events.length; i++) {
        const a = events[i].data?.delta?.type;
        const b = events[i + 1].data?.delta?.type;
        if (a === "thinking_delta" && b === "signature_delta") {
          [events[i], events[i + 1]] = [events[i + 1], events[i]];
          changed = true;
          i++;
        }
      }
      return changed ? events : undefined;
    },
  },
  {
    name: "text-delta-split-at-newline",
    area: "sse",
    description:
      "Events, rule 3: blocks arrive whole: one `content_block_start`, one complete `content_block_delta`, one `content_block_stop`: a deployment that sends a multi-line text block as one delta per line break",
    breaks: [],
    onEvents: (events) => {
      const out: SseEvent[] = [];
      let changed = false;
      for (const e of events) {
        const text = e.data?.delta?.type === "text_delta" ? String(e.data.delta.text ?? "") : "";
        const cut = text.indexOf("\n");
        if (e.event !== "content_block_delta" || cut <= 0 || cut === text.length - 1) {
          out.push(e);
          continue;
        }
        out.push({
          event: e.event,
          data: { ...e.data, delta: { type: "text_delta", text: text.slice(0, cut + 1) } },
        });
        out.push({
          event: e.event,
          data: { ...e.data, delta: { type: "text_delta", text: text.slice(cut + 1) } },
        });
        changed = true;
      }
      return changed ? out : undefined;
    },
  },
  {
    name: "tool-use-input-only-in-block-start",
    area: "sse",
    description:
      "Events, rules 1 and 3: a `tool_use` block comes with its `input_json_delta`, one complete delta per block: a deployment that puts the tool input in the block start and sends no delta for it",
    breaks: [],
    onEvents: (events) => {
      const inputs = new Map<number, string>();
      for (const e of events)
        if (e.event === "content_block_delta" && e.data?.delta?.type === "input_json_delta")
          inputs.set(e.data.index, String(e.data.delta.partial_json ?? ""));
      if (inputs.size === 0) return undefined;
      const out: SseEvent[] = [];
      for (const e of events) {
        if (e.event === "content_block_delta" && e.data?.delta?.type === "input_json_delta") continue;
        if (
          e.event === "content_block_start" &&
          e.data?.content_block?.type === "tool_use" &&
          inputs.has(e.data.index)
        ) {
          let input: Json = {};
          try {
            input = JSON.parse(inputs.get(e.data.index) || "{}");
          } catch {}
          out.push({
            event: e.event,
            data: { ...e.data, content_block: { ...e.data.content_block, input } },
          });
          continue;
        }
        out.push(e);
      }
      return out;
    },
  },
  {
    name: "storage-agent-cost-zero",
    area: "meaning",
    description:
      "Events, rule 4: `message_delta.usage.total_cost_usd` is the cost of the turn in US dollars: a deployment whose storage-backed agent with files reports 0 for turns that used tokens",
    breaks: [],
    knownGap: HELD,
    onEvents: (events, call) => {
      if (sendAgent(call) !== DEMO.storageAgent) return undefined;
      const usage = usageOf(events);
      if (!usage || !(usage.total_cost_usd > 0) || !(usage.output_tokens > 0)) return undefined;
      usage.total_cost_usd = 0;
      return events;
    },
  },
  {
    name: "message-id-repeats-across-turns",
    area: "meaning",
    description:
      "Events, `message_start`: `message.id` identifies the turn's message: a deployment that sends every later turn of a conversation with the first turn's message id",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (!isSendPost(call)) return undefined;
      const id = answerId(call, res);
      if (!id) return undefined;
      const first = bag<string>(tools, "firstMessageId");
      return rewriteStream(res, (events) => {
        const message = events.find((e) => e.event === "message_start")?.data?.message;
        if (typeof message?.id !== "string") return undefined;
        const kept = first.get(id);
        if (kept === undefined) {
          first.set(id, message.id);
          return undefined;
        }
        message.id = kept;
        return events;
      });
    },
  },
  {
    name: "stop-reason-null-after-thinking",
    area: "meaning",
    description:
      "Events, rule 6 and `message_delta`: `delta.stop_reason` is a string, the stop reason seen is `end_turn`: a deployment that sends `stop_reason: null` for turns that began with a thinking block",
    breaks: [],
    onEvents: (events) => {
      if (!hasThinking(events)) return undefined;
      const delta = events.find((e) => e.event === "message_delta")?.data?.delta;
      if (!delta || delta.stop_reason === null) return undefined;
      delta.stop_reason = null;
      return events;
    },
  },
  {
    name: "error-event-message-blank",
    area: "sse",
    description:
      'Events, `error`: `{error: {type: "api_error", message: <string>}}` tells the failure: a deployment whose error event carries an empty message',
    breaks: [],
    onEvents: (events) => {
      let changed = false;
      for (const e of events)
        if (
          e.event === "error" &&
          typeof e.data?.error?.message === "string" &&
          e.data.error.message !== ""
        ) {
          e.data.error.message = "";
          changed = true;
        }
      return changed ? events : undefined;
    },
  },
  {
    name: "routed-stream-done-sentinel",
    area: "sse",
    description:
      "Events: the stream ends at `message_stop`; there is no `[DONE]` sentinel: a deployment whose model-routed send appends `data: [DONE]` after `message_stop`",
    breaks: [],
    onSseText: (text, call) => (call.route.kind === "routed" ? `${text}data: [DONE]\n\n` : text),
  },
  {
    name: "repo-agent-deltas-without-event-line",
    area: "sse",
    description:
      "Events: each event is a line `event: <name>` followed by a line `data: <JSON>`: a deployment whose repository-backed agent sends `content_block_delta` frames as `data:` lines only",
    breaks: [],
    onSseText: (text, call) =>
      sendAgent(call) === DEMO.repoAgent ? text.replace(/^event: content_block_delta\r?\n/gm, "") : text,
  },
  {
    name: "empty-resumed-turn-reported-as-error",
    area: "meaning",
    description:
      "States and transitions, resumed turn with no output: `agent_session_id` cleared, no error (Client guidance: retrying a conversation that returned nothing is the recovery): a deployment that ends an empty resumed turn with an `error` event instead of `message_delta` and `message_stop`",
    breaks: [],
    onRequest: noteFresh,
    onEvents: (events, call) => {
      if (isFresh(call) || call.conversationId === undefined || blockStarts(events).length > 0)
        return undefined;
      if (!events.some((e) => e.event === "message_stop")) return undefined;
      return [
        ...events.filter((e) => e.event !== "message_delta" && e.event !== "message_stop"),
        {
          event: "error",
          data: { type: "error", error: { type: "api_error", message: "The turn produced no output" } },
        },
      ];
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// Headers.

const headerRows: Mutation[] = [
  {
    name: "routed-bare-name-content-type-json",
    area: "headers",
    description:
      "Send a message, response: `Content-Type: text/event-stream` (model-routed send: same behaviour): a deployment whose routed send with a bare agent name labels the event stream `application/json`",
    breaks: [],
    onResponse: (call, res) => {
      const model = sendBody(call)?.model;
      if (
        call.route.kind !== "routed" ||
        typeof model !== "string" ||
        model.includes("--") ||
        !isEventStream(res)
      )
        return undefined;
      return { ...res, headers: { ...res.headers, "content-type": "application/json" } };
    },
  },
  {
    name: "caller-chosen-id-header-omitted",
    area: "headers",
    description:
      "Send a message, response: header `X-Conversation-Id` on every `200`: a deployment that leaves the header out when the caller chose the id of a new conversation",
    breaks: [],
    onRequest: noteFresh,
    onResponse: (call, res) => {
      if (
        call.route.kind !== "send" ||
        !isFresh(call) ||
        call.conversationId === undefined ||
        !isEventStream(res)
      )
        return undefined;
      if (res.headers["x-conversation-id"] === undefined) return undefined;
      const headers = { ...res.headers };
      delete headers["x-conversation-id"];
      return { ...res, headers };
    },
  },
];

export const outsideMutations7: Mutation[] = [
  ...sendRows,
  ...statusRows,
  ...forkRows,
  ...conversationRows,
  ...modelRows,
  ...streamRows,
  ...headerRows,
].map((m) => ({ ...m, outsideRound: 7 }));
