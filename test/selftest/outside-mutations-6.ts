/**
 * Outside round 6: breakages written from the API's text alone, by someone who had not read the checks (nor
 * the model, the explorer or the sweeps), each a fault a real deployment could have. Like rounds 4 and 5 they
 * aim at what a suite that exercises each rule under one combination misses: a rule broken under one agent
 * kind, key role, route, turn depth or input shape only; a field of the right type holding a wrong value
 * (timestamps, counts, ids, titles, flags, usage, stop reasons, authors); state that goes wrong across time
 * (deletes then recreations, forks then reads of parent and child, shares set twice, session pointers after
 * empty turns); which status wins when two apply; list filters combined; what a stream's events mean. Each
 * row cites the API section whose MUST or SHOULD it departs from.
 *
 * No row names a check: `breaks` stays empty and `outsideRound` is set, so the harness judges each row as
 * `agent-api check` judges a deployment (caught = any MUST failure other than the two stream-timing checks
 * every held stream fails; see harness.ts). `npm run mutation-score:catalogue` runs them all, `npm test` the
 * `sample`.
 *
 * The deployment these rows simulate knows its own agents, keys, models and instructions, so a fault "on the
 * storage-backed agent only" or "for another workspace's key" names the demo's; who owns a conversation comes
 * from the proxy's ledger, and what a conversation's turns were (prompts, replies, empty turns, forks) from
 * the traffic the row has seen. A row changes an answer only where its fault applies: an answer it would
 * leave as it was goes through untouched.
 */
import {
  DEMO_ADMIN_KEY,
  DEMO_MEMBER_KEY,
  DEMO_VIEWER_KEY,
  OTHER_ADMIN_KEY,
} from "../../reference-server/demo/workspace.ts";
import { CONVERSATION_CARRIERS } from "./conversation-rewrites.ts";
import {
  attachmentsOf,
  callerIsNotOwner,
  conversationPath,
  DEMO,
  DEMO_AGENTS,
  editSend,
  forkBody,
  INSTRUCTIONS,
  is2xx,
  isSendPost,
  listQuery,
  newestUser,
  promptText,
  sendAgent,
  sendBody,
  setQuery,
  throughAgent,
  usageOf,
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
  parseSse,
  type SseEvent,
  serialiseSse,
  withJson,
} from "./proxy-calls.ts";

/** The keys of the demo workspace that work (the revoked one answers 401 everywhere). */
const DEMO_KEYS: readonly string[] = [DEMO_ADMIN_KEY, DEMO_MEMBER_KEY, DEMO_VIEWER_KEY];

/** The models' display names, as the deployment holds them. */
const DISPLAY_NAMES: Record<string, string> = { "demo-small": "Demo Small", "demo-large": "Demo Large" };

const CHANNEL_OWNED = ["SLACK", "EMAIL"];

/**
 * Rows the whole suite let pass, explorer off, both before the suite's change for issue 29 (d29be05, 38 of the
 * 76 caught) and after it (53 caught): left failing for the suite's authors, who clear the marker when a change
 * of theirs catches the row.
 */
const HELD = "outside round 6, before and after the suite's change";

/** The conversation is another user's on the agent of the path (its 404 is "not yours", not "not here"). */
function othersOnThisAgent(call: ProxyCall, tools: ProxyTools): boolean {
  const id = call.conversationId;
  if (id === undefined || !callerIsNotOwner(call, tools, id)) return false;
  const agent = call.route.kind === "routed" ? sendAgent(call) : call.route.agent;
  return tools.ledger.conversations.get(id)?.agent === agent;
}

/** A title as a deployment derives one from a text (the first line, cut). */
const titleFrom = (text: string) => text.split("\n")[0].slice(0, 80);

function replyOf(events: SseEvent[]): string {
  return events
    .filter((e) => e.event === "content_block_delta" && e.data?.delta?.type === "text_delta")
    .map((e) => String(e.data.delta.text ?? ""))
    .join("");
}

/** The code word a prompt asks the agent to remember, if any. */
function codeWord(prompt: string): string | undefined {
  return /Remember this code word:\s*["'`]?([A-Za-z0-9_-]+)/i.exec(prompt)?.[1];
}

const sameIds = (a: Json[], b: Json[]) =>
  a.length === b.length && a.every((c: Json, i: number) => c?.id === b[i]?.id);

// ---------------------------------------------------------------------------------------------------------
// Rewriting answers: only where something changes (an answer left as it was goes through as it came).

/** Edits the conversation objects of the answers of the routes named (all three when omitted). */
function rewriteConversations(
  call: ProxyCall,
  res: ProxyResponse,
  tools: ProxyTools,
  routes: string[] | undefined,
  edit: (c: Json, call: ProxyCall, tools: ProxyTools) => void,
): ProxyResponse | undefined {
  if (res.status !== 200 || call.method !== "GET") return undefined;
  const kind = call.route.kind;
  if (routes && !routes.includes(kind)) return undefined;
  const carrier = CONVERSATION_CARRIERS[kind];
  if (!carrier) return undefined;
  const body = jsonOf(res);
  let changed = false;
  for (const c of carrier(body)) {
    if (!c || typeof c !== "object") continue;
    const before = JSON.stringify(c);
    edit(c, call, tools);
    if (JSON.stringify(c) !== before) changed = true;
  }
  return changed ? withJson(res, body) : undefined;
}

function conversationsOn(
  routes: string[] | undefined,
  edit: (c: Json, call: ProxyCall, tools: ProxyTools) => void,
) {
  return (call: ProxyCall, res: ProxyResponse, tools: ProxyTools) =>
    rewriteConversations(call, res, tools, routes, edit);
}

/** Edits a transcript answer; `edit` says whether it changed anything. */
function editTranscript(call: ProxyCall, res: ProxyResponse, edit: (body: Json) => boolean) {
  if (call.route.kind !== "transcript" || call.method !== "GET" || res.status !== 200) return undefined;
  const body = jsonOf(res);
  if (!Array.isArray(body?.messages)) return undefined;
  return edit(body) ? withJson(res, body) : undefined;
}

/** Edits a list answer's conversations; `edit` returns the new list, or undefined for no change. */
function editList(call: ProxyCall, res: ProxyResponse, edit: (list: Json[]) => Json[] | undefined) {
  if (call.route.kind !== "list" || call.method !== "GET" || res.status !== 200) return undefined;
  const body = jsonOf(res);
  if (!Array.isArray(body?.conversations)) return undefined;
  const out = edit(body.conversations.slice());
  if (!out) return undefined;
  const ids = (l: Json[]) => JSON.stringify(l);
  if (ids(out) === ids(body.conversations)) return undefined;
  body.conversations = out;
  return withJson(res, body);
}

/** Edits a send's buffered event stream; `edit` returns the events to send, or undefined for no change. */
function rewriteStream(res: ProxyResponse, edit: (events: SseEvent[]) => SseEvent[] | undefined) {
  if (!isEventStream(res)) return undefined;
  const events = parseSse(res.body.toString("utf8"));
  const out = edit(events);
  return out ? { ...res, body: Buffer.from(serialiseSse(out)) } : undefined;
}

/** Maps the text of every `text_delta`; returns what changed, as (before, after) pairs. */
function mapTextDeltas(events: SseEvent[], fn: (text: string) => string): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  for (const e of events) {
    if (e.event !== "content_block_delta" || e.data?.delta?.type !== "text_delta") continue;
    if (typeof e.data.delta.text !== "string") continue;
    const to = fn(e.data.delta.text);
    if (to !== e.data.delta.text) {
      pairs.push([e.data.delta.text, to]);
      e.data.delta.text = to;
    }
  }
  return pairs;
}

/** Keeps the first `keep` characters of the turn's text. */
function cutText(events: SseEvent[], keep: number): Array<[string, string]> {
  let left = Math.max(0, keep);
  return mapTextDeltas(events, (text) => {
    const out = text.slice(0, Math.max(0, left));
    left -= text.length;
    return out;
  });
}

/** Remembers that a reply of the conversation was stored as `to` (the deployment's transcript says so too). */
function noteReplies(tools: ProxyTools, id: string, pairs: Array<[string, string]>): void {
  const all: Array<[string, string]> = tools.state.get(`replies:${id}`) ?? [];
  all.push(...pairs);
  tools.state.set(`replies:${id}`, all);
}

/** A transcript whose assistant texts are the ones the deployment streamed (see noteReplies). */
function transcriptWithReplies(call: ProxyCall, res: ProxyResponse, tools: ProxyTools) {
  const pairs: Array<[string, string]> = tools.state.get(`replies:${call.route.id}`) ?? [];
  if (pairs.length === 0) return undefined;
  return editTranscript(call, res, (body) => {
    let changed = false;
    for (const m of body.messages) {
      if (m?.role !== "assistant" || !Array.isArray(m.content)) continue;
      for (const b of m.content) {
        if (b?.type !== "text" || typeof b.text !== "string") continue;
        const pair = pairs.find(([from]) => from === b.text);
        if (pair) {
          b.text = pair[1];
          changed = true;
        }
      }
    }
    return changed;
  });
}

