/**
 * Mutations drawn at random, not hand-picked: a set of rule breakers (each a small fault of one API rule, written
 * from the API's text) and a set of conditions (agent kind, key role, route, turn depth, input shape) under which
 * a breaker applies. A seeded sampler draws (rule, condition) pairs; each pair becomes a mutation the fault proxy
 * applies, judged as `agent-api check` judges a deployment (any MUST failure; harness.ts). A suite that exercises
 * each rule under one combination is caught out by the pairs it never enumerated.
 *
 * A pair whose fault never fired during the run (no call met both the rule's target and the condition) says
 * nothing about the suite: it is reported as not applied, apart from the score.
 */
import { DEMO_ADMIN_KEY, DEMO_MEMBER_KEY, DEMO_VIEWER_KEY } from "../../reference-server/demo/workspace.ts";
import { CONVERSATION_CARRIERS } from "./conversation-rewrites.ts";
import {
  type Area,
  isEventStream,
  type Json,
  jsonOf,
  type Mutation,
  type ProxyCall,
  type ProxyResponse,
  type ProxyTools,
  type SseEvent,
  withJson,
} from "./proxy-calls.ts";

/** What a condition can ask about a call (a send) or about one conversation an answer carries. */
export interface Facts {
  agent: "main" | "storage" | "repository" | "other";
  role: "admin" | "member" | "viewer" | "other";
  /** The route that ran the call (a send), or the one that created the conversation (a read). */
  route: "per-agent" | "model-routed" | "unknown";
  /** The turn a send runs (1 for a new conversation), or the turns a read conversation holds. */
  depth: number;
  /** The prompt's shape: of the send, or of the conversation's first prompt. */
  shape: "string" | "text blocks" | "unknown";
  /** The send carries attachments (or the conversation's first send did). */
  attachments: boolean;
  /** The caller owns the conversation (a new one counts as the caller's own). */
  owner: boolean;
}

export type Dimension = "agent kind" | "key role" | "route" | "turn depth" | "input shape";

export interface Condition {
  name: string;
  dimension: Dimension;
  holds(facts: Facts): boolean;
}

export const conditions: Condition[] = [
  { name: "main agent", dimension: "agent kind", holds: (f) => f.agent === "main" },
  { name: "storage-backed agent", dimension: "agent kind", holds: (f) => f.agent === "storage" },
  { name: "repository-backed agent", dimension: "agent kind", holds: (f) => f.agent === "repository" },
  { name: "admin key", dimension: "key role", holds: (f) => f.role === "admin" },
  { name: "member key", dimension: "key role", holds: (f) => f.role === "member" },
  { name: "viewer key", dimension: "key role", holds: (f) => f.role === "viewer" },
  { name: "caller is not the owner", dimension: "key role", holds: (f) => !f.owner },
  { name: "per-agent send", dimension: "route", holds: (f) => f.route === "per-agent" },
  { name: "model-routed send", dimension: "route", holds: (f) => f.route === "model-routed" },
  { name: "first turn", dimension: "turn depth", holds: (f) => f.depth <= 1 },
  { name: "turn depth ≥ 2", dimension: "turn depth", holds: (f) => f.depth >= 2 },
  { name: "turn depth ≥ 3", dimension: "turn depth", holds: (f) => f.depth >= 3 },
  { name: "string content", dimension: "input shape", holds: (f) => f.shape === "string" },
  { name: "text-block content", dimension: "input shape", holds: (f) => f.shape === "text blocks" },
  { name: "with attachments", dimension: "input shape", holds: (f) => f.attachments },
];

/** The demo workspace's agents and keys, as the simulated deployment knows them. */
const AGENT_KINDS: Record<string, Facts["agent"]> = {
  "demo-agent": "main",
  "notes-agent": "storage",
  "acme-widgets": "repository",
};
const ROLES: Record<string, Facts["role"]> = {
  [DEMO_ADMIN_KEY]: "admin",
  [DEMO_MEMBER_KEY]: "member",
  [DEMO_VIEWER_KEY]: "viewer",
};

