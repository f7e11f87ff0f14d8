/**
 * Outside round 8: breakages written from the API's text alone, by someone who had not read the checks (nor
 * the model, the explorer, the sweeps or the earlier rounds' rows beyond their names), each a fault a real
 * deployment could have. Like rounds 4 to 7 they aim at what a suite that exercises each rule under one
 * combination misses: a rule broken under one agent kind (the main demo agent, the storage-backed agent with
 * files, the repository-backed agent), one key role (admin, member, Viewer, no key, unknown, revoked, another
 * workspace's, the flow key), one route (per-agent or model-routed send, bare name or routing string, each
 * conversation route through another agent's path), one turn depth or one input shape (`system`, each
 * `metadata` flag, attachments of each shape, fork bodies, list filters combined); a field of the right type
 * holding a wrong value; state going wrong across time (forks of forks, deletes while a child lives, share
 * toggles in sequence, defaults recorded for later turns, sessions, compaction); which status wins when two
 * apply; what a stream's events mean. Each row cites the API section and rule it departs from.
 *
 * No row names a check: `breaks` stays empty and `outsideRound` is set, so the harness judges each row as
 * `agent-api check` judges a deployment (harness.ts). The deployment these rows simulate knows its own
 * agents, keys, models and seeded conversations (the demo's); who owns a conversation comes from the proxy's
 * ledger, what happened to a conversation (forks, toggles, deletes, turns) from the traffic the row has seen.
 * A row changes an answer only where its fault applies: anything else goes through untouched.
 */
import { randomUUID } from "node:crypto";
import {
  DEMO_CHANNEL_CONVERSATION_ID,
  DEMO_NOTEBOOK_PATH,
} from "../../reference-server/demo/conversations.ts";
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
  callerIsNotOwner,
  conversationPath,
  DEMO,
  DEMO_AGENTS,
  editConversations,
  editJson,
  editSend,
  forkBody,
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
  type Mutation,
  ProxyCall,
  type ProxyResponse,
  type ProxyTools,
  parseSse,
  type SseEvent,
  serialiseSse,
  withJson,
} from "./proxy-calls.ts";

/**
 * A conversation id holding "/": CONSIST-ID-CHARACTERS leaves the character out on purpose. Percent-encoded
 * as %2F in the path, it is decoded by proxies a correct deployment may sit behind (nginx with a URI in
 * proxy_pass, some API gateways), so a check of it would fail correct deployments; the suite names the
 * characters it sends instead.
 */
const SLASH_GAP =
  'outside round 8: an id with "/" is not sent on purpose (proxies in front of a correct deployment may decode %2F)';

/**
 * The flow key on agent routes: the API says a deployed-flow key comes from the flow's API tab, and that a
 * missing or unrecognised key gets 401, but not whether the workspace recognises a flow key on its agent
 * routes; the suite judges the flow key only on the flow endpoint.
 */
const FLOW_KEY_GAP =
  "outside round 8: the API does not say whether a flow key is refused on the agent routes (Authentication 6)";

/** The agents' default models, as the deployment holds them. */
const DEFAULT_MODEL: Record<string, string> = {
  "demo-agent": "demo-large",
  "notes-agent": "demo-small",
  "acme-widgets": "demo-large",
  "other-agent": "demo-large",
};

const MIB = 1024 * 1024;

/** The phrase a client uses to ask a resumed turn what it remembers (the agent's memory made visible). */
const MEMORY_QUESTION = /what code word did i ask you to remember/i;

/** Records fork results: child → parent, and the fork body the child was made with. */
function noteFork(call: ProxyCall, res: ProxyResponse, tools: ProxyTools): Json {
  if (call.route.kind !== "fork" || call.method !== "POST" || !is2xx(res)) return undefined;
  const result = jsonOf(res);
  if (typeof result?.conversation_id !== "string" || call.route.id === undefined) return undefined;
  bag<string>(tools, "parentOf").set(result.conversation_id, call.route.id);
  bag<Json>(tools, "forkBodyOf").set(result.conversation_id, forkBody(call) ?? {});
  return result;
}

const parentOf = (tools: ProxyTools, id: string | undefined) =>
  id === undefined ? undefined : bag<string>(tools, "parentOf").get(id);

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

/** A delete the deployment accepted: records the id. */
function noteDelete(call: ProxyCall, res: ProxyResponse, tools: ProxyTools): string | undefined {
  if (call.route.kind !== "conversation" || call.method !== "DELETE" || !is2xx(res)) return undefined;
  if (call.route.id === undefined) return undefined;
  bag<true>(tools, "deleted").set(call.route.id, true);
  return call.route.id;
}

const wasDeleted = (tools: ProxyTools, id: string | undefined) =>
  id !== undefined && bag<true>(tools, "deleted").has(id);

/**
 * Counts the turns of each conversation the proxy saw answered with a stream (per-agent and routed sends)
 * and returns this turn's number (1 for a first turn).
 */
function countTurn(call: ProxyCall, res: ProxyResponse, tools: ProxyTools): number | undefined {
  if (!isSendPost(call) || !isEventStream(res)) return undefined;
  const id = answerId(call, res);
  if (id === undefined) return undefined;
  const turns = bag<number>(tools, "turns");
  const n = (turns.get(id) ?? 0) + 1;
  turns.set(id, n);
  return n;
}

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

/** A turn that forgot its conversation: the memory question answered as a fresh session answers it. */
function forgetful(call: ProxyCall, events: SseEvent[]): SseEvent[] | undefined {
  if (!MEMORY_QUESTION.test(promptText(newestUser(sendBody(call))))) return undefined;
  return mapText(events, () => "I don't know") ? events : undefined;
}

const blockStarts = (events: SseEvent[]) => events.filter((e) => e.event === "content_block_start");
const hasThinking = (events: SseEvent[]) =>
  blockStarts(events).some((e) => e.data?.content_block?.type === "thinking");

/** The indices of the blocks of one type in a stream. */
const indicesOf = (events: SseEvent[], type: string) =>
  new Set(
    blockStarts(events)
      .filter((e) => e.data?.content_block?.type === type)
      .map((e) => e.data.index),
  );

/** Sorts a list of conversations newest activity first (as the list route orders them). */
const byActivity = (a: Json, b: Json) =>
  String(b?.updated_at ?? "").localeCompare(String(a?.updated_at ?? ""));

/** The list's `limit` as the deployment reads it (default 50). */
function listLimit(call: ProxyCall): number {
  const n = Number(call.url.searchParams.get("limit") ?? 50);
  return Number.isInteger(n) && n > 0 ? n : 50;
}

/** A list call whose query names only the parameters given (none at all passes too). */
function onlyParams(call: ProxyCall, allowed: string[]): boolean {
  const query = listQuery(call);
  return query !== undefined && [...query.keys()].every((k) => allowed.includes(k));
}

/** Adds conversations to a list answer (absent ones only), keeps it ordered and within its limit. */
function mergeIntoList(call: ProxyCall, res: ProxyResponse, extra: Json[]): ProxyResponse | undefined {
  const body = jsonOf(res);
  if (!Array.isArray(body?.conversations)) return undefined;
  const have = new Set(body.conversations.map((c: Json) => c?.id));
  const added = extra.filter((c) => c && !have.has(c.id));
  if (added.length === 0) return undefined;
  body.conversations = [...body.conversations, ...added].sort(byActivity).slice(0, listLimit(call));
  return withJson(res, body);
}

/** Fetches a conversation upstream with `key` (a read: not a firing). */
async function fetchConversation(tools: ProxyTools, agent: string, id: string, key: string | undefined) {
  const res = await tools.forward(ProxyCall.make("GET", conversationPath(agent, id), key));
  return res.status === 200 ? jsonOf(res)?.conversation : undefined;
}

/** Fetches a list upstream with another query or key (a read: not a firing). */
async function fetchList(
  tools: ProxyTools,
  call: ProxyCall,
  query: URLSearchParams,
  key: string | undefined,
) {
  const probe = ProxyCall.make("GET", call.path, key);
  setQuery(probe, query);
  const res = await tools.forward(probe);
  const list = res.status === 200 ? jsonOf(res)?.conversations : undefined;
  return Array.isArray(list) ? (list as Json[]) : [];
}