// ---------------------------------------------------------------------------------------------------------
// What a row learns from the traffic: each conversation's turns as it saw them, and the forks it saw made.

interface Turn {
  prompt: string;
  reply: string;
  thinking: string;
  /** The turn produced no block at all. */
  empty: boolean;
  /** The newest user message's content came as a string (not text blocks). */
  asString: boolean;
  nonText: Json[];
  /** The elements of `messages` before the newest user element (history a caller replayed). */
  replayed: Json[];
  word?: string;
}

interface Thread {
  agent?: string;
  /** The row saw the send that created it (not a fork child, not seeded). */
  created: boolean;
  turns: Turn[];
}

interface ForkSeen {
  parent: string;
  at: number;
  agent?: string;
}

function threadsOf(tools: ProxyTools): Map<string, Thread> {
  const threads: Map<string, Thread> = tools.state.get("threads") ?? new Map();
  tools.state.set("threads", threads);
  return threads;
}

function forksOf(tools: ProxyTools): Map<string, ForkSeen> {
  const forks: Map<string, ForkSeen> = tools.state.get("forks") ?? new Map();
  tools.state.set("forks", forks);
  return forks;
}

/**
 * Learns from an answered send (which conversation, what was asked, what came back), fork (child → parent)
 * or delete (the id is free again). Returns what it learned of a send; rows call it once per answer.
 */
function learn(
  call: ProxyCall,
  res: ProxyResponse,
  tools: ProxyTools,
): { id: string; thread: Thread; turn: Turn } | undefined {
  const route = call.route;
  if (route.kind === "fork" && call.method === "POST" && is2xx(res) && route.id) {
    const result = jsonOf(res);
    if (typeof result?.conversation_id === "string")
      forksOf(tools).set(result.conversation_id, {
        parent: route.id,
        at: typeof result.forked_at_turn === "number" ? result.forked_at_turn : 0,
        agent: route.agent,
      });
    return undefined;
  }
  if (route.kind === "conversation" && call.method === "DELETE" && res.status === 204 && route.id) {
    threadsOf(tools).delete(route.id);
    forksOf(tools).delete(route.id);
    return undefined;
  }
  const body = sendBody(call);
  const id = res.headers["x-conversation-id"];
  if (!body || !isEventStream(res) || !id) return undefined;
  const events = parseSse(res.body.toString("utf8"));
  const user = newestUser(body);
  const messages: Json[] = Array.isArray(body.messages) ? body.messages : [];
  const at = messages.lastIndexOf(user);
  const prompt = promptText(user);
  const turn: Turn = {
    prompt,
    reply: replyOf(events),
    thinking: events
      .filter((e) => e.event === "content_block_delta" && e.data?.delta?.type === "thinking_delta")
      .map((e) => String(e.data.delta.thinking ?? ""))
      .join(""),
    empty: !events.some((e) => e.event === "content_block_start"),
    asString: typeof user?.content === "string",
    nonText: Array.isArray(user?.content) ? user.content.filter((b: Json) => b?.type !== "text") : [],
    replayed:
      at > 0 ? messages.slice(0, at).filter((m: Json) => m?.role === "user" || m?.role === "assistant") : [],
    word: codeWord(prompt),
  };
  const threads = threadsOf(tools);
  let thread = threads.get(id);
  if (!thread) {
    thread = { agent: sendAgent(call), created: !forksOf(tools).has(id), turns: [] };
    threads.set(id, thread);
  }
  thread.turns.push(turn);
  return { id, thread, turn };
}

/** A send that resumes a conversation the row already saw a turn of (turn depth 2 or more). */
function resumesSeen(call: ProxyCall, tools: ProxyTools): Thread | undefined {
  const id = sendBody(call)?.metadata?.conversation_id;
  return typeof id === "string" ? threadsOf(tools).get(id) : undefined;
}

/** The user messages of a transcript that stand for turns (compaction notices left out). */
const turnUsers = (body: Json): Json[] =>
  body.messages.filter((m: Json) => m?.role === "user" && !m.is_compact_summary);

/** The transcript's turns lined up with the turns the row saw, when it saw them all (else undefined). */
function seenTurns(call: ProxyCall, body: Json, tools: ProxyTools): Turn[] | undefined {
  const id = call.route.id;
  const thread = id === undefined ? undefined : threadsOf(tools).get(id);
  if (!thread?.created || body.conversation?.parent_conversation_id) return undefined;
  return turnUsers(body).length === thread.turns.length ? thread.turns : undefined;
}

/** The same list read with another query (through the deployment, not the row). */
async function listWith(
  call: ProxyCall,
  tools: ProxyTools,
  query: URLSearchParams,
): Promise<Json[] | undefined> {
  const again = call.clone();
  setQuery(again, query);
  const answer = await tools.forward(again);
  const list = jsonOf(answer)?.conversations;
  return answer.status === 200 && Array.isArray(list) ? list : undefined;
}

// ---------------------------------------------------------------------------------------------------------