/** What the proxy learned of a conversation from the sends and forks it saw. */
interface Known {
  agent: Facts["agent"];
  route: Facts["route"];
  shape: Facts["shape"];
  attachments: boolean;
  turns: number;
}

const isSend = (call: ProxyCall) =>
  (call.route.kind === "send" || call.route.kind === "routed") && call.method === "POST";

function sendBody(call: ProxyCall): Json {
  const body = isSend(call) ? call.json() : undefined;
  return body !== null && typeof body === "object" && !Array.isArray(body) ? body : undefined;
}

function sendAgent(call: ProxyCall): string | undefined {
  if (call.route.kind === "send") return call.route.agent;
  const model = sendBody(call)?.model;
  if (typeof model !== "string") return undefined;
  const cut = model.lastIndexOf("--");
  return cut < 0 ? model : model.slice(cut + 2);
}

function newestUser(body: Json): Json {
  const messages = Array.isArray(body?.messages) ? body.messages : [];
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]?.role === "user") return messages[i];
  return undefined;
}

function shapeOf(body: Json): Facts["shape"] {
  const content = newestUser(body)?.content;
  return typeof content === "string" ? "string" : Array.isArray(content) ? "text blocks" : "unknown";
}

const hasAttachments = (body: Json) =>
  Array.isArray(body?.metadata?.attachments) && body.metadata.attachments.length > 0;

function knownOf(tools: ProxyTools): Map<string, Known> {
  let known = tools.state.get("known") as Map<string, Known> | undefined;
  if (!known) {
    known = new Map();
    tools.state.set("known", known);
  }
  return known;
}

function roleOf(key: string | undefined): Facts["role"] {
  return (key && ROLES[key]) || "other";
}

function ownerOf(id: string, key: string | undefined, tools: ProxyTools): boolean {
  const owner = tools.ledger.conversations.get(id)?.owner;
  return owner === undefined || owner === key;
}

/** The facts of a send, before it runs. */
function sendFacts(call: ProxyCall, tools: ProxyTools): Facts {
  const body = sendBody(call);
  const id = body?.metadata?.conversation_id;
  const known = typeof id === "string" ? knownOf(tools).get(id) : undefined;
  return {
    agent: AGENT_KINDS[sendAgent(call) ?? ""] ?? "other",
    role: roleOf(call.key),
    route: call.route.kind === "routed" ? "model-routed" : "per-agent",
    depth: (known?.turns ?? 0) + 1,
    shape: shapeOf(body),
    attachments: hasAttachments(body),
    owner: typeof id === "string" ? ownerOf(id, call.key, tools) : true,
  };
}

/** The facts of one conversation an answer (or a conversation route) is about. */
function conversationFacts(id: string, call: ProxyCall, tools: ProxyTools): Facts {
  const known = knownOf(tools).get(id);
  return {
    agent: known?.agent ?? AGENT_KINDS[call.route.agent ?? ""] ?? "other",
    role: roleOf(call.key),
    route: known?.route ?? "unknown",
    depth: known?.turns ?? 0,
    shape: known?.shape ?? "unknown",
    attachments: known?.attachments ?? false,
    owner: ownerOf(id, call.key, tools),
  };
}

/** Learns from each answer what later conditions ask: a conversation's agent, route, shape and turns. */
function observe(call: ProxyCall, res: ProxyResponse, tools: ProxyTools): void {
  const known = knownOf(tools);
  if (isSend(call) && isEventStream(res)) {
    const body = sendBody(call);
    const id = res.headers["x-conversation-id"] ?? body?.metadata?.conversation_id;
    if (typeof id !== "string") return;
    const entry = known.get(id) ?? {
      agent: AGENT_KINDS[sendAgent(call) ?? ""] ?? "other",
      route: call.route.kind === "routed" ? "model-routed" : "per-agent",
      shape: shapeOf(body),
      attachments: hasAttachments(body),
      turns: 0,
    };
    entry.turns += 1;
    known.set(id, entry);
  }
  if (call.route.kind === "fork" && res.status >= 200 && res.status < 300 && call.route.id) {
    const result = jsonOf(res);
    const parent = known.get(call.route.id);
    if (typeof result?.conversation_id === "string" && parent)
      known.set(result.conversation_id, {
        ...parent,
        turns: typeof result.forked_at_turn === "number" ? result.forked_at_turn : parent.turns,
      });
  }
}