/** A 200 event stream that opens a turn and then fails: what a deployment that checks too late sends. */
function refusalStream(agent: string | undefined, message: string): ProxyResponse {
  const events: SseEvent[] = [
    {
      event: "message_start",
      data: {
        type: "message_start",
        message: {
          id: `msg_${randomUUID().replaceAll("-", "")}`,
          type: "message",
          role: "assistant",
          model: DEFAULT_MODEL[agent ?? DEMO.defaultAgent] ?? "demo-large",
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: {
            input_tokens: 0,
            output_tokens: 0,
            cache_read_input_tokens: 0,
            cache_creation_input_tokens: 0,
          },
        },
      },
    },
    { event: "error", data: { type: "error", error: { type: "api_error", message } } },
  ];
  return {
    status: 200,
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" },
    body: Buffer.from(serialiseSse(events)),
  };
}

/** The decoded size of an attachment's data, or undefined when it is not a well-formed entry. */
function decodedSize(a: Json): number | undefined {
  if (a === null || typeof a !== "object") return undefined;
  if (typeof a.name !== "string" || typeof a.mediaType !== "string" || typeof a.dataBase64 !== "string")
    return undefined;
  if (a.dataBase64.startsWith("data:") || !/^[A-Za-z0-9+/]*={0,2}$/.test(a.dataBase64)) return undefined;
  return Buffer.from(a.dataBase64, "base64").length;
}

/** The attachments of a send kept while their running decoded total stays `keep(total)`; the rest dropped. */
function capAttachments(call: ProxyCall, keep: (total: number) => boolean): undefined {
  return editSend(
    call,
    (body) => {
      const list = attachmentsOf(body);
      if (!list) return false;
      let total = 0;
      for (const a of list) {
        const size = decodedSize(a);
        if (size === undefined) continue;
        total += size;
        if (total <= 10 * MIB && !keep(total)) return true;
      }
      return false;
    },
    (body) => {
      let total = 0;
      const kept: Json[] = [];
      for (const a of body.metadata.attachments) {
        const size = decodedSize(a);
        if (size !== undefined) total += size;
        if (size !== undefined && !keep(total)) break;
        kept.push(a);
      }
      body.metadata.attachments = kept;
    },
  );
}

/** Conversations as they were just before a delete the deployment is asked for (deleted-still-in-list-with-filter). */
const pendingDeletes = new WeakMap<ProxyCall, Json>();

/** Forks whose requested child id the deployment replaced, by call: the id the caller asked for. */
const renamedForks = new WeakMap<ProxyCall, string>();

// ---------------------------------------------------------------------------------------------------------
// Send a message: input shapes, metadata flags, model selection, turn depth.