const sendMutations: Mutation[] = [
  {
    name: "routed-automation-ignored",
    area: "send",
    description:
      "Model-routed send: same body and behaviour as send-message, whose `metadata.automation` makes the automation's model the turn's default: a deployment whose routed send drops `automation` (the agent's default model runs)",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => call.route.kind === "routed" && typeof b.metadata?.automation === "string",
        (b) => {
          delete b.metadata.automation;
        },
      ),
  },
  {
    name: "system-placed-before-instructions",
    area: "send",
    description:
      "Send a message, `system`: appended to the agent's own instructions: a deployment that puts it before them (the agent repeats the caller's text first, then its instructions)",
    breaks: [],
    knownGap: HELD,
    onResponse: (call, res, tools) => {
      if (call.route.kind === "transcript") return transcriptWithReplies(call, res, tools);
      const system = sendBody(call)?.system;
      const agent = sendAgent(call);
      const own = agent ? INSTRUCTIONS[agent] : undefined;
      const id = res.headers["x-conversation-id"];
      if (typeof system !== "string" || system.trim() === "" || !own || !id) return undefined;
      return rewriteStream(res, (events) => {
        const pairs = mapTextDeltas(events, (text) => {
          const i = text.indexOf(own);
          const j = i < 0 ? -1 : text.indexOf(system, i + own.length);
          if (i < 0 || j < 0) return text;
          const between = text.slice(i + own.length, j);
          return `${text.slice(0, i)}${system}${between}${own}${text.slice(j + system.length)}`;
        });
        if (pairs.length === 0) return undefined;
        noteReplies(tools, id, pairs);
        return events;
      });
    },
  },
  {
    name: "text-blocks-joined-newest-first",
    area: "send",
    description:
      "Send a message: `content` as text blocks is joined with blank lines, in order: a deployment that joins them last block first",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => {
          const content = newestUser(b)?.content;
          return Array.isArray(content) && content.filter((x: Json) => x?.type === "text").length >= 2;
        },
        (b) => {
          const user = newestUser(b);
          const texts = user.content.filter((x: Json) => x?.type === "text").reverse();
          let k = 0;
          user.content = user.content.map((x: Json) => (x?.type === "text" ? texts[k++] : x));
        },
      ),
  },
  {
    name: "attachments-enable-tool-streaming",
    area: "send",
    description:
      "Send a message, `metadata.stream_tool_calls`: default `false`, tool blocks only when it is true: a deployment that streams tool calls on any turn that carries attachments",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => (attachmentsOf(b)?.length ?? 0) > 0 && b.metadata.stream_tool_calls === undefined,
        (b) => {
          b.metadata.stream_tool_calls = true;
        },
      ),
  },
  {
    name: "read-only-false-ignored-with-attachments",
    area: "send",
    description:
      "Send a message, `read_only` false: a turn that changes any file ends by committing and pushing (attachments are never committed): a deployment that commits nothing at all when the turn carries attachments",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) =>
          sendAgent(call) === DEMO.repoAgent &&
          b.metadata?.read_only === false &&
          (attachmentsOf(b)?.length ?? 0) > 0,
        (b) => {
          b.metadata.read_only = true;
        },
      ),
  },
  {
    name: "isolated-turn-drops-attachments",
    area: "silent",
    description:
      "Send a message, `metadata.isolated` (no repo clone, no workspace files) and `metadata.attachments` (per-turn files written to `.uploads/`): a deployment whose isolated sandbox receives no attachments",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => b.metadata?.isolated === true && (attachmentsOf(b)?.length ?? 0) > 0,
        (b) => {
          delete b.metadata.attachments;
        },
      ),
  },
  {
    name: "attachment-data-url-accepted",
    area: "silent",
    description:
      "Attachment, `dataBase64`: base64 only, no `data:` prefix; malformed entries are dropped: a deployment that strips a `data:` URL prefix and writes the file",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) =>
          (attachmentsOf(b) ?? []).some(
            (a: Json) =>
              typeof a?.dataBase64 === "string" &&
              a.dataBase64.startsWith("data:") &&
              a.dataBase64.includes(","),
          ),
        (b) => {
          for (const a of attachmentsOf(b) ?? [])
            if (typeof a?.dataBase64 === "string" && a.dataBase64.startsWith("data:"))
              a.dataBase64 = a.dataBase64.slice(a.dataBase64.indexOf(",") + 1);
        },
      ),
  },
  {
    name: "temperature-with-top-p-refused",
    area: "status",
    description:
      "Send a message: `temperature`, `top_p` and the messages-API's other fields are accepted and ignored: a deployment that passes the upstream's own rule on and refuses a body carrying both with 400",
    breaks: [],
    onRequest: (call) => {
      const body = sendBody(call);
      if (body && body.temperature !== undefined && body.top_p !== undefined)
        return errorResponse(
          400,
          "invalid_request_error",
          "temperature and top_p cannot both be specified for this model",
        );
    },
  },
  {
    name: "stop-sequences-honoured",
    area: "send",
    description:
      "Send a message: `stop_sequences` is accepted and ignored: a deployment that honours it, cutting the reply at the sequence with stop reason `stop_sequence`",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (call.route.kind === "transcript") return transcriptWithReplies(call, res, tools);
      const stops = sendBody(call)?.stop_sequences;
      const id = res.headers["x-conversation-id"];
      if (!Array.isArray(stops) || !id) return undefined;
      const wanted = stops.filter((s: Json) => typeof s === "string" && s.length > 0) as string[];
      if (wanted.length === 0) return undefined;
      return rewriteStream(res, (events) => {
        const text = replyOf(events);
        let at = -1;
        let hit = "";
        for (const s of wanted) {
          const i = text.indexOf(s);
          if (i >= 0 && (at < 0 || i < at)) {
            at = i;
            hit = s;
          }
        }
        if (at < 0) return undefined;
        noteReplies(tools, id, cutText(events, at));
        for (const e of events)
          if (e.event === "message_delta" && e.data?.delta) {
            e.data.delta.stop_reason = "stop_sequence";
            e.data.delta.stop_sequence = hit;
          }
        return events;
      });
    },
  },
  {
    name: "fork-model-ignored",
    area: "send",
    description:
      "Fork a conversation, `model`: recorded on the child as a default for its future turns: a deployment that ignores it (the child's turns run the inherited model)",
    breaks: [],
    onRequest: (call) => {
      const body = forkBody(call);
      if (!body || body.model === undefined) return;
      delete body.model;
      call.setJson(body);
      return undefined;
    },
  },
  {
    name: "fork-automation-ignored",
    area: "send",
    description:
      "Fork a conversation, `automation`: recorded on the child as a default for its future turns: a deployment that ignores it",
    breaks: [],
    onRequest: (call) => {
      const body = forkBody(call);
      if (!body || body.automation === undefined) return;
      delete body.automation;
      call.setJson(body);
      return undefined;
    },
  },
  {
    name: "fork-requested-id-ignored",
    area: "state",
    description:
      "Fork a conversation, `conversation_id`: the id for the child: a deployment that generates one anyway when the asked id is free (the result names the generated id)",
    breaks: [],
    onRequest: async (call, tools) => {
      const body = forkBody(call);
      const agent = call.route.agent;
      if (!body || typeof body.conversation_id !== "string" || !agent) return;
      const probe = await tools.forward(
        ProxyCall.make("GET", conversationPath(agent, body.conversation_id), call.key),
      );
      if (probe.status !== 404) return undefined;
      delete body.conversation_id;
      call.setJson(body);
      return undefined;
    },
  },
  {
    name: "conversation-ids-lowercased",
    area: "state",
    description:
      "Conversation, `id`: any string chosen by the caller, created with that id verbatim: a deployment whose store lowercases ids (reads by the caller's id still work, the ids it answers are lowercased)",
    breaks: [],
    onRequest: (call) => {
      const route = call.route;
      const body = call.json();
      if (isSendPost(call) && typeof body?.metadata?.conversation_id === "string") {
        const id: string = body.metadata.conversation_id;
        if (id !== id.toLowerCase()) {
          body.metadata.conversation_id = id.toLowerCase();
          call.setJson(body);
        }
      }
      if (route.kind === "fork" && typeof body?.conversation_id === "string") {
        const id: string = body.conversation_id;
        if (id !== id.toLowerCase()) {
          body.conversation_id = id.toLowerCase();
          call.setJson(body);
        }
      }
      if (route.id !== undefined && route.agent && route.id !== route.id.toLowerCase()) {
        const [pathname, query] = call.path.split("?");
        const parts = pathname.split("/");
        parts[5] = encodeURIComponent(route.id.toLowerCase());
        call.path = `${parts.join("/")}${query ? `?${query}` : ""}`;
      }
      return undefined;
    },
  },
];

const statusMutations: Mutation[] = [
  {
    name: "member-send-into-private-403",
    area: "status",
    description:
      "Conversation id resolution: someone else's conversation, not shared, gives 404 (existence never leaked): a deployment whose send-message answers 403 for it",
    breaks: [],
    sample: true,
    onResponse: (call, res, tools) => {
      if (call.route.kind !== "send" || res.status !== 404 || call.key === DEMO_VIEWER_KEY) return undefined;
      if (!othersOnThisAgent(call, tools)) return undefined;
      return errorResponse(403, "permission_error", "This conversation belongs to another member");
    },
  },
  {
    name: "member-fork-of-private-403",
    area: "status",
    description:
      "States and transitions, fork: the caller must be able to read it; another user's unshared conversation gives 404 (Errors): a deployment whose fork answers 403 for it",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (call.route.kind !== "fork" || res.status !== 404 || !othersOnThisAgent(call, tools))
        return undefined;
      return errorResponse(403, "permission_error", "You may not fork this conversation");
    },
  },
  {
    name: "member-compaction-of-private-200",
    area: "status",
    description:
      "Errors: another user's unshared conversation gives 404: a deployment whose last-compaction route answers it (not compacted) without checking who may read it",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (call.route.kind !== "compaction" || call.method !== "GET" || res.status !== 404) return undefined;
      if (!othersOnThisAgent(call, tools)) return undefined;
      return jsonResponse(200, { compacted: false, summary: "" });
    },
  },
  {
    name: "foreign-agent-send-403",
    area: "status",
    description:
      "Authentication 2 / Errors: an agent in another workspace gives 404: a deployment whose send-message answers 403 (the agent exists, the key may not use it)",
    breaks: [],
    onResponse: (call, res) => {
      const agent = call.route.agent;
      if (call.route.kind !== "send" || res.status !== 404 || !agent || call.key === undefined)
        return undefined;
      const foreign =
        call.key === OTHER_ADMIN_KEY
          ? DEMO_AGENTS.includes(agent)
          : agent === DEMO.foreignAgent && [DEMO_ADMIN_KEY, DEMO_MEMBER_KEY].includes(call.key);
      if (!foreign || jsonOf(res)?.message === "Conversation not found") return undefined;
      return errorResponse(403, "permission_error", "This key's workspace cannot use this agent");
    },
  },
  {
    name: "routed-foreign-agent-runs-on-default",
    area: "status",
    description:
      "Model-routed send / Authentication 2: an agent in another workspace gives 404: a deployment whose routed send runs the turn on the key's own workspace's default agent instead",
    breaks: [],
    onResponse: async (call, res, tools) => {
      if (call.route.kind !== "routed" || res.status !== 404 || call.key === undefined) return undefined;
      const body = sendBody(call);
      const agent = sendAgent(call);
      if (!body || typeof body.model !== "string" || !agent) return undefined;
      if (jsonOf(res)?.message === "Conversation not found") return undefined;
      const home = call.key === OTHER_ADMIN_KEY ? DEMO.foreignAgent : DEMO.defaultAgent;
      const foreign =
        call.key === OTHER_ADMIN_KEY ? DEMO_AGENTS.includes(agent) : agent === DEMO.foreignAgent;
      if (!foreign || !DEMO_KEYS.concat(OTHER_ADMIN_KEY).includes(call.key)) return undefined;
      const cut = body.model.lastIndexOf("--");
      const again = call.clone();
      again.setJson({ ...body, model: cut < 0 ? home : `${body.model.slice(0, cut + 2)}${home}` });
      const answer = await tools.forward(again);
      return isEventStream(answer) ? answer : undefined;
    },
  },
  {
    name: "member-send-into-shared-auto-forks",
    area: "status",
    description:
      "Conversation id resolution: someone else's conversation shared with the workspace gives 403 (fork instead): a deployment that forks it for the caller and runs the turn there, answering 200",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const agent = call.route.agent;
      const id = call.conversationId;
      const body = sendBody(call);
      if (call.route.kind !== "send" || res.status !== 403 || !agent || id === undefined || !body) return;
      if (call.key === DEMO_VIEWER_KEY || !othersOnThisAgent(call, tools)) return undefined;
      const fork = await tools.forward(
        ProxyCall.make("POST", `${conversationPath(agent, id)}/fork`, call.key, {}),
      );
      const child = jsonOf(fork)?.conversation_id;
      if (!is2xx(fork) || typeof child !== "string") return undefined;
      const again = call.clone();
      again.setJson({ ...body, metadata: { ...body.metadata, conversation_id: child } });
      const answer = await tools.forward(again);
      return isEventStream(answer) ? answer : undefined;
    },
  },
  {
    name: "fork-taken-id-replaced-by-generated",
    area: "status",
    description:
      "Fork a conversation / Errors: a `conversation_id` that is already taken gives 409: a deployment that generates another id for the child instead and answers the fork result",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const body = forkBody(call);
      if (!body || res.status !== 409 || typeof body.conversation_id !== "string") return undefined;
      const again = call.clone();
      const rest = { ...body };
      delete rest.conversation_id;
      again.setJson(rest);
      const answer = await tools.forward(again);
      return is2xx(answer) ? answer : undefined;
    },
  },
  {
    name: "flow-unknown-key-403",
    area: "status",
    description:
      "Authentication 1 and 4 / Invoke a deployed flow: an unrecognized key gives 401: a deployment whose flow endpoint answers 403 for a key it does not know",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "flow" || res.status !== 401 || call.key === undefined) return undefined;
      return errorResponse(403, "permission_error", "This key may not invoke the flow");
    },
  },
  {
    name: "flow-input-vars-ignored",
    area: "send",
    description:
      "Invoke a deployed flow: the body's `input_vars` are the flow's named inputs: a deployment that runs the flow with every input empty",
    breaks: [],
    knownGap: HELD,
    onRequest: (call) => {
      if (call.route.kind !== "flow") return;
      const body = call.json();
      const vars = body?.input_vars;
      if (!vars || typeof vars !== "object" || Array.isArray(vars)) return;
      const names = Object.keys(vars).filter((k) => typeof vars[k] === "string" && vars[k] !== "");
      if (names.length === 0) return;
      for (const k of names) vars[k] = "";
      call.setJson(body);
      return undefined;
    },
  },
];