/** One rule of the API broken in one small way; `apply` says whether it changed anything. */
export interface RuleBreaker {
  name: string;
  area: Area;
  /** The rule, in the API's words, and the fault. */
  rule: string;
  /** A send's body, before it is forwarded (the send's facts decide). */
  request?(body: Json): boolean;
  /** A send's event stream (the send's facts decide). */
  events?(events: SseEvent[]): boolean;
  /** The answer of a send that opened a stream: headers (the send's facts decide). */
  streamHead?(res: ProxyResponse): ProxyResponse | undefined;
  /** One conversation object of a JSON answer (that conversation's facts decide). */
  conversation?(c: Json): boolean;
  /** Any non-stream answer on a conversation route (the route's conversation's facts decide). */
  answer?(call: ProxyCall, res: ProxyResponse): ProxyResponse | undefined;
}

const textDeltas = (events: SseEvent[]) =>
  events.filter((e) => e.event === "content_block_delta" && e.data?.delta?.type === "text_delta");

export const breakers: RuleBreaker[] = [
  {
    name: "system-dropped",
    area: "send",
    rule: "`system` is appended to the agent's instructions: the deployment drops it",
    request: (b) => typeof b.system === "string" && delete b.system,
  },
  {
    name: "stream-tool-calls-ignored",
    area: "send",
    rule: "`stream_tool_calls: true` adds tool blocks to the stream: the deployment ignores the flag",
    request: (b) => b.metadata?.stream_tool_calls === true && delete b.metadata.stream_tool_calls,
  },
  {
    name: "attachments-dropped",
    area: "silent",
    rule: "Attachments are written to `.uploads/<name>`: the deployment drops them",
    request: (b) => hasAttachments(b) && delete b.metadata.attachments,
  },
  {
    name: "first-text-block-only",
    area: "send",
    rule: "Text blocks are joined with blank lines: the deployment reads the first block only",
    request: (b) => {
      const user = newestUser(b);
      if (!Array.isArray(user?.content) || user.content.length < 2) return false;
      user.content = user.content.slice(0, 1);
      return true;
    },
  },
  {
    name: "conversation-id-ignored",
    area: "state",
    rule: "A send with `metadata.conversation_id` resumes or creates that conversation: the deployment starts a new one",
    request: (b) => typeof b.metadata?.conversation_id === "string" && delete b.metadata.conversation_id,
  },
  {
    name: "block-start-carries-text",
    area: "sse",
    rule: "`content_block_start` carries an empty text string: the deployment puts the block's text there",
    events: (events) => {
      let changed = false;
      for (const d of textDeltas(events)) {
        const start = events.find((e) => e.event === "content_block_start" && e.data?.index === d.data.index);
        if (start?.data?.content_block?.type === "text" && d.data.delta.text) {
          start.data.content_block.text = d.data.delta.text;
          changed = true;
        }
      }
      return changed;
    },
  },
  {
    name: "index-restarts-per-block",
    area: "sse",
    rule: "`index` is a running counter for the turn: the deployment numbers every block 0",
    events: (events) => {
      const used = new Set(events.map((e) => e.data?.index).filter((i) => typeof i === "number"));
      if (used.size < 2) return false;
      for (const e of events) if (typeof e.data?.index === "number") e.data.index = 0;
      return true;
    },
  },
  {
    name: "text-delta-split",
    area: "sse",
    rule: "Blocks arrive whole, one complete delta each: the deployment splits a text block's delta in two",
    events: (events) => {
      const d = textDeltas(events).find((e) => String(e.data.delta.text ?? "").length >= 2);
      if (!d) return false;
      const text = String(d.data.delta.text);
      const cut = Math.floor(text.length / 2);
      const second = {
        event: d.event,
        data: { ...d.data, delta: { ...d.data.delta, text: text.slice(cut) } },
      };
      d.data.delta.text = text.slice(0, cut);
      events.splice(events.indexOf(d) + 1, 0, second);
      return true;
    },
  },
  {
    name: "output-tokens-zero",
    area: "meaning",
    rule: "`message_delta.usage` counts the turn: the deployment reports 0 output tokens for a turn with text",
    events: (events) => {
      if (!textDeltas(events).some((e) => e.data.delta.text)) return false;
      const delta = events.find((e) => e.event === "message_delta" && e.data?.usage);
      if (!delta) return false;
      delta.data.usage.output_tokens = 0;
      return true;
    },
  },
  {
    name: "message-stop-missing",
    area: "sse",
    rule: "The stream ends at `message_stop`: the deployment ends it without one",
    events: (events) => {
      const i = events.findIndex((e) => e.event === "message_stop");
      if (i < 0) return false;
      events.splice(i, 1);
      return true;
    },
  },
  {
    name: "conversation-header-differs",
    area: "headers",
    rule: "`X-Conversation-Id` names the turn's conversation: the deployment puts another id there",
    streamHead: (res) =>
      res.headers["x-conversation-id"]
        ? {
            ...res,
            headers: { ...res.headers, "x-conversation-id": `${res.headers["x-conversation-id"]}-x` },
          }
        : undefined,
  },
  {
    name: "title-rewritten",
    area: "consistency",
    rule: "`title` is derived from the first prompt and never changed: the deployment shows another title",
    conversation: (c) => {
      c.title = `Conversation ${String(c.id).slice(0, 8)}`;
      return true;
    },
  },
  {
    name: "shared-flipped",
    area: "consistency",
    rule: "`shared` says whether the workspace may read it: the deployment shows the opposite",
    conversation: (c) => {
      if (typeof c.shared !== "boolean") return false;
      c.shared = !c.shared;
      return true;
    },
  },
  {
    name: "is-owner-flipped",
    area: "consistency",
    rule: "`is_owner` says whether the caller owns it: the deployment shows the opposite",
    conversation: (c) => {
      if (typeof c.is_owner !== "boolean") return false;
      c.is_owner = !c.is_owner;
      return true;
    },
  },
  {
    name: "session-null",
    area: "consistency",
    rule: "`agent_session_id` is non-null once a turn with output was recorded: the deployment shows null",
    conversation: (c) => {
      if (c.agent_session_id === null || c.agent_session_id === undefined) return false;
      c.agent_session_id = null;
      return true;
    },
  },
  {
    name: "turn-count-plus-one",
    area: "consistency",
    rule: "`turn_count` counts the conversation's turns: the deployment shows one more",
    conversation: (c) => {
      if (typeof c.turn_count !== "number") return false;
      c.turn_count += 1;
      return true;
    },
  },
  {
    name: "updated-at-frozen",
    area: "consistency",
    rule: "`updated_at` moves with activity: the deployment keeps it at `created_at`",
    conversation: (c) => {
      if (c.updated_at === c.created_at) return false;
      c.updated_at = c.created_at;
      return true;
    },
  },
  {
    name: "timestamps-with-offset",
    area: "shapes",
    rule: "Timestamps are UTC with milliseconds: the deployment writes the same instant with a +01:00 offset",
    conversation: (c) => {
      const t = Date.parse(c.created_at);
      if (Number.isNaN(t)) return false;
      c.created_at = `${new Date(t + 3600_000).toISOString().slice(0, 23)}+01:00`;
      return true;
    },
  },
  {
    name: "fork-origin-lost",
    area: "consistency",
    rule: "`parent_conversation_id` and `forked_at_turn_index` are set on forks: the deployment shows null",
    conversation: (c) => {
      if (!c.parent_conversation_id) return false;
      c.parent_conversation_id = null;
      c.forked_at_turn_index = null;
      return true;
    },
  },
  {
    name: "not-found-as-forbidden",
    area: "status",
    rule: "Another user's unshared conversation gives 404 (existence never leaked): the deployment answers 403",
    answer: (_call, res) =>
      res.status === 404
        ? withJson(
            res,
            { message: "Forbidden", error: { type: "permission_error", message: "Forbidden" } },
            403,
          )
        : undefined,
  },
];