const sendRows: Mutation[] = [
  {
    name: "repo-agent-system-dropped",
    area: "send",
    description:
      'Endpoints, send-message: `system` is "appended to the agent\'s own instructions; never replaces them". ' +
      "This deployment drops `system` on the repository-backed agent (its repo prompt builder never reads it), " +
      "on either send route; the other agents append it.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) =>
      editSend(
        call,
        (body) => sendAgent(call) === DEMO.repoAgent && typeof body.system === "string",
        (body) => {
          delete body.system;
        },
      ),
  },
  {
    name: "member-body-model-ignored",
    area: "send",
    description:
      'Endpoints, send-message: `model` is "one of the ids from the models list" and the automation\'s ' +
      "model and the agent default are only fallbacks. Here a per-agent send by a key of the Operator role " +
      "runs on the agent's default whatever `model` names (a role-scoped model allow-list left empty).",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) =>
      editSend(
        call,
        (body) =>
          call.route.kind === "send" && call.key === DEMO_MEMBER_KEY && typeof body.model === "string",
        (body) => {
          delete body.model;
        },
      ),
  },
  {
    name: "async-delivery-ignored-on-resume",
    area: "status",
    description:
      'Endpoints, send-message, metadata `delivery`: only "sync" is supported; "async" returns 501 ' +
      "(Errors: 501). This deployment checks `delivery` only while creating a conversation: an async send " +
      "into an existing conversation runs a synchronous turn and answers 200.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call, tools) =>
      editSend(
        call,
        (body) => body.metadata?.delivery === "async" && resumes(call, tools),
        (body) => {
          body.metadata.delivery = "sync";
        },
      ),
  },
  {
    name: "text-block-with-cache-control-ignored",
    area: "send",
    description:
      'Endpoints, send-message: `content` is a string or an array of `{type: "text", text}` blocks, and ' +
      "fields the messages API defines are accepted. This deployment reads a text block only when it has " +
      "exactly `type` and `text`: a block a standard client marks with `cache_control` is skipped as if it " +
      "were not text, so the prompt loses it.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) =>
      editSend(
        call,
        (body) => {
          const content = newestUser(body)?.content;
          return (
            Array.isArray(content) &&
            content.some(
              (b: Json) => b?.type === "text" && Object.keys(b).some((k) => k !== "type" && k !== "text"),
            )
          );
        },
        (body) => {
          const message = newestUser(body);
          message.content = message.content.filter(
            (b: Json) => !(b?.type === "text" && Object.keys(b).some((k) => k !== "type" && k !== "text")),
          );
        },
      ),
  },
  {
    name: "read-only-false-ignored-on-resume",
    area: "send",
    description:
      "Endpoints, send-message, metadata `read_only`: with `false`, a turn of a repository-backed agent that " +
      "changes files commits and pushes. This deployment reads the flag only on a conversation's first turn: " +
      "a later turn of the repository agent with `read_only: false` runs read-only and its changes are lost.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call, tools) =>
      editSend(
        call,
        (body) =>
          sendAgent(call) === DEMO.repoAgent && body.metadata?.read_only === false && resumes(call, tools),
        (body) => {
          body.metadata.read_only = true;
        },
      ),
  },
  {
    name: "isolated-ignored-on-repo-agent",
    area: "send",
    description:
      'Endpoints, send-message, metadata `isolated`: the turn "runs in a throwaway sandbox with no repo clone ' +
      'and no workspace files". On the repository-backed agent this deployment clones the repository anyway ' +
      "(the clone step runs before the flag is read); the storage agents honour it.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) =>
      editSend(
        call,
        (body) => sendAgent(call) === DEMO.repoAgent && body.metadata?.isolated === true,
        (body) => {
          delete body.metadata.isolated;
        },
      ),
  },
  {
    name: "routed-repo-agent-read-only-default-false",
    area: "send",
    description:
      "Rules of the service 3 and send-message metadata `read_only`: the default is `true` for API-key calls. " +
      "The model-routed send to the repository-backed agent builds its options without that default, so an " +
      "API-key turn that changes files commits and pushes to the default branch.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) =>
      editSend(
        call,
        (body) =>
          call.route.kind === "routed" &&
          sendAgent(call) === DEMO.repoAgent &&
          body.metadata?.read_only === undefined,
        (body) => {
          body.metadata = { ...(body.metadata ?? {}), read_only: false };
        },
      ),
  },
  {
    name: "fork-model-default-overrides-body-model",
    area: "state",
    description:
      'Fork a conversation: a fork\'s `model` is "recorded on the child as a default for its future turns"; ' +
      "send-message: `model` in the body is the first choice. This deployment stores the fork's model as the " +
      "child's model, and it wins over the `model` a later send into the child names.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call, tools) => {
      const recorded = bag<Json>(tools, "forkBodyOf").get(call.conversationId ?? "")?.model;
      if (typeof recorded !== "string") return undefined;
      return editSend(
        call,
        (body) => typeof body.model === "string" && body.model !== recorded && call.route.kind === "send",
        (body) => {
          body.model = recorded;
        },
      );
    },
    onResponse: (call, res, tools) => {
      noteFork(call, res, tools);
      return undefined;
    },
  },
  {
    name: "stream-omitted-answers-json-on-resume",
    area: "delivery",
    description:
      "Endpoints, send-message: the response is `200`, `Content-Type: text/event-stream` (`stream` is optional " +
      "and even `false` yields an event stream). A resumed turn whose body leaves `stream` out is answered as " +
      "one JSON message object, as a bare messages API would; a first turn still streams.",
    breaks: [],
    outsideRound: 8,
    onRequest: noteFresh,
    onResponse: (call, res) => {
      const body = sendBody(call);
      if (!body || body.stream !== undefined || isFresh(call) || !isEventStream(res)) return undefined;
      const events = parseSse(res.body.toString("utf8"));
      const start = events.find((e) => e.event === "message_start")?.data?.message;
      const delta = events.find((e) => e.event === "message_delta")?.data;
      if (!start || !delta) return undefined;
      const text = events
        .filter((e) => e.event === "content_block_delta" && e.data?.delta?.type === "text_delta")
        .map((e) => String(e.data.delta.text))
        .join("");
      const message = {
        ...start,
        content: [{ type: "text", text }],
        stop_reason: delta.delta?.stop_reason ?? "end_turn",
        usage: delta.usage,
      };
      const headers = { ...res.headers };
      delete headers["cache-control"];
      return withJson({ ...res, headers }, message);
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// Attachments: caps, malformed entries, input shapes, turn kinds.

const attachmentRows: Mutation[] = [
  {
    name: "attachment-size-cap-exclusive",
    area: "silent",
    description:
      "Send-message metadata `attachments` and Limits: at most 10 MiB decoded in total. This deployment keeps " +
      "attachments only while the running total stays strictly below 10 MiB, so a turn whose files add up to " +
      "exactly 10 MiB loses the one that reaches the cap.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => capAttachments(call, (total) => total < 10 * MIB),
  },
  {
    name: "attachment-cap-decimal-megabytes",
    area: "silent",
    description:
      "Send-message metadata `attachments` and Limits: the size cap is 10 MiB decoded (10 × 1024 × 1024 " +
      "bytes). This deployment caps at 10 MB (10,000,000 bytes): files that fit in 10 MiB but pass 10 MB are " +
      "dropped silently.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => capAttachments(call, (total) => total <= 10_000_000),
  },
  {
    name: "malformed-attachment-drops-the-rest",
    area: "silent",
    description:
      'Send-message metadata `attachments`: "Malformed entries and anything past the caps are dropped ' +
      'silently", entry by entry. This deployment validates the array as a whole: one malformed entry (no ' +
      "media type, a `data:` prefix, not base64) drops every attachment of the turn, the well-formed ones too.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) =>
      editSend(
        call,
        (body) => {
          const list = attachmentsOf(body);
          if (!list) return false;
          const sizes = list.map(decodedSize);
          return sizes.some((s) => s === undefined) && sizes.some((s) => s !== undefined);
        },
        (body) => {
          body.metadata.attachments = [];
        },
      ),
  },
  {
    name: "attachments-dropped-on-fork-child",
    area: "silent",
    description:
      "Send-message metadata `attachments`: per-turn files are written to `.uploads/<name>` and announced to " +
      "the agent. A turn in a forked conversation (the child's first or later turns) runs from the copied " +
      "session with the upload step skipped, so its attachments never reach the agent.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call, tools) =>
      editSend(
        call,
        (body) =>
          (attachmentsOf(body)?.length ?? 0) > 0 && parentOf(tools, call.conversationId) !== undefined,
        (body) => {
          delete body.metadata.attachments;
        },
      ),
    onResponse: (call, res, tools) => {
      noteFork(call, res, tools);
      return undefined;
    },
  },
  {
    name: "attachments-dropped-with-text-blocks",
    area: "silent",
    description:
      "Send-message: `content` is a string or an array of text blocks, and `metadata.attachments` are files of " +
      "the turn either way. This deployment announces attachments only beside string content: when the " +
      "newest user message holds text blocks, the files are dropped.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) =>
      editSend(
        call,
        (body) => (attachmentsOf(body)?.length ?? 0) > 0 && Array.isArray(newestUser(body)?.content),
        (body) => {
          delete body.metadata.attachments;
        },
      ),
  },
  {
    name: "conversation-header-missing-with-attachments",
    area: "headers",
    description:
      "Endpoints, send-message, Response: `200`, `Content-Type: text/event-stream`, header `X-Conversation-Id`. " +
      "A turn that carries attachments goes through the upload path, whose response writer never sets the " +
      "header, so a client that omitted the id cannot learn the new conversation's id.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) => {
      if (!isEventStream(res) || (attachmentsOf(sendBody(call))?.length ?? 0) === 0) return undefined;
      if (res.headers["x-conversation-id"] === undefined) return undefined;
      const headers = { ...res.headers };
      delete headers["x-conversation-id"];
      return { ...res, headers };
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// Statuses: which wins when two apply, per key role and route.

const statusRows: Mutation[] = [
  {
    name: "slash-conversation-id-404",
    knownGap: SLASH_GAP,
    area: "status",
    description:
      'Resources, Conversation `id`: "any string chosen by the caller"; an unknown id on send-message is ' +
      "created verbatim. An id holding `/` is created by the send, but every conversation route decodes the " +
      "path before routing and answers 404 for it: the conversation can be resumed but never fetched, forked, " +
      "shared or deleted.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => {
      const { kind, id } = call.route;
      const routes = ["conversation", "transcript", "compaction", "fork"];
      if (!routes.includes(kind) || id === undefined || !id.includes("/")) return undefined;
      return apiError(404, "not_found_error", "Not found");
    },
  },
  {
    name: "revoked-key-foreign-agent-404",
    area: "status",
    description:
      'Authentication 4: "A revoked key gives 401 with body {"message": "API key has been revoked"}". ' +
      "This deployment resolves the agent within the key's workspace before looking at revocation: a revoked " +
      "key naming another workspace's agent gets 404 instead.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => {
      if (call.key !== DEMO_REVOKED_KEY || call.route.agent !== DEMO.foreignAgent) return undefined;
      return apiError(404, "not_found_error", `Agent not found: ${DEMO.foreignAgent}`);
    },
  },
  {
    name: "delete-without-key-404",
    area: "status",
    description:
      'Authentication 4 and Errors: a missing key gives 401, on every endpoint ("All endpoints use the header ' +
      'described under Authentication"). The delete route looks the conversation up for its owner first and ' +
      "answers a request without `X-Api-Key` with 404.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => {
      if (call.route.kind !== "conversation" || call.method !== "DELETE" || call.key !== undefined)
        return undefined;
      return apiError(404, "not_found_error", "Conversation not found");
    },
  },
  {
    name: "foreign-key-fork-403",
    area: "status",
    description:
      "Authentication 2 and Errors: \"A key reaches only that workspace's agents; an agent in another " +
      "workspace gives 404\". The fork route checks the caller's permission on the conversation before the " +
      "agent's workspace: another workspace's key forking through this workspace's agent gets 403.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => {
      if (call.route.kind !== "fork" || call.key !== OTHER_ADMIN_KEY) return undefined;
      if (!DEMO_AGENTS.includes(call.route.agent ?? "")) return undefined;
      return apiError(403, "permission_error", "You may not fork this conversation");
    },
  },
  {
    name: "foreign-key-models-403",
    area: "status",
    description:
      'List models: "Same authentication and error behaviour as send-message"; Authentication 2: an agent in ' +
      "another workspace gives 404. The models route answers another workspace's key with 403 (the agent " +
      "exists, the key may not use it), leaking that the agent exists.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => {
      if (call.route.kind !== "models" || call.key !== OTHER_ADMIN_KEY) return undefined;
      if (!DEMO_AGENTS.includes(call.route.agent ?? "")) return undefined;
      return apiError(403, "permission_error", "This key may not use this agent");
    },
  },
  {
    name: "flow-key-lists-models",
    knownGap: FLOW_KEY_GAP,
    area: "status",
    description:
      "Authentication 4 and 6: a deployed-flow key comes from the flow's API tab; on the agent routes it is " +
      "not a recognised API key, so it gets 401. This deployment looks keys up in one table: the flow key " +
      "lists an agent's models as if it were its flow's run-as member.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => {
      if (call.route.kind !== "models" || call.key !== DEMO_FLOW_KEY) return undefined;
      call.key = DEMO_ADMIN_KEY;
      return undefined;
    },
  },
  {
    name: "flow-key-runs-turns",
    knownGap: FLOW_KEY_GAP,
    area: "status",
    description:
      "Authentication 3, 4 and 6: running a turn needs an API key of the Admin, Builder or Operator role; the " +
      "deployed-flow key is no such key and gets 401 on send-message. This deployment accepts the flow key on " +
      "per-agent sends and runs the turn as the flow's run-as member.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => {
      if (call.route.kind !== "send" || call.key !== DEMO_FLOW_KEY) return undefined;
      call.key = DEMO_ADMIN_KEY;
      return undefined;
    },
  },
  {
    name: "viewer-compaction-403",
    area: "status",
    description:
      'Authentication 3: "A Viewer key can read conversations"; Get last compaction is a read of a ' +
      "conversation. This deployment lists the compaction route with the turn routes (it belongs to the turn " +
      "machinery) and refuses a Viewer key with 403 there; fetch and transcript serve the Viewer.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => {
      if (call.route.kind !== "compaction" || call.key !== DEMO_VIEWER_KEY) return undefined;
      return apiError(403, "permission_error", "Viewer keys may not run turns");
    },
  },
  {
    name: "fork-without-body-400",
    area: "status",
    description:
      'Fork a conversation: the body\'s fields are "all optional". The fork route parses the body as JSON ' +
      "before reading the defaults, so a fork sent with no body at all (no `{}`) is refused with 400; an " +
      "empty object works.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => {
      if (call.route.kind !== "fork" || call.method !== "POST" || call.body.length > 0) return undefined;
      return apiError(400, "invalid_request_error", "Request body is not valid JSON");
    },
  },
  {
    name: "fork-of-channel-owned-404",
    area: "status",
    description:
      'States and transitions, fork: "caller may read it"; Resources, Conversation: conversations owned by a ' +
      "channel are visible to a caller. The fork route looks the parent up among conversations owned by a " +
      "member (or shared), so a channel-owned conversation, readable through fetch and transcript, cannot be " +
      "forked: 404.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => {
      if (call.route.kind !== "fork" || call.route.id !== DEMO_CHANNEL_CONVERSATION_ID) return undefined;
      if (!DEMO_AGENTS.includes(call.route.agent ?? "")) return undefined;
      return apiError(404, "not_found_error", "Conversation not found");
    },
  },
  {
    name: "fork-onto-deleted-id-409",
    area: "state",
    description:
      'Fork a conversation, body `conversation_id`: 409 only "if taken"; a deleted conversation is removed ' +
      "(States and transitions, delete). This deployment keeps a tombstone for deleted ids, so a fork that " +
      "names the id of a conversation deleted earlier is refused with 409.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call, tools) => {
      const wanted = forkBody(call)?.conversation_id;
      if (typeof wanted !== "string" || !wasDeleted(tools, wanted)) return undefined;
      return apiError(409, "conflict_error", `Conversation id ${wanted} is already taken`);
    },
    onResponse: (call, res, tools) => {
      noteDelete(call, res, tools);
      return undefined;
    },
  },
  {
    name: "fork-id-taken-on-other-agent-accepted",
    area: "status",
    description:
      'Fork a conversation, body `conversation_id`: "409 if taken". This deployment checks the id only ' +
      "among the agent's own conversations: a child id already used by a conversation of another agent is " +
      "accepted (200), leaving two conversations that answer to one id.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call, tools) => {
      const body = forkBody(call);
      const wanted = body?.conversation_id;
      if (typeof wanted !== "string") return undefined;
      const known = tools.ledger.conversations.get(wanted);
      if (!known || known.agent === call.route.agent) return undefined;
      renamedForks.set(call, wanted);
      body.conversation_id = `${wanted}-${randomUUID().slice(0, 8)}`;
      call.setJson(body);
      return undefined;
    },
    onResponse: (call, res) => {
      const wanted = renamedForks.get(call);
      if (wanted === undefined) return undefined;
      return editJson(call, res, "fork", (result) => {
        if (typeof result?.conversation_id !== "string") return false;
        result.conversation_id = wanted;
        return true;
      });
    },
  },
  {
    name: "shared-conversation-other-agent-send-403",
    area: "status",
    description:
      'Conversation id resolution: an id that "belongs to a different agent or workspace" gives 404 ' +
      "`Conversation not found`; 403 is for another member's shared conversation on this agent. This " +
      "deployment checks sharing before the agent: a member sending another member's shared conversation id " +
      "through a different agent's path gets 403, learning that the id exists elsewhere.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call, tools) => {
      if (call.route.kind !== "send" || call.method !== "POST") return undefined;
      const id = call.conversationId;
      const known = id === undefined ? undefined : tools.ledger.conversations.get(id);
      if (!known || id === undefined || known.agent === call.route.agent) return undefined;
      if (!callerIsNotOwner(call, tools, id) || !isShared(tools, id)) return undefined;
      if (call.key === DEMO_VIEWER_KEY) return undefined;
      return apiError(403, "permission_error", "This conversation is shared read-only; fork it instead");
    },
    onResponse: (call, res, tools) => {
      noteToggle(call, res, tools);
      return undefined;
    },
  },
  {
    name: "own-conversation-through-repo-agent-runs",
    area: "status",
    description:
      "Conversation id resolution: an id that belongs to a different agent gives 404 `Conversation not " +
      "found`. The repository-backed agent's send path looks ids up in its own index only: the caller's own " +
      "conversation of another agent is taken for an unknown id and a new conversation starts (200), under a " +
      "new id.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call, tools) =>
      editSend(
        call,
        () => {
          if (call.route.kind !== "send" || call.route.agent !== DEMO.repoAgent) return false;
          const known = tools.ledger.conversations.get(call.conversationId ?? "");
          return known !== undefined && known.agent !== DEMO.repoAgent && known.owner === call.key;
        },
        (body) => {
          delete body.metadata.conversation_id;
        },
      ),
  },
  {
    name: "foreign-workspace-conversation-generic-message",
    area: "status",
    description:
      'Conversation id resolution and Errors: a conversation id of another workspace gives 404 "with message ' +
      "`Conversation not found`\". A key of the other workspace sending this workspace's conversation id to " +
      "its own agent gets 404 with message `Not found` (the cross-workspace check has its own error text).",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) => {
      if (!isSendPost(call) || call.key !== OTHER_ADMIN_KEY || res.status !== 404) return undefined;
      if (call.conversationId === undefined) return undefined;
      const body = jsonOf(res);
      if (!String(body?.message ?? body?.error?.message ?? "").includes("Conversation not found"))
        return undefined;
      return apiError(404, "not_found_error", "Not found");
    },
  },
  {
    name: "viewer-refusal-as-error-event",
    area: "status",
    description:
      "Authentication 3 and Errors: a Viewer key sending a message gets 403. This deployment opens the stream " +
      "before checking the role: the Viewer gets 200 with `message_start` and then an `error` event, the " +
      "shape the API keeps for failures after the stream opened.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) => {
      if (!isSendPost(call) || call.key !== DEMO_VIEWER_KEY || res.status !== 403) return undefined;
      return refusalStream(sendAgent(call), "Viewer keys may not run turns");
    },
  },
  {
    name: "shared-send-refusal-as-error-event",
    area: "status",
    description:
      "Conversation id resolution and Errors: sending a turn into another member's shared conversation gives " +
      "403. This deployment learns the conversation is not the caller's only after it opened the stream: 200, " +
      "`message_start`, then an `error` event.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) => {
      if (!isSendPost(call) || call.key === DEMO_VIEWER_KEY || res.status !== 403) return undefined;
      if (call.conversationId === undefined) return undefined;
      return refusalStream(sendAgent(call), "This conversation is shared read-only; fork it instead");
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// The event stream: block shapes, indices, usage, ending, per agent and route.

const streamRows: Mutation[] = [
  {
    name: "thinking-block-start-not-empty",
    area: "sse",
    description:
      'Events, `content_block_start`: the block comes "with an empty text or thinking string" and the one ' +
      "complete delta carries it (rule 3). This deployment puts the whole thinking text in the thinking " +
      "block's start as well, so a client appending deltas shows it twice; text blocks start empty.",
    breaks: [],
    outsideRound: 8,
    onEvents: (events) => {
      for (const start of blockStarts(events)) {
        if (start.data?.content_block?.type !== "thinking") continue;
        const delta = events.find(
          (e) =>
            e.event === "content_block_delta" &&
            e.data?.index === start.data.index &&
            e.data?.delta?.type === "thinking_delta",
        );
        if (delta) start.data.content_block.thinking = delta.data.delta.thinking;
      }
      return events;
    },
  },
  {
    name: "signature-delta-dropped-on-resume",
    area: "sse",
    description:
      'Events rule 1: a `thinking` block is "followed by a `signature_delta`". On a resumed turn this ' +
      "deployment streams the thinking block from its cache, which holds the thinking text but not the " +
      "signature: no `signature_delta` arrives; first turns are signed.",
    breaks: [],
    outsideRound: 8,
    onRequest: noteFresh,
    onEvents: (events, call) => {
      if (!isSendPost(call) || isFresh(call)) return undefined;
      return events.filter(
        (e) => !(e.event === "content_block_delta" && e.data?.delta?.type === "signature_delta"),
      );
    },
  },
  {
    name: "thinking-delta-split-on-routed",
    area: "sse",
    description:
      'Events rule 3: "Blocks arrive whole: each is one `content_block_start`, one complete ' +
      '`content_block_delta`, one `content_block_stop`." The model-routed send relays the upstream thinking ' +
      "in two `thinking_delta` events (the text and signature arrive whole on per-agent sends).",
    breaks: [],
    outsideRound: 8,
    onEvents: (events, call) => {
      if (call.route.kind !== "routed") return undefined;
      const out: SseEvent[] = [];
      for (const e of events) {
        const thinking = e.data?.delta?.type === "thinking_delta" ? String(e.data.delta.thinking ?? "") : "";
        if (e.event !== "content_block_delta" || thinking.length < 2) {
          out.push(e);
          continue;
        }
        const cut = Math.floor(thinking.length / 2);
        out.push({
          event: e.event,
          data: { ...e.data, delta: { ...e.data.delta, thinking: thinking.slice(0, cut) } },
        });
        out.push({
          event: e.event,
          data: { ...e.data, delta: { ...e.data.delta, thinking: thinking.slice(cut) } },
        });
      }
      return out;
    },
  },
  {
    name: "index-resets-after-thinking",
    area: "sse",
    description:
      'Events rule 3: `index` is "a running counter for the turn". This deployment numbers thinking blocks ' +
      "and the other blocks with separate counters: after a thinking block at 0, the next block is index 0 " +
      "again.",
    breaks: [],
    outsideRound: 8,
    onEvents: (events) => {
      if (!hasThinking(events)) return undefined;
      const renumber = new Map<number, number>();
      let thinking = 0;
      let other = 0;
      for (const start of blockStarts(events)) {
        if (start.data?.content_block?.type === "thinking") renumber.set(start.data.index, thinking++);
        else renumber.set(start.data.index, other++);
      }
      for (const e of events) {
        if (!e.event.startsWith("content_block_")) continue;
        const n = renumber.get(e.data?.index);
        if (n !== undefined) e.data.index = n;
      }
      return events;
    },
  },
  {
    name: "cost-missing-after-thinking",
    area: "sse",
    description:
      "Events rule 4: `message_delta.usage` carries `total_cost_usd`. When the turn thought, this deployment's " +
      "pricing step (which has no rate for thinking tokens) gives up and leaves `total_cost_usd` out.",
    breaks: [],
    outsideRound: 8,
    onEvents: (events) => {
      const usage = usageOf(events);
      if (!hasThinking(events) || usage?.total_cost_usd === undefined) return undefined;
      delete usage.total_cost_usd;
      return events;
    },
  },
  {
    name: "fork-child-first-turn-cache-creation-missing",
    area: "sse",
    description:
      "Events rule 4: `message_delta.usage` carries `input_tokens`, `output_tokens`, " +
      "`cache_read_input_tokens`, `cache_creation_input_tokens` and `total_cost_usd`. The first turn of a " +
      "forked child (the copied session's first call) reports usage without `cache_creation_input_tokens`.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res, tools) => {
      noteFork(call, res, tools);
      const id = call.conversationId;
      if (!isSendPost(call) || parentOf(tools, id) === undefined || !isEventStream(res) || id === undefined)
        return undefined;
      const turned = bag<true>(tools, "childTurned");
      if (turned.has(id)) return undefined;
      turned.set(id, true);
      return rewriteStream(res, (events) => {
        const usage = usageOf(events);
        if (usage?.cache_creation_input_tokens === undefined) return undefined;
        delete usage.cache_creation_input_tokens;
        return events;
      });
    },
  },
  {
    name: "repo-agent-cost-as-string",
    area: "sse",
    description:
      "Events rule 4: `total_cost_usd` is the cost of the turn in US dollars (a number in the messages-API " +
      'usage object). The repository-backed agent\'s runner formats it as a decimal string (`"0.0017"`).',
    breaks: [],
    outsideRound: 8,
    onEvents: (events, call) => {
      const usage = usageOf(events);
      if (sendAgent(call) !== DEMO.repoAgent || typeof usage?.total_cost_usd !== "number") return undefined;
      usage.total_cost_usd = usage.total_cost_usd.toFixed(4);
      return events;
    },
  },
  {
    name: "max-tokens-sets-stop-reason",
    area: "sse",
    description:
      'Endpoints, send-message: `max_tokens` is "accepted and ignored"; Events rule 6: the stop reason seen ' +
      "is `end_turn`. This deployment compares the turn's output with a `max_tokens` the caller sent and " +
      'reports `stop_reason: "max_tokens"` whenever one was sent, the reply being whole.',
    breaks: [],
    outsideRound: 8,
    onEvents: (events, call) => {
      if (typeof sendBody(call)?.max_tokens !== "number") return undefined;
      const delta = events.find((e) => e.event === "message_delta");
      if (delta?.data?.delta?.stop_reason !== "end_turn") return undefined;
      delta.data.delta.stop_reason = "max_tokens";
      return events;
    },
  },
  {
    name: "message-stop-missing-on-routed-bare-name",
    area: "sse",
    description:
      'Events: "The stream ends at `message_stop`". A model-routed send whose `model` is a bare agent name ' +
      "goes through a compatibility shim that closes the response after `message_delta`; a routing string " +
      "and the per-agent route end with `message_stop`.",
    breaks: [],
    outsideRound: 8,
    onEvents: (events, call) => {
      const model = sendBody(call)?.model;
      if (call.route.kind !== "routed" || typeof model !== "string" || model.includes("--")) return undefined;
      return events.filter((e) => e.event !== "message_stop");
    },
  },
  {
    name: "event-type-field-dropped-from-third-turn",
    area: "sse",
    description:
      "Events, sequence of a turn: each event's data is `{type, ...}` naming the event. From a conversation's " +
      "third turn on, this deployment replays events from its stored form, which keeps the event line but " +
      "not the `type` property of the data.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res, tools) => {
      const n = countTurn(call, res, tools);
      if (n === undefined || n < 3) return undefined;
      return rewriteStream(res, (events) => {
        for (const e of events)
          if (e.data && typeof e.data === "object" && e.event !== "error") delete e.data.type;
        return events;
      });
    },
  },
  {
    name: "third-turn-usage-missing",
    area: "sse",
    description:
      "Events, sequence: `message_delta` is `{type, delta: {stop_reason}, usage}`, rule 4 lists what `usage` " +
      "carries. From a conversation's third turn on, this deployment's usage accounting (kept per session " +
      "window) has nothing to report and `message_delta` arrives without `usage`.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res, tools) => {
      const n = countTurn(call, res, tools);
      if (n === undefined || n < 3) return undefined;
      return rewriteStream(res, (events) => {
        const delta = events.find((e) => e.event === "message_delta");
        if (!delta?.data?.usage) return undefined;
        delete delta.data.usage;
        return events;
      });
    },
  },
  {
    name: "tool-result-block-without-stop",
    area: "sse",
    description:
      "Events rule 3: each block is one `content_block_start`, one complete `content_block_delta`, one " +
      "`content_block_stop`. With `stream_tool_calls`, this deployment emits a `tool_result` block as a lone " +
      "`content_block_start`: it is never stopped.",
    breaks: [],
    outsideRound: 8,
    onEvents: (events) => {
      const results = indicesOf(events, "tool_result");
      if (results.size === 0) return undefined;
      return events.filter((e) => !(e.event === "content_block_stop" && results.has(e.data?.index)));
    },
  },
  {
    name: "tool-use-dropped-keeps-result-on-notes-agent",
    area: "sse",
    description:
      "Events rule 1: with `stream_tool_calls` true the stream adds `tool_use` (with `input_json_delta`) and " +
      "`tool_result` blocks. On the storage-backed agent with files the file tools are local shims whose " +
      "calls are not relayed: the stream carries their `tool_result` blocks but not the `tool_use` they answer.",
    breaks: [],
    outsideRound: 8,
    onEvents: (events, call) => {
      if (sendAgent(call) !== DEMO.storageAgent) return undefined;
      const uses = indicesOf(events, "tool_use");
      if (uses.size === 0) return undefined;
      return events.filter((e) => !(e.event.startsWith("content_block_") && uses.has(e.data?.index)));
    },
  },
  {
    name: "delta-index-off-by-one-on-notes-agent",
    area: "sse",
    description:
      "Events: `content_block_delta` is `{type, index, delta}` for the block of that index (rule 3: start, " +
      "delta, stop of one block). The storage-backed agent with files numbers its deltas from one while its " +
      "starts and stops count from zero.",
    breaks: [],
    outsideRound: 8,
    onEvents: (events, call) => {
      if (sendAgent(call) !== DEMO.storageAgent) return undefined;
      let changed = false;
      for (const e of events)
        if (e.event === "content_block_delta" && typeof e.data?.index === "number") {
          e.data.index += 1;
          changed = true;
        }
      return changed ? events : undefined;
    },
  },
  {
    name: "message-start-usage-missing-on-notes-agent",
    area: "sse",
    description:
      "Events, sequence: `message_start` is `{type, message: {id, model, usage}}`. The storage-backed agent " +
      "with files sends `message_start` before its first model call has reported, and leaves `usage` out of " +
      "the message.",
    breaks: [],
    outsideRound: 8,
    onEvents: (events, call) => {
      if (sendAgent(call) !== DEMO.storageAgent) return undefined;
      const start = events.find((e) => e.event === "message_start");
      if (!start?.data?.message?.usage) return undefined;
      delete start.data.message.usage;
      return events;
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// Sessions and memory across time.

const memoryRows: Mutation[] = [
  {
    name: "routed-resume-forgets-context",
    area: "state",
    description:
      'Rules of the service 1 and Model-routed send ("same body and behaviour as send-message"): a send ' +
      "with the caller's own `conversation_id` resumes with its full prior context. The routed send passes " +
      "the id but not the recorded session, so a resumed routed turn answers from a fresh session.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res, tools) => {
      if (call.route.kind !== "routed" || !isEventStream(res)) return undefined;
      const seen = bag<true>(tools, "routedSeen");
      const id = call.conversationId;
      const resumed = id !== undefined && (seen.has(id) || tools.ledger.conversations.has(id));
      const answered = answerId(call, res);
      if (answered !== undefined) seen.set(answered, true);
      if (!resumed) return undefined;
      return rewriteStream(res, (events) => forgetful(call, events));
    },
  },
  {
    name: "fork-child-forgets-parent-on-repo-agent",
    area: "state",
    description:
      'States and transitions, fork: the "child\'s first turn answers from parent context up to `at_turn`". ' +
      "On the repository-backed agent the child's copied session is written where the repo sandbox does not " +
      "look, so the child's first turn remembers nothing of the parent; storage agents' forks remember.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res, tools) => {
      noteFork(call, res, tools);
      const id = call.conversationId;
      if (!isSendPost(call) || sendAgent(call) !== DEMO.repoAgent || id === undefined) return undefined;
      if (parentOf(tools, id) === undefined || !isEventStream(res)) return undefined;
      const turned = bag<true>(tools, "childTurned");
      if (turned.has(id)) return undefined;
      turned.set(id, true);
      return rewriteStream(res, (events) => forgetful(call, events));
    },
  },
  {
    name: "memory-lost-after-share-toggle",
    area: "state",
    description:
      "Rules of the service 1 and States and transitions: a share toggle changes `shared` only; the owner's " +
      "next turn resumes with full prior context. This deployment rewrites the conversation row on a toggle " +
      "and loses the session pointer: the owner's next turn answers from a fresh session.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res, tools) => {
      if (noteToggle(call, res, tools) !== undefined && call.route.id !== undefined) {
        bag<true>(tools, "toggledSinceTurn").set(call.route.id, true);
        return undefined;
      }
      const id = call.conversationId;
      if (!isSendPost(call) || id === undefined || !isEventStream(res)) return undefined;
      const toggled = bag<true>(tools, "toggledSinceTurn");
      if (!toggled.has(id)) return undefined;
      toggled.delete(id);
      return rewriteStream(res, (events) => forgetful(call, events));
    },
  },
  {
    name: "member-own-session-never-recorded",
    area: "state",
    description:
      "Resources, Conversation `agent_session_id`: null until the server has recorded it after a turn, then " +
      "non-null; Client guidance: poll until it is non-null. For conversations created with an Operator-role " +
      "key the recorder never runs: fetch, list and transcript show `agent_session_id` null after every turn.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res, tools) =>
      editConversations(call, res, (c) => {
        if (call.key !== DEMO_MEMBER_KEY || c.agent_session_id === null) return false;
        if (tools.ledger.conversations.get(c.id)?.owner !== DEMO_MEMBER_KEY) return false;
        c.agent_session_id = null;
        return true;
      }),
  },
];