/** A row that serves a recreated id (deleted, then created again) with one field of the deleted one. */
function keepsDeletedField(field: "title" | "created_at"): Pick<Mutation, "onRequest" | "onResponse"> {
  return {
    onRequest: async (call, tools) => {
      const route = call.route;
      if (route.kind !== "conversation" || call.method !== "DELETE" || !route.agent || !route.id) return;
      const before = await tools.forward(
        ProxyCall.make("GET", conversationPath(route.agent, route.id), call.key),
      );
      const c = jsonOf(before)?.conversation;
      if (before.status === 200 && c) tools.state.set(`before:${route.id}`, c);
      return undefined;
    },
    onResponse: (call, res, tools) => {
      const route = call.route;
      if (route.kind === "conversation" && call.method === "DELETE") {
        if (res.status === 204 && tools.state.has(`before:${route.id}`))
          tools.state.set(`gone:${route.id}`, tools.state.get(`before:${route.id}`));
        return undefined;
      }
      const named = isSendPost(call)
        ? sendBody(call)?.metadata?.conversation_id
        : forkBody(call)?.conversation_id;
      if (isSendPost(call) || route.kind === "fork") {
        const made = isSendPost(call) ? isEventStream(res) : is2xx(res);
        if (made && typeof named === "string" && tools.state.has(`gone:${named}`)) {
          tools.state.set(`recreated:${named}`, tools.state.get(`gone:${named}`));
          tools.state.delete(`gone:${named}`);
        }
        return undefined;
      }
      return rewriteConversations(call, res, tools, undefined, (c) => {
        const old = tools.state.get(`recreated:${c.id}`);
        if (typeof old?.[field] === "string") c[field] = old[field];
      });
    },
  };
}