/** The mutation that applies `breaker` only where `condition` holds, and how many times it fired. */
export function pairMutation(
  breaker: RuleBreaker,
  condition: Condition,
): { mutation: Mutation; fired(): number } {
  let count = 0;
  const fired = () => {
    count += 1;
  };
  /** Sends whose body the rule changed: they count as fired when the deployment ran them. */
  const changedSends = new WeakSet<ProxyCall>();
  const mutation: Mutation = {
    name: `${breaker.name} × ${condition.name}`,
    area: breaker.area,
    description: `${breaker.rule}, under: ${condition.name}`,
    breaks: [],
  };
  if (breaker.request) {
    mutation.onRequest = (call, tools) => {
      const body = sendBody(call);
      if (!body || !condition.holds(sendFacts(call, tools))) return undefined;
      if (breaker.request?.(body)) {
        call.setJson(body);
        changedSends.add(call);
      }
      return undefined;
    };
  }
  if (breaker.events) {
    mutation.onEvents = (events, call, tools) => {
      if (!isSend(call) || !condition.holds(sendFacts(call, tools))) return undefined;
      if (breaker.events?.(events)) fired();
      return events;
    };
  }
  // Every pair observes answers (the facts later conditions ask); the rules on answers act here too.
  mutation.onResponse = (call, res, tools) => {
    let out: ProxyResponse | undefined;
    if (isSend(call)) {
      const facts = sendFacts(call, tools);
      if (changedSends.has(call) && isEventStream(res)) fired();
      if (breaker.streamHead && isEventStream(res) && condition.holds(facts)) {
        out = breaker.streamHead(res);
        if (out) fired();
      }
    } else if (breaker.conversation && call.method === "GET" && res.status === 200) {
      const carrier = Object.hasOwn(CONVERSATION_CARRIERS, call.route.kind)
        ? CONVERSATION_CARRIERS[call.route.kind]
        : undefined;
      const body = jsonOf(res);
      let changed = false;
      for (const c of carrier === undefined ? [] : carrier(body)) {
        if (typeof c?.id !== "string" || !condition.holds(conversationFacts(c.id, call, tools))) continue;
        if (breaker.conversation(c)) changed = true;
      }
      if (changed) {
        fired();
        out = withJson(res, body);
      }
    } else if (breaker.answer && call.route.id !== undefined) {
      if (condition.holds(conversationFacts(call.route.id, call, tools))) {
        out = breaker.answer(call, res);
        if (out) fired();
      }
    }
    observe(call, res, tools);
    return out;
  };
  return { mutation, fired: () => count };
}

/** Mulberry32: a small seeded generator, so a sample is the same for the same seed on any machine. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Draw {
  breaker: RuleBreaker;
  condition: Condition;
  mutation: Mutation;
  /** How often the pair's fault fired in its run (0: nothing in the run met both rule and condition). */
  fired(): number;
}

/** `n` distinct (rule, condition) pairs drawn with `seed` from every pair of the two sets. */
export function drawPairs(seed: number, n: number): Draw[] {
  const random = seededRandom(seed);
  const all = breakers.flatMap((breaker) => conditions.map((condition) => ({ breaker, condition })));
  // A partial Fisher–Yates shuffle: the first n of a uniform permutation.
  const count = Math.min(n, all.length);
  for (let i = 0; i < count; i++) {
    const j = i + Math.floor(random() * (all.length - i));
    [all[i], all[j]] = [all[j], all[i]];
  }
  return all.slice(0, count).map((d) => ({ ...d, ...pairMutation(d.breaker, d.condition) }));
}