// ---------------------------------------------------------------------------------------------------------
// Conversation fields, transcript, compaction.

const fieldRows: Mutation[] = [
  {
    name: "title-default-on-notes-agent",
    area: "shapes",
    description:
      'Resources, Conversation `title`: "Derived from the first prompt at creation". The storage-backed ' +
      "agent with files creates its conversations before the prompt is read and titles them " +
      "`New conversation`; the other agents derive the title.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) =>
      editConversations(call, res, (c) => {
        if (call.route.agent !== DEMO.storageAgent || c.title === "New conversation") return false;
        c.title = "New conversation";
        return true;
      }),
  },
  {
    name: "turn-count-zero-in-member-list",
    area: "consistency",
    description:
      "Resources, Conversation `turn_count`. The list answered to a member counts turns only of the " +
      "member's own conversations: the shared and channel-owned conversations it lists show `turn_count` 0, " +
      "while the single fetch gives the real count.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) =>
      editJson(call, res, "list", (body) => {
        if (call.key !== DEMO_MEMBER_KEY || !Array.isArray(body?.conversations)) return false;
        let changed = false;
        for (const c of body.conversations)
          if (c?.is_owner === false && c.turn_count !== 0) {
            c.turn_count = 0;
            changed = true;
          }
        return changed;
      }),
  },
  {
    name: "transcript-forked-at-index-plus-one",
    area: "consistency",
    description:
      "Resources, Conversation `forked_at_turn_index` (set on forks) and Transcript `conversation`. The " +
      "transcript's conversation object reports a fork's index one higher than the single fetch and the " +
      "list do (its serializer converts to a one-based turn number).",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) => {
      if (call.route.kind !== "transcript") return undefined;
      return editConversations(call, res, (c) => {
        if (typeof c.forked_at_turn_index !== "number") return false;
        c.forked_at_turn_index += 1;
        return true;
      });
    },
  },
  {
    name: "transcript-compact-summary-not-flagged",
    area: "meaning",
    description:
      "Resources, Message object `is_compact_summary`: `true` on a user message that represents an automatic " +
      "compaction; clients render it as a notice, not a user turn. This deployment stores the summary as an " +
      "ordinary user message: the flag is `false` on it.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) =>
      editJson(call, res, "transcript", (body) => {
        if (!Array.isArray(body?.messages)) return false;
        let changed = false;
        for (const m of body.messages)
          if (m?.is_compact_summary === true) {
            m.is_compact_summary = false;
            changed = true;
          }
        return changed;
      }),
  },
  {
    name: "transcript-tool-use-blocks-in-content",
    area: "shapes",
    description:
      "Resources, Message object `content`: blocks of shape `{type: text, text}` only (tool calls are in " +
      "the raw `events`). On the repository-backed agent the transcript's assistant messages also carry the " +
      "turn's `tool_use` blocks, which a client rendering text blocks does not expect.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) => {
      if (call.route.agent !== DEMO.repoAgent) return undefined;
      return editJson(call, res, "transcript", (body) => {
        if (!Array.isArray(body?.messages) || !Array.isArray(body?.events)) return false;
        const assistants = body.messages.filter((m: Json) => m?.role === "assistant");
        let changed = false;
        for (const e of body.events) {
          if (e?.type !== "tool_use" || typeof e.turn_index !== "number") continue;
          const message = assistants[e.turn_index];
          if (!message || !Array.isArray(message.content)) continue;
          message.content.unshift({ type: "tool_use", id: e.id, name: e.name, input: e.input ?? {} });
          changed = true;
        }
        return changed;
      });
    },
  },
  {
    name: "fork-result-reports-unused-id",
    area: "consistency",
    description:
      'Fork a conversation, Response: the fork result\'s `conversation_id` is "id of the child". When the ' +
      "body names `at_turn` (a truncating copy) this deployment generates the child's id twice and answers " +
      "with the one it did not store: fetching the reported child gives 404.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) => {
      const body = forkBody(call);
      if (typeof body?.at_turn !== "number" || body.conversation_id !== undefined) return undefined;
      return editJson(call, res, "fork", (result) => {
        if (typeof result?.conversation_id !== "string") return false;
        result.conversation_id = `conv_${randomUUID()}`;
        return true;
      });
    },
  },
  {
    name: "fork-of-fork-result-session-null",
    area: "shapes",
    description:
      "Resources, Fork result: `agent_session_id` is a string (the child resumes the copied session). When " +
      "the conversation forked is itself a fork, the result's `agent_session_id` is null (the copy is made " +
      "lazily from the root, later).",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res, tools) => {
      const isForkOfFork = call.route.kind === "fork" && parentOf(tools, call.route.id) !== undefined;
      const changed = isForkOfFork
        ? editJson(call, res, "fork", (result) => {
            if (result?.agent_session_id === null || result?.agent_session_id === undefined) return false;
            result.agent_session_id = null;
            return true;
          })
        : undefined;
      noteFork(call, res, tools);
      return changed;
    },
  },
  {
    name: "parent-delete-nulls-child-parent-id",
    area: "state",
    description:
      'Resources, Conversation `parent_conversation_id`: "Set on forks"; States and transitions, delete: the ' +
      "parent is removed (the child lives on). The child's pointer is a foreign key with ON DELETE SET NULL: " +
      "after its parent is deleted a fork reports `parent_conversation_id` null, though `forked_at_turn_index` " +
      "stays.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res, tools) => {
      if (noteDelete(call, res, tools) !== undefined) return undefined;
      return editConversations(call, res, (c) => {
        if (!wasDeleted(tools, c.parent_conversation_id)) return false;
        c.parent_conversation_id = null;
        return true;
      });
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// Sharing, deleting and visibility across time and keys.

const visibilityRows: Mutation[] = [
  {
    name: "share-true-twice-flips",
    area: "state",
    description:
      'Toggle sharing: `{"shared": true}` makes `shared` true and `{"shared": false}` false (States and ' +
      "transitions), whatever it was. This deployment implements the route as a flip: a second " +
      '`{"shared": true}` on an already shared conversation makes it private again.',
    breaks: [],
    outsideRound: 8,
    onRequest: (call, tools) => {
      if (call.route.kind !== "conversation" || call.method !== "POST" || call.route.id === undefined)
        return undefined;
      if (call.json()?.shared !== true || !isShared(tools, call.route.id)) return undefined;
      call.setJson({ shared: false });
      return undefined;
    },
    onResponse: (call, res, tools) => {
      noteToggle(call, res, tools);
      return undefined;
    },
  },
  {
    name: "child-share-shares-parent",
    area: "state",
    description:
      'States and transitions, fork: "parent unchanged"; share toggle changes the conversation toggled. ' +
      "Sharing a fork child here also shares the conversation it was forked from (the share flag is stored on " +
      "the fork family), so the parent becomes readable to the workspace without its owner sharing it.",
    breaks: [],
    outsideRound: 8,
    onResponse: async (call, res, tools) => {
      noteFork(call, res, tools);
      if (noteToggle(call, res, tools) !== true || call.route.id === undefined) return undefined;
      const parent = parentOf(tools, call.route.id);
      const known = parent === undefined ? undefined : tools.ledger.conversations.get(parent);
      if (parent === undefined || !known || isShared(tools, parent)) return undefined;
      await tools.forward(
        ProxyCall.make("POST", conversationPath(known.agent, parent), known.owner, { shared: true }),
      );
      return undefined;
    },
  },
  {
    name: "child-delete-removes-parent",
    area: "state",
    description:
      "States and transitions, delete: the conversation deleted is removed, and a fork is its own " +
      'conversation ("parent unchanged"). This deployment deletes a fork\'s whole family upwards: deleting a ' +
      "fork child also deletes the conversation it was forked from.",
    breaks: [],
    outsideRound: 8,
    onResponse: async (call, res, tools) => {
      noteFork(call, res, tools);
      const id = noteDelete(call, res, tools);
      const parent = parentOf(tools, id);
      const known = parent === undefined ? undefined : tools.ledger.conversations.get(parent);
      if (parent === undefined || !known || wasDeleted(tools, parent)) return undefined;
      await tools.forward(ProxyCall.make("DELETE", conversationPath(known.agent, parent), known.owner));
      bag<true>(tools, "deleted").set(parent, true);
      return undefined;
    },
  },
  {
    name: "deleted-still-in-list-with-filter",
    area: "state",
    description:
      "States and transitions, delete: the conversation is removed (204). The list's filtered index (used " +
      "when a `channel` filter is given) is not updated on delete: a deleted conversation is still listed " +
      "for its owner with `channel=INTERACTIVE`, though the unfiltered list and the fetch no longer have it.",
    breaks: [],
    outsideRound: 8,
    onRequest: async (call, tools) => {
      if (call.route.kind !== "conversation" || call.method !== "DELETE" || call.route.id === undefined)
        return undefined;
      const before = await fetchConversation(tools, call.route.agent ?? "", call.route.id, call.key);
      if (before) pendingDeletes.set(call, before);
      return undefined;
    },
    onResponse: (call, res, tools) => {
      const before = pendingDeletes.get(call);
      if (before && noteDelete(call, res, tools) !== undefined) {
        bag<Json>(tools, "deletedRows").set(before.id, {
          row: before,
          agent: call.route.agent,
          key: call.key,
        });
        return undefined;
      }
      const channel = listQuery(call)?.get("channel");
      if (!channel || !onlyParams(call, ["channel", "limit"]) || res.status !== 200) return undefined;
      const rows = [...bag<Json>(tools, "deletedRows").values()]
        .filter((d) => d.agent === call.route.agent && d.key === call.key && d.row.channel === channel)
        .map((d) => d.row);
      return rows.length > 0 ? mergeIntoList(call, res, rows) : undefined;
    },
  },
  {
    name: "viewer-list-includes-private",
    area: "state",
    description:
      "Resources, Conversation: visible to a caller are conversations the caller owns, shared ones and " +
      "channel-owned ones. A Viewer key's list is built with the workspace-wide read scope of its role: it " +
      "includes other members' private conversations.",
    breaks: [],
    outsideRound: 8,
    onResponse: async (call, res, tools) => {
      const query = listQuery(call);
      if (!query || call.key !== DEMO_VIEWER_KEY || res.status !== 200) return undefined;
      const admins = await fetchList(tools, call, query, DEMO_ADMIN_KEY);
      const extra = admins
        .filter((c) => c?.is_owner === true && c.shared === false)
        .map((c) => ({ ...c, is_owner: false }));
      return mergeIntoList(call, res, extra);
    },
  },
  {
    name: "fork-child-visible-to-parent-owner",
    area: "state",
    description:
      'States and transitions, fork: the child is "private, owned by caller". A member\'s fork of another ' +
      "member's shared conversation is listed to the parent's owner too (the list joins on the fork family), " +
      "though the child was never shared.",
    breaks: [],
    outsideRound: 8,
    onResponse: async (call, res, tools) => {
      noteFork(call, res, tools);
      if (!onlyParams(call, ["limit"]) || res.status !== 200 || call.key === undefined) return undefined;
      const extra: Json[] = [];
      for (const [child, parent] of bag<string>(tools, "parentOf")) {
        const c = tools.ledger.conversations.get(child);
        const p = tools.ledger.conversations.get(parent);
        if (!c || !p || p.owner !== call.key || c.owner === call.key || c.agent !== call.route.agent)
          continue;
        const row = await fetchConversation(tools, c.agent, child, c.owner);
        if (row && row.shared === false) extra.push({ ...row, is_owner: false });
      }
      return extra.length > 0 ? mergeIntoList(call, res, extra) : undefined;
    },
  },
  {
    name: "channel-owned-visible-across-workspaces",
    area: "status",
    description:
      "Resources, Conversation (visible: owned, shared with the workspace, owned by a channel) and " +
      "Authentication 2 (a key reaches only its workspace). Channel-owned conversations are treated as public: " +
      "another workspace's key reads one through its own agent's path, where it should get 404.",
    breaks: [],
    outsideRound: 8,
    onRequest: async (call, tools) => {
      const { kind, agent, id } = call.route;
      if (call.method !== "GET" || call.key !== OTHER_ADMIN_KEY || id !== DEMO_CHANNEL_CONVERSATION_ID)
        return undefined;
      if (!["conversation", "transcript", "compaction"].includes(kind) || DEMO_AGENTS.includes(agent ?? ""))
        return undefined;
      const res = await tools.forward(
        ProxyCall.make("GET", throughAgent(call, DEMO.defaultAgent), DEMO_ADMIN_KEY),
      );
      return res.status === 200 ? res : undefined;
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// Lists: filters, ordering, agents.

const listRows: Mutation[] = [
  {
    name: "list-notebook-path-prefix-match",
    area: "meaning",
    description:
      "List conversations, query `notebook_path`: a filter on the notebook's path. This deployment matches " +
      "it as a prefix (`LIKE path%`): a directory such as `notebooks/` lists the conversations of every " +
      "notebook under it.",
    breaks: [],
    outsideRound: 8,
    onResponse: async (call, res, tools) => {
      const query = listQuery(call);
      const path = query?.get("notebook_path");
      if (!query || !path || path === DEMO_NOTEBOOK_PATH || !DEMO_NOTEBOOK_PATH.startsWith(path))
        return undefined;
      if (res.status !== 200) return undefined;
      const exact = new URLSearchParams(query);
      exact.set("notebook_path", DEMO_NOTEBOOK_PATH);
      return mergeIntoList(call, res, await fetchList(tools, call, exact, call.key));
    },
  },
  {
    name: "list-interactive-filter-keeps-channel-owned",
    area: "meaning",
    description:
      "List conversations, query `channel` (`INTERACTIVE`, `NOTEBOOK`, `SLACK`, `EMAIL`). With " +
      "`channel=INTERACTIVE` this deployment filters out notebook conversations only: channel-owned " +
      "conversations (Slack, e-mail) are listed too.",
    breaks: [],
    outsideRound: 8,
    onResponse: async (call, res, tools) => {
      const query = listQuery(call);
      if (query?.get("channel") !== "INTERACTIVE" || res.status !== 200) return undefined;
      const extra: Json[] = [];
      for (const channel of ["SLACK", "EMAIL"]) {
        const other = new URLSearchParams(query);
        other.set("channel", channel);
        extra.push(...(await fetchList(tools, call, other, call.key)));
      }
      return mergeIntoList(call, res, extra);
    },
  },
  {
    name: "list-automation-filter-empty-for-member",
    area: "meaning",
    description:
      "List conversations, query `automation` (automation name). The filter joins on the automation's owner, " +
      "so only the Admin who configured the automation finds its conversations: a member's own turns run " +
      "with `metadata.automation` are missing from the member's filtered list.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) => {
      if (!listQuery(call)?.get("automation") || call.key !== DEMO_MEMBER_KEY) return undefined;
      return editJson(call, res, "list", (body) => {
        if (!Array.isArray(body?.conversations) || body.conversations.length === 0) return false;
        body.conversations = [];
        return true;
      });
    },
  },
  {
    name: "list-leaves-out-forks",
    area: "state",
    description:
      "List conversations: lists the caller's visible conversations; a fork child is a conversation owned " +
      "by the caller (States and transitions, fork). This deployment's list reads only root conversations: " +
      "forks can be fetched and resumed but are never listed.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) =>
      editJson(call, res, "list", (body) => {
        if (!Array.isArray(body?.conversations)) return false;
        const kept = body.conversations.filter((c: Json) => c?.parent_conversation_id == null);
        if (kept.length === body.conversations.length) return false;
        body.conversations = kept;
        return true;
      }),
  },
  {
    name: "list-repo-agent-oldest-first",
    area: "meaning",
    description:
      'List conversations: "ordered newest activity first". The repository-backed agent\'s list comes from ' +
      "its own index, read in insertion order: oldest first.",
    breaks: [],
    outsideRound: 8,
    onResponse: (call, res) => {
      if (call.route.agent !== DEMO.repoAgent) return undefined;
      return editJson(call, res, "list", (body) => {
        if (!Array.isArray(body?.conversations) || body.conversations.length < 2) return false;
        body.conversations = [...body.conversations].sort(byActivity).reverse();
        return true;
      });
    },
  },
  {
    name: "list-since-future-returns-all",
    area: "meaning",
    description:
      "List conversations, query `since` (ISO 8601): only conversations with activity since then. A `since` " +
      "in the future is clamped to nothing (treated as unset) by this deployment, so it lists everything " +
      "instead of nothing.",
    breaks: [],
    outsideRound: 8,
    onRequest: (call) => {
      const query = listQuery(call);
      const since = query?.get("since");
      if (!query || !since || !(Date.parse(since) > Date.now())) return undefined;
      query.delete("since");
      setQuery(call, query);
      return undefined;
    },
  },
  {
    name: "routed-conversation-listed-under-default-agent",
    area: "consistency",
    description:
      "Model-routed send: the agent is selected by `model`; a conversation belongs to one agent and is listed " +
      "on that agent's conversations route. A conversation created by a routed send to another agent is " +
      "indexed under the workspace's default agent: listed there, missing from its own agent's list.",
    breaks: [],
    outsideRound: 8,
    onResponse: async (call, res, tools) => {
      if (call.route.kind === "routed" && isEventStream(res)) {
        const agent = sendAgent(call);
        const id = res.headers["x-conversation-id"];
        const fresh = call.conversationId === undefined || call.conversationId === id;
        if (id && agent && agent !== DEMO.defaultAgent && DEMO_AGENTS.includes(agent) && fresh)
          bag<Json>(tools, "routedCreated").set(id, { agent, key: call.key });
        return undefined;
      }
      if (!onlyParams(call, ["limit"]) || res.status !== 200) return undefined;
      const created = [...bag<Json>(tools, "routedCreated")];
      if (call.route.agent === DEMO.defaultAgent) {
        const extra: Json[] = [];
        for (const [id, c] of created) {
          if (c.key !== call.key) continue;
          const row = await fetchConversation(tools, c.agent, id, call.key);
          if (row) extra.push(row);
        }
        return extra.length > 0 ? mergeIntoList(call, res, extra) : undefined;
      }
      const mine = new Set(created.filter(([, c]) => c.agent === call.route.agent).map(([id]) => id));
      return editJson(call, res, "list", (body) => {
        if (!Array.isArray(body?.conversations)) return false;
        const kept = body.conversations.filter((c: Json) => !mine.has(c?.id));
        if (kept.length === body.conversations.length) return false;
        body.conversations = kept;
        return true;
      });
    },
  },
];

export const outsideMutations8: Mutation[] = [
  ...sendRows,
  ...attachmentRows,
  ...statusRows,
  ...streamRows,
  ...memoryRows,
  ...fieldRows,
  ...visibilityRows,
  ...listRows,
];