const stateMutations: Mutation[] = [
  {
    name: "recreated-id-keeps-old-title",
    area: "state",
    description:
      "Delete a conversation (removed) / Conversation id resolution (an unknown id is created with that id) / `title`: derived from the first prompt at creation: a deployment whose id, sent again after a delete, carries the deleted conversation's title",
    breaks: [],
    ...keepsDeletedField("title"),
  },
  {
    name: "recreated-id-keeps-created-at",
    area: "state",
    description:
      "Delete a conversation (removed) / Conversation id resolution: a send with the deleted id creates a new conversation: a deployment whose new conversation carries the deleted one's `created_at`",
    breaks: [],
    ...keepsDeletedField("created_at"),
  },
  {
    name: "unshare-ignored-after-member-fork",
    area: "state",
    description:
      'Toggle sharing / States and transitions: `{"shared": false}` by the owner makes it private again (a fork leaves the parent unchanged): a deployment that keeps a conversation shared once a member has forked it (the share is pinned by the child)',
    breaks: [],
    onResponse: async (call, res, tools) => {
      const route = call.route;
      if (route.kind === "fork" && call.method === "POST" && is2xx(res) && route.id) {
        if (callerIsNotOwner(call, tools)) tools.state.set(`pinned:${route.id}`, true);
        return undefined;
      }
      if (route.kind !== "conversation" || call.method !== "POST" || !is2xx(res) || !route.agent || !route.id)
        return undefined;
      if (call.json()?.shared !== false || !tools.state.get(`pinned:${route.id}`)) return undefined;
      await tools.forward(
        ProxyCall.make("POST", conversationPath(route.agent, route.id), call.key, { shared: true }),
      );
      return undefined;
    },
  },
  {
    name: "owner-turn-unshares",
    area: "state",
    description:
      "States and transitions: a shared conversation stays shared until its owner sets `shared` false: a deployment where the owner's next turn makes it private again",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const route = call.route;
      if (route.kind === "conversation" && call.method === "POST" && is2xx(res) && route.id) {
        const wanted = call.json()?.shared;
        if (typeof wanted === "boolean") tools.state.set(`shared:${route.id}`, wanted);
        return undefined;
      }
      const id = sendBody(call)?.metadata?.conversation_id;
      const agent = sendAgent(call);
      if (!isEventStream(res) || typeof id !== "string" || !agent) return undefined;
      if (tools.state.get(`shared:${id}`) !== true || tools.ledger.conversations.get(id)?.owner !== call.key)
        return undefined;
      await tools.forward(ProxyCall.make("POST", conversationPath(agent, id), call.key, { shared: false }));
      tools.state.set(`shared:${id}`, false);
      return undefined;
    },
  },
  {
    name: "fork-clears-parent-session-pointer",
    area: "state",
    description:
      "States and transitions, fork: the parent is unchanged: a deployment that hands the parent's session to the child, so the parent's `agent_session_id` reads null until its next turn",
    breaks: [],
    onResponse: (call, res, tools) => {
      const route = call.route;
      if (route.kind === "fork" && call.method === "POST" && is2xx(res) && route.id) {
        tools.state.set(`handed:${route.id}`, true);
        return undefined;
      }
      const id = sendBody(call)?.metadata?.conversation_id;
      if (isSendPost(call)) {
        if (typeof id === "string" && isEventStream(res)) tools.state.delete(`handed:${id}`);
        return undefined;
      }
      return rewriteConversations(call, res, tools, undefined, (c) => {
        if (tools.state.get(`handed:${c.id}`) && c.agent_session_id !== null) c.agent_session_id = null;
      });
    },
  },
  {
    name: "fork-child-title-changes-on-first-turn",
    area: "state",
    description:
      "Conversation, `title`: derived at creation and never changed afterwards: a deployment that re-derives a fork child's title from the prompt of the child's first own turn",
    breaks: [],
    onResponse: (call, res, tools) => {
      const learned = learn(call, res, tools);
      if (learned) {
        if (forksOf(tools).has(learned.id) && !tools.state.has(`childTitle:${learned.id}`))
          tools.state.set(`childTitle:${learned.id}`, titleFrom(learned.turn.prompt));
        return undefined;
      }
      return rewriteConversations(call, res, tools, undefined, (c) => {
        const title = tools.state.get(`childTitle:${c.id}`);
        if (typeof title === "string" && title !== "") c.title = title;
      });
    },
  },
  {
    name: "session-pointer-null-from-third-turn",
    area: "state",
    description:
      "Conversation, `agent_session_id`: non-null once the server recorded a turn with output: a deployment that stops recording it from a conversation's third turn on (reads say null)",
    breaks: [],
    onResponse: conversationsOn(undefined, (c) => {
      if (typeof c.turn_count === "number" && c.turn_count >= 3 && c.agent_session_id !== null)
        c.agent_session_id = null;
    }),
  },
  {
    name: "empty-turn-keeps-session-pointer",
    area: "state",
    description:
      "Conversation, `agent_session_id` / States and transitions: cleared to null when a resumed turn produced no output: a deployment that keeps the previous pointer",
    breaks: [],
    onRequest: async (call, tools) => {
      // The pointer a resumed turn starts from, as the deployment holds it before the turn.
      const id = sendBody(call)?.metadata?.conversation_id;
      const agent = sendAgent(call);
      if (typeof id !== "string" || !agent || !resumesSeen(call, tools)) return undefined;
      const now = await tools.forward(ProxyCall.make("GET", conversationPath(agent, id), call.key));
      const ptr = jsonOf(now)?.conversation?.agent_session_id;
      if (now.status === 200 && typeof ptr === "string") tools.state.set(`ptr:${id}`, ptr);
      return undefined;
    },
    onResponse: (call, res, tools) => {
      const resumed = resumesSeen(call, tools);
      const learned = learn(call, res, tools);
      if (learned) {
        if (resumed && learned.turn.empty) tools.state.set(`keep:${learned.id}`, true);
        else tools.state.delete(`keep:${learned.id}`);
        return undefined;
      }
      return rewriteConversations(call, res, tools, undefined, (c) => {
        if (typeof c.agent_session_id === "string") {
          tools.state.set(`ptr:${c.id}`, c.agent_session_id);
          return;
        }
        const ptr = tools.state.get(`ptr:${c.id}`);
        if (c.agent_session_id === null && tools.state.get(`keep:${c.id}`) && typeof ptr === "string")
          c.agent_session_id = ptr;
      });
    },
  },
  {
    name: "empty-first-turn-records-session",
    area: "state",
    description:
      "Conversation, `agent_session_id`: null until the server has recorded it after a turn with output (Client guidance: a turn with no output legitimately has no session id): a deployment that records a session for a conversation whose only turns produced nothing",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (learn(call, res, tools)) return undefined;
      return rewriteConversations(call, res, tools, undefined, (c) => {
        const thread = threadsOf(tools).get(c.id);
        if (!thread?.created || thread.turns.length === 0 || !thread.turns.every((t) => t.empty)) return;
        if (c.agent_session_id !== null) return;
        const made = tools.state.get(`made:${c.id}`) ?? `ses_${crypto.randomUUID()}`;
        tools.state.set(`made:${c.id}`, made);
        c.agent_session_id = made;
      });
    },
  },
  {
    name: "last-compaction-true-after-empty-turn",
    area: "state",
    description:
      "Get last compaction: `{compacted, summary}` lets a client tell an empty turn from a compaction step: a deployment that reports a compaction when the last turn was merely empty",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (learn(call, res, tools)) return undefined;
      const id = call.route.id;
      if (call.route.kind !== "compaction" || call.method !== "GET" || res.status !== 200 || !id) return;
      const last = threadsOf(tools).get(id)?.turns.at(-1);
      const body = jsonOf(res);
      if (!last?.empty || body?.compacted !== false) return undefined;
      return withJson(res, {
        ...body,
        compacted: true,
        summary: "Summary of earlier conversation: the previous turns were compacted.",
      });
    },
  },
  {
    name: "fork-context-ignores-at-turn",
    area: "state",
    description:
      "States and transitions, fork: the child's first turn answers from parent context up to `at_turn`: a deployment whose child resumes the parent's whole session (it remembers what the parent was told after `at_turn`)",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (call.route.kind === "transcript") return transcriptWithReplies(call, res, tools);
      const named = sendBody(call)?.metadata?.conversation_id;
      const fork = typeof named === "string" ? forksOf(tools).get(named) : undefined;
      const learned = learn(call, res, tools);
      if (!learned || !fork || !/what code word/i.test(learned.turn.prompt)) return undefined;
      if (learned.thread.turns.some((t) => t.word)) return undefined;
      const parent = threadsOf(tools).get(fork.parent);
      if (!parent) return undefined;
      const lastWord = (turns: Turn[]) => turns.filter((t) => t.word).at(-1)?.word;
      const inherited = lastWord(parent.turns.slice(0, fork.at));
      const latest = lastWord(parent.turns);
      if (!inherited || !latest || inherited === latest) return undefined;
      return rewriteStream(res, (events) => {
        const pairs = mapTextDeltas(events, (text) => text.split(inherited).join(latest));
        if (pairs.length === 0) return undefined;
        noteReplies(tools, learned.id, pairs);
        return events;
      });
    },
  },
  {
    name: "deleted-compaction-still-served",
    area: "state",
    description:
      "Delete a conversation: it is removed: a deployment whose last-compaction route keeps answering for the deleted conversation (a cache)",
    breaks: [],
    onRequest: async (call, tools) => {
      const route = call.route;
      if (route.kind !== "conversation" || call.method !== "DELETE" || !route.agent || !route.id) return;
      const before = await tools.forward(
        ProxyCall.make("GET", `${conversationPath(route.agent, route.id)}/last-compaction`, call.key),
      );
      if (before.status === 200) tools.state.set(`compaction:${route.agent}:${route.id}`, before);
      return undefined;
    },
    onResponse: (call, res, tools) => {
      const route = call.route;
      if (route.kind === "conversation" && call.method === "DELETE" && res.status === 204)
        tools.state.set(`gone:${route.agent}:${route.id}`, true);
      if (isSendPost(call) && isEventStream(res)) {
        const id = res.headers["x-conversation-id"];
        const agent = sendAgent(call);
        if (id && agent) tools.state.delete(`gone:${agent}:${id}`);
      }
      if (route.kind !== "compaction" || res.status !== 404) return undefined;
      if (!tools.state.get(`gone:${route.agent}:${route.id}`)) return undefined;
      return tools.state.get(`compaction:${route.agent}:${route.id}`);
    },
  },
];

const valueMutations: Mutation[] = [
  {
    name: "list-timestamps-without-zone",
    area: "shapes",
    description:
      "Conventions: timestamps are ISO 8601 strings in UTC with milliseconds: a deployment whose list writes them as local times without the `Z`",
    breaks: [],
    sample: true,
    onResponse: conversationsOn(["list"], (c) => {
      for (const field of ["created_at", "updated_at"])
        if (typeof c[field] === "string") c[field] = c[field].replace(/Z$/, "");
    }),
  },
  {
    name: "updated-at-is-read-time",
    area: "consistency",
    description:
      "Conversation, `updated_at` (the newest activity the list orders by): a deployment whose single fetch touches the row, so it says the time of the read",
    breaks: [],
    onResponse: conversationsOn(["conversation"], (c) => {
      if (typeof c.updated_at === "string") c.updated_at = new Date().toISOString();
    }),
  },
  {
    name: "fork-child-turn-count-ignores-at-turn",
    area: "consistency",
    description:
      "Fork a conversation, `at_turn`: copies history up to this turn: a deployment whose child's `turn_count` counts every turn of the parent",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const route = call.route;
      if (route.kind === "fork" && call.method === "POST" && is2xx(res) && route.agent && route.id) {
        const result = jsonOf(res);
        if (typeof result?.conversation_id !== "string" || typeof result.forked_at_turn !== "number") return;
        const parent = await tools.forward(
          ProxyCall.make("GET", conversationPath(route.agent, route.id), call.key),
        );
        const count = jsonOf(parent)?.conversation?.turn_count;
        if (typeof count === "number" && count > result.forked_at_turn)
          tools.state.set(`extra:${result.conversation_id}`, count - result.forked_at_turn);
        return undefined;
      }
      return rewriteConversations(call, res, tools, undefined, (c) => {
        const extra = tools.state.get(`extra:${c.id}`);
        if (typeof extra === "number" && typeof c.turn_count === "number") c.turn_count += extra;
      });
    },
  },
  {
    name: "title-from-first-reply",
    area: "consistency",
    description:
      "Conversation, `title`: derived from the first prompt: a deployment that derives it from the agent's first reply",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (learn(call, res, tools)) return undefined;
      return rewriteConversations(call, res, tools, undefined, (c) => {
        const thread = threadsOf(tools).get(c.id);
        const reply = thread?.created ? thread.turns[0]?.reply : undefined;
        if (reply && !c.parent_conversation_id) c.title = titleFrom(reply);
      });
    },
  },
  {
    name: "turn-count-skips-empty-turns",
    area: "consistency",
    description:
      "Conversation, `turn_count`: a turn that produced no output is still a turn (it even clears the session pointer): a deployment that does not count it",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (learn(call, res, tools)) return undefined;
      return rewriteConversations(call, res, tools, undefined, (c) => {
        const empties = threadsOf(tools)
          .get(c.id)
          ?.turns.filter((t) => t.empty).length;
        if (empties && typeof c.turn_count === "number") c.turn_count = Math.max(0, c.turn_count - empties);
      });
    },
  },
  {
    name: "channel-owned-is-owner-true-for-admin",
    area: "consistency",
    description:
      "Conversation, `is_owner`: whether the caller owns it; a conversation owned by a chat channel or e-mail is nobody's: a deployment that says true to an admin key",
    breaks: [],
    onResponse: conversationsOn(undefined, (c, call) => {
      if (call.key === DEMO_ADMIN_KEY && CHANNEL_OWNED.includes(c.channel) && c.is_owner === false)
        c.is_owner = true;
    }),
  },
  {
    name: "member-sees-shared-false",
    area: "consistency",
    description:
      "Conversation, `shared`: true once its owner shared it: a deployment whose reads by another member say false (the flag as seen from the reader's own conversations)",
    breaks: [],
    onResponse: conversationsOn(undefined, (c, call, tools) => {
      if (c.shared === true && callerIsNotOwner(call, tools, c.id)) c.shared = false;
    }),
  },
  {
    name: "models-has-more-true",
    area: "consistency",
    description:
      "List models: `{data, has_more}`: a deployment that says `has_more` true although the list holds every model",
    breaks: [],
    knownGap: HELD,
    onResponse: (call, res) => {
      if (call.route.kind !== "models" || res.status !== 200) return undefined;
      const body = jsonOf(res);
      if (!Array.isArray(body?.data) || body.has_more !== false) return undefined;
      return withJson(res, { ...body, has_more: true });
    },
  },
  {
    name: "storage-agent-lists-workspace-models",
    area: "consistency",
    description:
      "Model entry, `id`: a model usable in the `model` field of this agent: a deployment whose storage-backed agent lists every model of the workspace, its own or not",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "models" || res.status !== 200 || call.route.agent !== DEMO.storageAgent)
        return;
      const body = jsonOf(res);
      if (!Array.isArray(body?.data)) return undefined;
      const have = new Set(body.data.map((m: Json) => m?.id));
      const extra = Object.entries(DISPLAY_NAMES)
        .filter(([id]) => !have.has(id))
        .map(([id, display_name]) => ({ type: "model", id, display_name }));
      if (extra.length === 0) return undefined;
      return withJson(res, { ...body, data: [...body.data, ...extra] });
    },
  },
  {
    name: "member-fork-child-turns-authored-by-parent-owner",
    area: "consistency",
    description:
      "Transcript, message object: `author_user_id` and `author_name` of a user message say who sent it: a deployment whose member's fork child credits the member's own turns to the parent's owner",
    breaks: [],
    onResponse: (call, res, tools) =>
      editTranscript(call, res, (body) => {
        const id = call.route.id;
        if (id === undefined || tools.ledger.conversations.get(id)?.owner !== DEMO_MEMBER_KEY) return false;
        if (!body.conversation?.parent_conversation_id) return false;
        const users = turnUsers(body);
        const first = users[0];
        let changed = false;
        for (const m of users.slice(1)) {
          if (m.author_user_id === first.author_user_id && m.author_name === first.author_name) continue;
          m.author_user_id = first.author_user_id;
          m.author_name = first.author_name;
          changed = true;
        }
        return changed;
      }),
  },
  {
    name: "member-transcript-author-ids-blank",
    area: "consistency",
    description:
      "Transcript, message object: `author_user_id` is present on user messages: a deployment whose transcripts read with a member's key carry it as an empty string",
    breaks: [],
    onResponse: (call, res) =>
      editTranscript(call, res, (body) => {
        if (call.key !== DEMO_MEMBER_KEY) return false;
        let changed = false;
        for (const m of body.messages)
          if (m?.role === "user" && typeof m.author_user_id === "string" && m.author_user_id !== "") {
            m.author_user_id = "";
            changed = true;
          }
        return changed;
      }),
  },
];

const transcriptMutations: Mutation[] = [
  {
    name: "transcript-user-content-as-sent-string",
    area: "shapes",
    description:
      'Transcript, message object: `content` is an array of `{type: "text"}` blocks: a deployment that stores a prompt sent as a string as that string',
    breaks: [],
    onResponse: (call, res, tools) => {
      if (learn(call, res, tools)) return undefined;
      return editTranscript(call, res, (body) => {
        const turns = seenTurns(call, body, tools);
        if (!turns?.every((t) => t.asString)) return false;
        let changed = false;
        for (const m of turnUsers(body))
          if (Array.isArray(m.content) && m.content.every((b: Json) => b?.type === "text")) {
            m.content = m.content.map((b: Json) => String(b.text ?? "")).join("\n\n");
            changed = true;
          }
        return changed;
      });
    },
  },
  {
    name: "transcript-keeps-non-text-blocks",
    area: "shapes",
    description:
      'Send a message: non-text blocks are not read; Transcript: `content` holds `{type: "text"}` blocks: a deployment that stores the non-text blocks a caller sent in the user message',
    breaks: [],
    onResponse: (call, res, tools) => {
      if (learn(call, res, tools)) return undefined;
      return editTranscript(call, res, (body) => {
        const turns = seenTurns(call, body, tools);
        if (!turns) return false;
        let changed = false;
        turnUsers(body).forEach((m: Json, k: number) => {
          if (turns[k].nonText.length === 0 || !Array.isArray(m.content)) return;
          m.content = [...m.content, ...turns[k].nonText];
          changed = true;
        });
        return changed;
      });
    },
  },
  {
    name: "transcript-thinking-stored-as-text",
    area: "consistency",
    description:
      "Transcript, message object: `content` holds text blocks (the reply); Events: thinking is a block of its own: a deployment that stores a turn's thinking as a text block of the assistant message",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (learn(call, res, tools)) return undefined;
      return editTranscript(call, res, (body) => {
        const turns = seenTurns(call, body, tools);
        if (!turns) return false;
        const users = turnUsers(body);
        let changed = false;
        users.forEach((u: Json, k: number) => {
          if (!turns[k].thinking) return;
          const from = body.messages.indexOf(u);
          for (let i = from + 1; i < body.messages.length; i++) {
            const m = body.messages[i];
            if (m?.role === "user") break;
            if (m?.role === "assistant" && Array.isArray(m.content)) {
              m.content = [{ type: "text", text: turns[k].thinking }, ...m.content];
              changed = true;
              break;
            }
          }
        });
        return changed;
      });
    },
  },
  {
    name: "transcript-stores-replayed-history",
    area: "consistency",
    description:
      "Rule 1 / Send a message: only the newest user element of `messages` is used, no history is replayed: a deployment that stores the earlier elements a caller sent as turns of the transcript",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (learn(call, res, tools)) return undefined;
      return editTranscript(call, res, (body) => {
        const turns = seenTurns(call, body, tools);
        if (!turns?.some((t) => t.replayed.length > 0)) return false;
        const users = turnUsers(body);
        const out: Json[] = [];
        for (const m of body.messages) {
          const k = users.indexOf(m);
          if (k >= 0)
            for (const r of turns[k].replayed)
              out.push(
                r.role === "user"
                  ? { ...m, content: [{ type: "text", text: promptText(r) }] }
                  : {
                      role: "assistant",
                      content: [{ type: "text", text: promptText(r) }],
                      is_compact_summary: false,
                    },
              );
          out.push(m);
        }
        body.messages = out;
        return true;
      });
    },
  },
];

const listMutations: Mutation[] = [
  {
    name: "list-order-ascending-with-since",
    area: "consistency",
    description:
      "List conversations: ordered newest activity first, whatever the filters: a deployment whose `since` query path orders oldest first",
    breaks: [],
    onResponse: (call, res) => {
      if (!listQuery(call)?.has("since")) return undefined;
      return editList(call, res, (list) => (list.length >= 2 ? list.reverse() : undefined));
    },
  },
  {
    name: "list-ordered-by-created-at",
    area: "consistency",
    description:
      "List conversations: ordered newest activity first: a deployment that orders by creation (a conversation resumed later stays where it was created)",
    breaks: [],
    onResponse: (call, res) =>
      editList(call, res, (list) =>
        list.sort((a: Json, b: Json) =>
          String(b?.created_at ?? "").localeCompare(String(a?.created_at ?? "")),
        ),
      ),
  },
  {
    name: "list-limit-before-channel-filter",
    area: "consistency",
    description:
      "List conversations: `channel` and `limit` combine (up to `limit` conversations of that channel): a deployment that takes `limit` conversations first and filters them by channel after",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const q = listQuery(call);
      if (!q?.has("channel") || !q.has("limit") || res.status !== 200) return undefined;
      const channel = q.get("channel");
      const wide = new URLSearchParams(q);
      wide.delete("channel");
      const all = await listWith(call, tools, wide);
      if (!all) return undefined;
      const kept = all.filter((c: Json) => c?.channel === channel);
      return editList(call, res, (list) => (sameIds(kept, list) ? undefined : kept));
    },
  },
  {
    name: "list-merges-workspace-agents",
    area: "consistency",
    description:
      "List conversations: the conversations of `{agent}`: a deployment whose list holds the caller's conversations of every agent of the workspace",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const agent = call.route.agent;
      const q = listQuery(call);
      if (!q || res.status !== 200 || !agent || !DEMO_AGENTS.includes(agent)) return undefined;
      const extra: Json[] = [];
      for (const other of DEMO_AGENTS) {
        if (other === agent) continue;
        const again = call.clone();
        again.path = throughAgent(call, other);
        const answer = await tools.forward(again);
        const list = jsonOf(answer)?.conversations;
        if (answer.status === 200 && Array.isArray(list)) extra.push(...list);
      }
      const limit = Number(q.get("limit") ?? 50) || 50;
      return editList(call, res, (list) => {
        const have = new Set(list.map((c: Json) => c?.id));
        const merged = [...list, ...extra.filter((c: Json) => !have.has(c?.id))];
        merged.sort((a: Json, b: Json) =>
          String(b?.updated_at ?? "").localeCompare(String(a?.updated_at ?? "")),
        );
        const out = merged.slice(0, limit);
        return sameIds(out, list) ? undefined : out;
      });
    },
  },
  {
    name: "list-notebook-path-ignored",
    area: "consistency",
    description: "List conversations: `notebook_path` filters the list: a deployment that ignores it",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const q = listQuery(call);
      if (!q?.has("notebook_path") || res.status !== 200) return undefined;
      const wide = new URLSearchParams(q);
      wide.delete("notebook_path");
      const all = await listWith(call, tools, wide);
      if (!all) return undefined;
      return editList(call, res, (list) => (sameIds(all, list) ? undefined : all));
    },
  },
  {
    name: "list-default-limit-twenty",
    area: "consistency",
    description: "List conversations / Limits: `limit` defaults to 50: a deployment whose default is 20",
    breaks: [],
    onResponse: (call, res) => {
      const q = listQuery(call);
      if (!q || q.has("limit")) return undefined;
      return editList(call, res, (list) => (list.length > 20 ? list.slice(0, 20) : undefined));
    },
  },
  {
    name: "list-limit-keeps-oldest",
    area: "consistency",
    description:
      "List conversations: `limit` with newest activity first gives the newest `limit` conversations: a deployment that keeps the oldest `limit` ones (and orders them newest first)",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const q = listQuery(call);
      const limit = Number(q?.get("limit"));
      if (!q || !Number.isInteger(limit) || limit < 1 || limit >= 200 || res.status !== 200) return undefined;
      const shown = jsonOf(res)?.conversations;
      if (!Array.isArray(shown) || shown.length < limit) return undefined;
      const wide = new URLSearchParams(q);
      wide.set("limit", "200");
      const all = await listWith(call, tools, wide);
      if (!all || all.length <= limit) return undefined;
      const oldest = all.slice(-limit);
      return editList(call, res, (list) => (sameIds(oldest, list) ? undefined : oldest));
    },
  },
  {
    name: "list-own-before-shared",
    area: "consistency",
    description:
      "List conversations: ordered newest activity first: a deployment that lists the caller's own conversations first and the shared and channel-owned ones after",
    breaks: [],
    onResponse: (call, res) =>
      editList(call, res, (list) => [
        ...list.filter((c: Json) => c?.is_owner === true),
        ...list.filter((c: Json) => c?.is_owner !== true),
      ]),
  },
  {
    name: "member-list-leaves-out-channel-owned",
    area: "consistency",
    description:
      "Conversation: visible to a caller are conversations owned by a channel (chat channel, e-mail): a deployment whose list leaves them out for a member's key",
    breaks: [],
    onResponse: (call, res) => {
      if (call.key !== DEMO_MEMBER_KEY) return undefined;
      return editList(call, res, (list) =>
        list.filter((c: Json) => !(CHANNEL_OWNED.includes(c?.channel) && c?.is_owner !== true)),
      );
    },
  },
  {
    name: "viewer-fetch-channel-owned-404",
    area: "status",
    description:
      "Conversation visibility / Authentication 3: a Viewer key can read conversations, and conversations owned by a channel are visible: a deployment whose single fetch and transcript answer a Viewer 404 for them",
    breaks: [],
    onResponse: (call, res) => {
      const kind = call.route.kind;
      if ((kind !== "conversation" && kind !== "transcript") || call.method !== "GET") return undefined;
      if (call.key !== DEMO_VIEWER_KEY || res.status !== 200) return undefined;
      if (!CHANNEL_OWNED.includes(jsonOf(res)?.conversation?.channel)) return undefined;
      return errorResponse(404, "not_found_error", "Conversation not found");
    },
  },
];

const streamMutations: Mutation[] = [
  {
    name: "stream-tool-calls-drops-tool-results",
    area: "sse",
    description:
      "Send a message, `stream_tool_calls`: adds `tool_use` and `tool_result` blocks to the stream: a deployment that streams the `tool_use` blocks only (indexes renumbered)",
    breaks: [],
    onEvents: (events) => {
      const drop = new Set<number>();
      for (const e of events)
        if (e.event === "content_block_start" && e.data?.content_block?.type === "tool_result")
          drop.add(e.data.index);
      if (drop.size === 0) return undefined;
      const kept = events.filter((e) => typeof e.data?.index !== "number" || !drop.has(e.data.index));
      const renumber = new Map<number, number>();
      for (const e of kept)
        if (e.event === "content_block_start" && typeof e.data?.index === "number")
          renumber.set(e.data.index, renumber.size);
      for (const e of kept)
        if (typeof e.data?.index === "number" && renumber.has(e.data.index))
          e.data.index = renumber.get(e.data.index);
      return kept;
    },
  },
  {
    name: "block-stop-index-of-next-block",
    area: "sse",
    description:
      "Events: `content_block_stop` carries the `index` of the block it ends: a deployment whose counter moves before the stop is sent, on turns with more than one block",
    breaks: [],
    onEvents: (events) => {
      if (events.filter((e) => e.event === "content_block_start").length < 2) return undefined;
      for (const e of events)
        if (e.event === "content_block_stop" && typeof e.data?.index === "number") e.data.index += 1;
      return events;
    },
  },
  {
    name: "thinking-signature-empty",
    area: "sse",
    description:
      "Events rule 1: a `thinking` block is followed by a `signature_delta`: a deployment that sends it with an empty signature",
    breaks: [],
    onEvents: (events) => {
      let changed = false;
      for (const e of events)
        if (
          e.event === "content_block_delta" &&
          e.data?.delta?.type === "signature_delta" &&
          e.data.delta.signature
        ) {
          e.data.delta.signature = "";
          changed = true;
        }
      return changed ? events : undefined;
    },
  },
  {
    name: "thinking-sent-as-text-delta",
    area: "sse",
    description:
      "Events rule 2: a thinking block's delta is a `thinking_delta` (field `thinking`): a deployment that sends it as a `text_delta` (field `text`) inside the thinking block",
    breaks: [],
    onEvents: (events) => {
      let changed = false;
      for (const e of events)
        if (e.event === "content_block_delta" && e.data?.delta?.type === "thinking_delta") {
          e.data.delta = { type: "text_delta", text: String(e.data.delta.thinking ?? "") };
          changed = true;
        }
      return changed ? events : undefined;
    },
  },
  {
    name: "storage-agent-input-tokens-zero",
    area: "meaning",
    description:
      "Events rule 4: `message_delta.usage.input_tokens` counts the turn's input: a deployment whose storage-backed agents report 0 (their usage is read from another source)",
    breaks: [],
    knownGap: HELD,
    onEvents: (events, call) => {
      if (sendAgent(call) !== DEMO.storageAgent) return undefined;
      const usage = usageOf(events);
      if (typeof usage?.input_tokens !== "number" || usage.input_tokens === 0) return undefined;
      usage.input_tokens = 0;
      return events;
    },
  },
  {
    name: "storage-agent-model-display-name",
    area: "sse",
    description:
      "Events, `message_start.message.model`: the model of the turn, an id of the models list: a deployment whose storage-backed agents put the model's display name there",
    breaks: [],
    onEvents: (events, call) => {
      if (sendAgent(call) !== DEMO.storageAgent) return undefined;
      let changed = false;
      for (const e of events) {
        const model = e.event === "message_start" ? e.data?.message?.model : undefined;
        if (typeof model === "string" && DISPLAY_NAMES[model]) {
          e.data.message.model = DISPLAY_NAMES[model];
          changed = true;
        }
      }
      return changed ? events : undefined;
    },
  },
  {
    name: "usage-cache-read-and-write-swapped",
    area: "meaning",
    description:
      "Events rule 4: `cache_read_input_tokens` and `cache_creation_input_tokens` are the two cache counts: a deployment that reports each in the other's field",
    breaks: [],
    knownGap: HELD,
    onEvents: (events) => {
      const usage = usageOf(events);
      const read = usage?.cache_read_input_tokens;
      const write = usage?.cache_creation_input_tokens;
      if (typeof read !== "number" || typeof write !== "number" || read === write) return undefined;
      usage.cache_read_input_tokens = write;
      usage.cache_creation_input_tokens = read;
      return events;
    },
  },
  {
    name: "usage-input-tokens-include-cache",
    area: "meaning",
    description:
      "Events rule 4: `input_tokens`, `cache_read_input_tokens` and `cache_creation_input_tokens` are separate counts: a deployment whose `input_tokens` adds the cache counts in",
    breaks: [],
    knownGap: HELD,
    onEvents: (events) => {
      const usage = usageOf(events);
      if (typeof usage?.input_tokens !== "number") return undefined;
      const read = typeof usage.cache_read_input_tokens === "number" ? usage.cache_read_input_tokens : 0;
      const write =
        typeof usage.cache_creation_input_tokens === "number" ? usage.cache_creation_input_tokens : 0;
      if (read + write === 0) return undefined;
      usage.input_tokens += read + write;
      return events;
    },
  },
  {
    name: "tool-result-is-error-inverted",
    area: "meaning",
    description:
      "Events rule 1: a `tool_result` block carries `is_error`: a deployment that reports it with the opposite sense (a tool that worked says true)",
    breaks: [],
    onEvents: (events) => {
      let changed = false;
      for (const e of events) {
        const block = e.event === "content_block_start" ? e.data?.content_block : undefined;
        if (block?.type === "tool_result" && typeof block.is_error === "boolean") {
          block.is_error = !block.is_error;
          changed = true;
        }
      }
      return changed ? events : undefined;
    },
  },
  {
    name: "tool-result-content-empty",
    area: "meaning",
    description:
      "Events rule 1: a `tool_result` block carries the tool's `content`: a deployment that sends it empty (of the same type)",
    breaks: [],
    onEvents: (events) => {
      let changed = false;
      for (const e of events) {
        const block = e.event === "content_block_start" ? e.data?.content_block : undefined;
        if (block?.type !== "tool_result") continue;
        if (typeof block.content === "string" && block.content !== "") {
          block.content = "";
          changed = true;
        } else if (Array.isArray(block.content) && block.content.length > 0) {
          block.content = [];
          changed = true;
        }
      }
      return changed ? events : undefined;
    },
  },
  {
    name: "error-event-type-not-api-error",
    area: "sse",
    description:
      'Events: the `error` event carries `{error: {type: "api_error", message}}`: a deployment that puts the upstream\'s own error type there (`overloaded_error`)',
    breaks: [],
    onEvents: (events) => {
      let changed = false;
      for (const e of events)
        if (e.event === "error" && e.data?.error && e.data.error.type !== "overloaded_error") {
          e.data.error.type = "overloaded_error";
          changed = true;
        }
      return changed ? events : undefined;
    },
  },
  {
    name: "failed-turn-ends-as-end-turn",
    area: "sse",
    description:
      "Events rule 5: a failure after the stream opens arrives as an `error` event: a deployment that closes the open blocks and ends the stream as a normal turn (`end_turn`, `message_stop`) instead",
    breaks: [],
    onEvents: (events) => {
      const at = events.findIndex((e) => e.event === "error");
      if (at < 0) return undefined;
      const before = events.slice(0, at);
      const open = new Set<number>();
      for (const e of before) {
        if (e.event === "content_block_start" && typeof e.data?.index === "number") open.add(e.data.index);
        if (e.event === "content_block_stop" && typeof e.data?.index === "number") open.delete(e.data.index);
      }
      const tail: SseEvent[] = [...open].map((index) => ({
        event: "content_block_stop",
        data: { type: "content_block_stop", index },
      }));
      if (!before.some((e) => e.event === "message_delta"))
        tail.push({
          event: "message_delta",
          data: {
            type: "message_delta",
            delta: { stop_reason: "end_turn", stop_sequence: null },
            usage: {
              input_tokens: 0,
              output_tokens: 0,
              cache_read_input_tokens: 0,
              cache_creation_input_tokens: 0,
              total_cost_usd: 0,
            },
          },
        });
      if (!before.some((e) => e.event === "message_stop"))
        tail.push({ event: "message_stop", data: { type: "message_stop" } });
      return [...before, ...tail];
    },
  },
  {
    name: "failed-turn-answered-500",
    area: "delivery",
    description:
      "Events rule 5 / Errors: a failure after the stream opened is an `error` event on a response sent as 200: a deployment that holds the turn and answers a failed one with a JSON 500",
    breaks: [],
    onResponse: (call, res) => {
      if (!isSendPost(call) || !isEventStream(res)) return undefined;
      const failure = parseSse(res.body.toString("utf8")).find((e) => e.event === "error");
      if (!failure) return undefined;
      const message = failure.data?.error?.message;
      const answer = errorResponse(
        500,
        "api_error",
        typeof message === "string" ? message : "Internal error",
      );
      const id = res.headers["x-conversation-id"];
      return id ? { ...answer, headers: { ...answer.headers, "x-conversation-id": id } } : answer;
    },
  },
  {
    name: "usage-moved-to-message-stop-on-resume",
    area: "sse",
    description:
      "Events: `message_delta` carries `usage` (rule 4), `message_stop` is `{type}`: a deployment that moves the usage to `message_stop` on resumed turns",
    breaks: [],
    onEvents: (events, call, tools) => {
      if (!resumesSeen(call, tools)) return undefined;
      const delta = events.find((e) => e.event === "message_delta" && e.data?.usage);
      const stop = events.find((e) => e.event === "message_stop");
      if (!delta || !stop || typeof stop.data !== "object" || stop.data === null) return undefined;
      stop.data.usage = delta.data.usage;
      delete delta.data.usage;
      return events;
    },
    onResponse: (call, res, tools) => {
      learn(call, res, tools);
      return undefined;
    },
  },
  {
    name: "message-stop-data-typed-message-delta",
    area: "sse",
    description:
      "Events: each event's data carries its `type`; `message_stop` is `{type}` of that name: a deployment whose `message_stop` data says `message_delta` (a copied frame)",
    breaks: [],
    onEvents: (events) => {
      let changed = false;
      for (const e of events)
        if (
          e.event === "message_stop" &&
          e.data &&
          typeof e.data === "object" &&
          e.data.type !== "message_delta"
        ) {
          e.data.type = "message_delta";
          changed = true;
        }
      return changed ? events : undefined;
    },
  },
  {
    name: "message-id-is-conversation-id",
    area: "sse",
    description:
      "Events, `message_start.message.id`: the id of the turn's message: a deployment that puts the conversation's id there, the same on every turn of the conversation",
    breaks: [],
    onResponse: (call, res) => {
      const id = res.headers["x-conversation-id"];
      if (!isSendPost(call) || !id) return undefined;
      return rewriteStream(res, (events) => {
        let changed = false;
        for (const e of events)
          if (e.event === "message_start" && e.data?.message && e.data.message.id !== id) {
            e.data.message.id = id;
            changed = true;
          }
        return changed ? events : undefined;
      });
    },
  },
];

const headerMutations: Mutation[] = [
  {
    name: "child-turn-header-names-parent",
    area: "headers",
    description:
      "Send a message, response header `X-Conversation-Id`: the conversation of the turn: a deployment that names the parent there on a fork child's turns (the session it resumed came from the parent)",
    breaks: [],
    onResponse: (call, res, tools) => {
      const named = sendBody(call)?.metadata?.conversation_id;
      const fork = typeof named === "string" ? forksOf(tools).get(named) : undefined;
      learn(call, res, tools);
      if (!fork || !isEventStream(res) || res.headers["x-conversation-id"] !== named) return undefined;
      return { ...res, headers: { ...res.headers, "x-conversation-id": fork.parent } };
    },
  },
];

export const outsideMutations6: Mutation[] = [
  ...sendMutations,
  ...statusMutations,
  ...stateMutations,
  ...valueMutations,
  ...transcriptMutations,
  ...listMutations,
  ...streamMutations,
  ...headerMutations,
].map((m) => ({ ...m, outsideRound: 6 }));
