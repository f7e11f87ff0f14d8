/**
 * Outside round 5: breakages written from the API's text alone, by someone who had not read the checks (nor
 * the model or the explorer), each a fault a real deployment could have. Like round 4 they aim at what a suite
 * that exercises each rule under one combination misses: a rule broken under one agent kind, key, route, turn
 * depth or input shape only; a field of the right type holding a wrong value; state that goes wrong across time
 * (deletes then reads, forks then reads, shares set twice, turns after a share); which status wins when two
 * apply; what a stream's events mean. Each row cites the API section whose MUST or SHOULD it departs from.
 *
 * No row names a check: `breaks` stays empty and `outsideRound` is set, so the harness judges each row as
 * `agent-api check` judges a deployment (caught = any MUST failure other than the two stream-timing checks
 * every held stream fails; see harness.ts). `npm run mutation-score:catalogue` runs them all, `npm test` the
 * `sample`.
 *
 * The deployment these rows simulate knows its own agents, keys and automations, so a fault "on the
 * storage-backed agent only" or "for another workspace's key" names the demo's; who owns a conversation comes
 * from the proxy's ledger, and what a conversation's turns were from the traffic the row has seen.
 */
import {
  DEMO_ADMIN_KEY,
  DEMO_FLOW_KEY,
  DEMO_MEMBER_KEY,
  DEMO_REVOKED_KEY,
  DEMO_VIEWER_KEY,
} from "../../reference-server/demo/workspace.ts";
import { everyConversation } from "./conversation-rewrites.ts";
import {
  attachmentsOf,
  callerIsNotOwner,
  conversationPath,
  editSend,
  forwardAs,
  is2xx,
  isSendPost,
  newestUser,
  promptText,
  sendAgent,
  sendBody,
  throughAgent,
  usageOf,
} from "./outside-helpers.ts";
import {
  errorResponse,
  isEventStream,
  type Json,
  jsonOf,
  type Mutation,
  ProxyCall,
  type ProxyResponse,
  type ProxyTools,
  withJson,
} from "./proxy-calls.ts";

/** The demo workspace's names, as the simulated deployment knows them. */
const DEMO = {
  defaultAgent: "demo-agent",
  storageAgent: "notes-agent",
  repoAgent: "acme-widgets",
  foreignAgent: "other-agent",
  automation: "nightly-summary",
  automationPrompt: "Summarise the day. Always include the token AUTOMATION-PROMPT-USED",
  automationModel: "demo-small",
  defaultModel: "demo-large",
} as const;

/**
 * Rows the whole suite let pass when they were measured (before the suite's change for issue 29): left failing
 * for the suite's authors, who clear the marker when a change of theirs catches the row.
 */
const HELD = "outside round 5, before the suite's change";

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

/** What a row learned about one conversation from the sends it saw answered. */
interface Seen {
  agent?: string;
  route: "send" | "routed";
  turns: number;
  firstPrompt: string;
  latestPrompt: string;
  system?: string;
}

function seenOf(tools: ProxyTools): Map<string, Seen> {
  const seen: Map<string, Seen> = tools.state.get("seen") ?? new Map();
  tools.state.set("seen", seen);
  return seen;
}

/** Records a send the deployment answered with a stream: which conversation it was and what it said. */
function learnSend(call: ProxyCall, res: ProxyResponse, tools: ProxyTools): Seen | undefined {
  const body = sendBody(call);
  const id = res.headers["x-conversation-id"];
  if (!body || !isEventStream(res) || !id) return undefined;
  const seen = seenOf(tools);
  const prompt = promptText(newestUser(body));
  let entry = seen.get(id);
  if (!entry) {
    entry = {
      agent: sendAgent(call),
      route: call.route.kind === "routed" ? "routed" : "send",
      turns: 0,
      firstPrompt: prompt,
      latestPrompt: prompt,
      system: typeof body.system === "string" ? body.system : undefined,
    };
    seen.set(id, entry);
  }
  entry.turns += 1;
  entry.latestPrompt = prompt;
  return entry;
}

/** A send that resumes a conversation the deployment already ran a turn of (turn depth 2 or more). */
function resumesSeen(call: ProxyCall, tools: ProxyTools): Seen | undefined {
  const id = sendBody(call)?.metadata?.conversation_id;
  return typeof id === "string" ? seenOf(tools).get(id) : undefined;
}

/** A title as a deployment derives one from a prompt (the first line, cut). */
const titleFrom = (prompt: string) => prompt.split("\n")[0].slice(0, 80);

// ---------------------------------------------------------------------------------------------------------

const sendMutations: Mutation[] = [
  {
    name: "routed-send-requires-max-tokens",
    area: "status",
    description:
      "Send a message: `max_tokens` is not required, and the model-routed send has the same body and behaviour (Model-routed send): a deployment whose routed send refuses a body without it with 400",
    breaks: [],
    onRequest: (call) => {
      const body = sendBody(call);
      if (call.route.kind === "routed" && body && body.max_tokens === undefined)
        return errorResponse(400, "invalid_request_error", "max_tokens: field required");
    },
  },
  {
    name: "attachment-path-flattened",
    area: "silent",
    description:
      "Attachment: `name` is sanitized to a safe basename: a deployment that keeps the directories, flattened into the name (`dir/notes.txt` written as `dir_notes.txt`)",
    breaks: [],
    knownGap: HELD,
    onRequest: (call) =>
      editSend(
        call,
        (b) =>
          (attachmentsOf(b) ?? []).some((a: Json) => typeof a?.name === "string" && /[/\\]/.test(a.name)),
        (b) => {
          for (const a of attachmentsOf(b) ?? [])
            if (typeof a?.name === "string")
              a.name = a.name
                .replace(/^[/\\.]+/, "")
                .replace(/\.\.[/\\]/g, "")
                .replace(/[/\\]/g, "_");
        },
      ),
  },
  {
    name: "attachment-count-cap-keeps-last-ten",
    area: "silent",
    description:
      "Send a message / Limits: at most 10 files, anything past the cap dropped: a deployment that keeps the last ten and drops the first ones",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => (attachmentsOf(b)?.length ?? 0) > 10,
        (b) => {
          b.metadata.attachments = b.metadata.attachments.slice(-10);
        },
      ),
  },
  {
    name: "attachment-count-cap-drops-all",
    area: "silent",
    description:
      "Send a message / Limits: at most 10 files, anything past the cap dropped: a deployment that drops every attachment of a turn that sends more than 10",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => (attachmentsOf(b)?.length ?? 0) > 10,
        (b) => {
          b.metadata.attachments = [];
        },
      ),
  },
  {
    name: "attachment-size-cap-drops-all",
    area: "silent",
    description:
      "Send a message / Limits: 10 MiB decoded in total, anything past the cap dropped: a deployment that drops every file of a turn whose files exceed it, those within the cap too",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => {
          const list = attachmentsOf(b) ?? [];
          const total = list.reduce(
            (n: number, a: Json) =>
              n + (typeof a?.dataBase64 === "string" ? Math.floor((a.dataBase64.length * 3) / 4) : 0),
            0,
          );
          return list.length > 1 && total > 10 * 1024 * 1024;
        },
        (b) => {
          b.metadata.attachments = [];
        },
      ),
  },
  {
    name: "automation-prompt-replaces-message",
    area: "send",
    description:
      "Send a message, `metadata.automation`: the automation's stored prompt is a default and values in the body win: a deployment that runs the stored prompt instead of the caller's message",
    breaks: [],
    knownGap: HELD,
    onRequest: (call) =>
      editSend(
        call,
        (b) => b.metadata?.automation === DEMO.automation && newestUser(b) !== undefined,
        (b) => {
          newestUser(b).content = DEMO.automationPrompt;
        },
      ),
  },
  {
    name: "automation-model-wins-over-body",
    area: "send",
    description:
      "Send a message, `metadata.automation`: values in the body win: a deployment where the automation's model overrides the body's `model`",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) =>
          b.metadata?.automation === DEMO.automation &&
          typeof b.model === "string" &&
          b.model !== DEMO.automationModel &&
          call.route.kind === "send",
        (b) => {
          b.model = DEMO.automationModel;
        },
      ),
  },
  {
    name: "isolated-ignored-on-resume",
    area: "send",
    description:
      "Send a message, `metadata.isolated`: the turn runs in a throwaway sandbox: a deployment that ignores it on a resumed turn (the conversation's files are there)",
    breaks: [],
    onRequest: (call, tools) =>
      editSend(
        call,
        (b) => b.metadata?.isolated === true && resumesSeen(call, tools) !== undefined,
        (b) => {
          delete b.metadata.isolated;
        },
      ),
    onResponse: (call, res, tools) => {
      learnSend(call, res, tools);
      return undefined;
    },
  },
  {
    name: "top-k-refused",
    area: "status",
    description:
      "Send a message: the messages-API's other fields are accepted and ignored: a deployment that refuses `top_k` with 400",
    breaks: [],
    onRequest: (call) => {
      if (sendBody(call)?.top_k !== undefined)
        return errorResponse(400, "invalid_request_error", "top_k: Extra inputs are not permitted");
    },
  },
  {
    name: "non-text-block-ends-the-prompt",
    area: "send",
    description:
      "Send a message: text blocks are joined with blank lines and non-text blocks are not read: a deployment that stops reading the content at the first non-text block",
    breaks: [],
    onRequest: (call) =>
      editSend(
        call,
        (b) => {
          const content = newestUser(b)?.content;
          if (!Array.isArray(content)) return false;
          const cut = content.findIndex((x: Json) => x?.type !== "text");
          return cut >= 0 && content.slice(cut).some((x: Json) => x?.type === "text");
        },
        (b) => {
          const user = newestUser(b);
          user.content = user.content.slice(
            0,
            user.content.findIndex((x: Json) => x?.type !== "text"),
          );
        },
      ),
  },
];

const statusMutations: Mutation[] = [
  {
    name: "member-delete-of-private-403",
    area: "status",
    description:
      "Errors / Conversation id resolution: another user's unshared conversation gives 404, its existence never leaked: a deployment whose delete answers a member 403 (owner only) for it",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (call.route.kind !== "conversation" || call.method !== "DELETE" || res.status !== 404) return;
      if (!callerIsNotOwner(call, tools)) return undefined;
      return errorResponse(403, "permission_error", "Only the owner may delete this conversation");
    },
  },
  {
    name: "member-share-of-private-403",
    area: "status",
    description:
      "Errors / Conversation id resolution: another user's unshared conversation gives 404, its existence never leaked: a deployment whose share toggle answers a member 403 (owner only) for it",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (call.route.kind !== "conversation" || call.method !== "POST" || res.status !== 404) return;
      if (!callerIsNotOwner(call, tools)) return undefined;
      return errorResponse(403, "permission_error", "Only the owner may share this conversation");
    },
  },
  {
    name: "viewer-transcript-403",
    area: "status",
    description:
      "Authentication 3: a Viewer key can read conversations: a deployment whose transcript route refuses a Viewer with 403",
    breaks: [],
    onRequest: (call) => {
      if (call.route.kind === "transcript" && call.key === DEMO_VIEWER_KEY)
        return errorResponse(403, "permission_error", "Viewers may not read transcripts");
    },
  },
  {
    name: "models-accepts-revoked-key",
    area: "status",
    description:
      "Authentication 4 / List models (same authentication as send-message): a revoked key gives 401: a deployment whose models route still serves it (a stale key cache)",
    breaks: [],
    onResponse: async (call, res, tools) => {
      if (call.route.kind !== "models" || res.status !== 401 || call.key !== DEMO_REVOKED_KEY) return;
      return forwardAs(call, tools, { key: DEMO_MEMBER_KEY }, (answer) => answer.status === 200);
    },
  },
  {
    name: "models-served-without-key",
    area: "status",
    description:
      "Authentication 1 and 4 / List models: every request carries the key, a missing key gives 401: a deployment whose models route is public",
    breaks: [],
    onRequest: async (call, tools) => {
      if (call.route.kind !== "models" || call.key !== undefined) return;
      return forwardAs(call, tools, { key: DEMO_ADMIN_KEY }, (answer) => answer.status === 200);
    },
  },
  {
    name: "delete-through-other-agent",
    area: "status",
    description:
      "Errors: a conversation on a different agent gives 404: a deployment whose delete finds it by id through any agent's path and deletes it",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const route = call.route;
      if (route.kind !== "conversation" || call.method !== "DELETE" || res.status !== 404 || !route.id)
        return;
      const known = tools.ledger.conversations.get(route.id);
      if (!known || known.agent === route.agent || known.owner !== call.key) return undefined;
      return forwardAs(
        call,
        tools,
        { path: throughAgent(call, known.agent) },
        (answer) => answer.status === 204,
      );
    },
  },
  {
    name: "share-through-other-agent",
    area: "status",
    description:
      "Errors: a conversation on a different agent gives 404: a deployment whose share toggle finds it by id through any agent's path",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const route = call.route;
      if (route.kind !== "conversation" || call.method !== "POST" || res.status !== 404 || !route.id) return;
      const known = tools.ledger.conversations.get(route.id);
      if (!known || known.agent === route.agent || known.owner !== call.key) return undefined;
      return forwardAs(call, tools, { path: throughAgent(call, known.agent) }, is2xx);
    },
  },
  {
    name: "flow-runs-without-key",
    area: "status",
    description:
      "Invoke a deployed flow / Authentication 1 and 4: the flow endpoint takes the `X-API-Key` header, a missing key gives 401: a deployment whose flow endpoint is public",
    breaks: [],
    onRequest: async (call, tools) => {
      if (call.route.kind !== "flow" || call.key !== undefined) return;
      const again = call.clone();
      again.key = DEMO_FLOW_KEY;
      return tools.forward(again);
    },
  },
  {
    name: "viewer-fetch-403",
    area: "status",
    description:
      "Authentication 3: a Viewer key can read conversations: a deployment whose single fetch refuses a Viewer with 403",
    breaks: [],
    sample: true,
    onRequest: (call) => {
      if (call.route.kind === "conversation" && call.method === "GET" && call.key === DEMO_VIEWER_KEY)
        return errorResponse(403, "permission_error", "Viewers may not read conversations");
    },
  },
  {
    name: "share-toggle-missing-key-404",
    area: "status",
    description:
      "Authentication 1 and 4: a missing key gives 401 on every request: a deployment whose share toggle looks the conversation up first and answers 404",
    breaks: [],
    onRequest: (call) => {
      if (call.route.kind === "conversation" && call.method === "POST" && call.key === undefined)
        return errorResponse(404, "not_found_error", "Conversation not found");
    },
  },
  {
    name: "routed-unknown-key-403",
    area: "status",
    description:
      "Authentication 4: an unrecognized key gives 401; the model-routed send has send-message's behaviour: a deployment whose routed send answers 403 for it",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "routed" || res.status !== 401 || call.key === undefined) return undefined;
      if (call.key === DEMO_REVOKED_KEY) return undefined;
      return errorResponse(403, "permission_error", "Forbidden");
    },
  },
  {
    name: "models-type-on-storage-agent",
    area: "shapes",
    description:
      "Model entry: `type` is always `model`: a deployment whose storage-backed agents list their models with type `model_entry`",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "models" || res.status !== 200 || call.route.agent !== DEMO.storageAgent)
        return;
      const body = jsonOf(res);
      if (!Array.isArray(body?.data)) return undefined;
      for (const m of body.data) if (m) m.type = "model_entry";
      return withJson(res, body);
    },
  },
];

const afterDeleteMutations: Mutation[] = [
  {
    name: "deleted-transcript-still-served",
    area: "state",
    description:
      "Delete a conversation: it is removed: a deployment whose transcript route keeps serving the deleted conversation's messages (a cache)",
    breaks: [],
    onRequest: async (call, tools) => {
      const route = call.route;
      if (route.kind !== "conversation" || call.method !== "DELETE" || !route.agent || !route.id) return;
      const before = await tools.forward(
        ProxyCall.make("GET", `${conversationPath(route.agent, route.id)}/messages`, call.key),
      );
      if (before.status === 200) tools.state.set(`transcript:${route.agent}:${route.id}`, before);
      return undefined;
    },
    onResponse: (call, res, tools) => {
      const route = call.route;
      if (route.kind === "conversation" && call.method === "DELETE" && res.status === 204)
        tools.state.set(`gone:${route.agent}:${route.id}`, true);
      if (route.kind !== "transcript" || res.status !== 404) return undefined;
      if (!tools.state.get(`gone:${route.agent}:${route.id}`)) return undefined;
      return tools.state.get(`transcript:${route.agent}:${route.id}`);
    },
  },
  {
    name: "fork-child-timestamps-without-ms",
    area: "shapes",
    description:
      "Conventions: timestamps are ISO 8601 in UTC with milliseconds: a deployment whose fork children carry `created_at` and `updated_at` to the second",
    breaks: [],
    onResponse: conversationsOn(undefined, (c) => {
      if (!c.parent_conversation_id) return;
      for (const field of ["created_at", "updated_at"])
        if (typeof c[field] === "string") c[field] = c[field].replace(/\.\d+Z$/, "Z");
    }),
  },
];

const headerMutations: Mutation[] = [
  {
    name: "conversation-header-percent-encoded",
    area: "headers",
    description:
      "Conversation id resolution: an unknown id is created with that id verbatim, returned in `X-Conversation-Id`: a deployment that percent-encodes the header's id when it holds characters other than letters, digits, `-` and `_`",
    breaks: [],
    onResponse: (call, res) => {
      if (!isSendPost(call) || !isEventStream(res)) return undefined;
      const id = res.headers["x-conversation-id"];
      if (!id || /^[A-Za-z0-9_-]*$/.test(id)) return undefined;
      return { ...res, headers: { ...res.headers, "x-conversation-id": encodeURIComponent(id) } };
    },
  },
];

const streamMutations: Mutation[] = [
  {
    name: "message-start-model-ignores-body-model",
    area: "sse",
    description:
      "Events, `message_start.message.model`, and Send a message, `model`: the body's model runs the turn: a deployment whose stream names the agent's default model whatever the body selected",
    breaks: [],
    knownGap: HELD,
    onEvents: (events, call) => {
      const body = sendBody(call);
      if (call.route.kind !== "send" || typeof body?.model !== "string") return undefined;
      for (const e of events)
        if (e.event === "message_start" && e.data?.message && sendAgent(call) === DEMO.defaultAgent)
          e.data.message.model = DEMO.defaultModel;
      return events;
    },
  },
  {
    name: "message-start-model-ignores-automation",
    area: "sse",
    description:
      "Events, `message_start.message.model`, and `metadata.automation`: the automation's model is the turn's default: a deployment whose stream names the agent's default model for an automation turn",
    breaks: [],
    onEvents: (events, call) => {
      const body = sendBody(call);
      if (body?.metadata?.automation !== DEMO.automation || body.model !== undefined) return undefined;
      for (const e of events)
        if (e.event === "message_start" && e.data?.message) e.data.message.model = DEMO.defaultModel;
      return events;
    },
  },
  {
    name: "cost-cumulative-on-resume",
    area: "meaning",
    description:
      "Events rule 4: `total_cost_usd` is the cost of the turn: a deployment that reports the conversation's running total on resumed turns",
    breaks: [],
    knownGap: HELD,
    onEvents: (events, call, tools) => {
      const id = sendBody(call)?.metadata?.conversation_id;
      const usage = usageOf(events);
      if (typeof usage?.total_cost_usd !== "number") return undefined;
      const key = typeof id === "string" ? `cost:${id}` : undefined;
      const before = key ? Number(tools.state.get(key) ?? 0) : 0;
      const total = before + usage.total_cost_usd;
      // The running total is kept per conversation once its id is known (the header names a new one).
      tools.state.set("pending-cost", total);
      if (key && before > 0) usage.total_cost_usd = total;
      return events;
    },
    onResponse: (call, res, tools) => {
      const id = res.headers["x-conversation-id"];
      const total = tools.state.get("pending-cost");
      if (isSendPost(call) && isEventStream(res) && id && typeof total === "number")
        tools.state.set(`cost:${id}`, total);
      return undefined;
    },
  },
  {
    name: "output-tokens-cumulative-on-resume",
    area: "meaning",
    description:
      "Events rule 4: `message_delta.usage` counts the turn: a deployment that reports the conversation's running output-token total on resumed turns",
    breaks: [],
    knownGap: HELD,
    onEvents: (events, call, tools) => {
      const id = sendBody(call)?.metadata?.conversation_id;
      const usage = usageOf(events);
      if (typeof usage?.output_tokens !== "number") return undefined;
      const before = typeof id === "string" ? Number(tools.state.get(`out:${id}`) ?? 0) : 0;
      tools.state.set("pending-out", before + usage.output_tokens);
      if (before > 0) usage.output_tokens = before + usage.output_tokens;
      return events;
    },
    onResponse: (call, res, tools) => {
      const id = res.headers["x-conversation-id"];
      const total = tools.state.get("pending-out");
      if (isSendPost(call) && isEventStream(res) && id && typeof total === "number")
        tools.state.set(`out:${id}`, total);
      return undefined;
    },
  },
  {
    name: "cache-tokens-missing-on-resume",
    area: "sse",
    description:
      "Events rule 4: `message_delta.usage` carries the cache token counts: a deployment that leaves `cache_read_input_tokens` and `cache_creation_input_tokens` out of resumed turns",
    breaks: [],
    onEvents: (events, call, tools) => {
      if (!resumesSeen(call, tools)) return undefined;
      const usage = usageOf(events);
      if (!usage) return undefined;
      delete usage.cache_read_input_tokens;
      delete usage.cache_creation_input_tokens;
      return events;
    },
    onResponse: (call, res, tools) => {
      learnSend(call, res, tools);
      return undefined;
    },
  },
  {
    name: "input-tokens-zero-on-resume",
    area: "meaning",
    description:
      "Events rule 4 and Rule 1 of the service (a resumed turn has its full prior context): a deployment that reports 0 `input_tokens` for resumed turns",
    breaks: [],
    knownGap: HELD,
    onEvents: (events, call, tools) => {
      if (!resumesSeen(call, tools)) return undefined;
      const usage = usageOf(events);
      if (typeof usage?.input_tokens !== "number" || usage.input_tokens === 0) return undefined;
      usage.input_tokens = 0;
      return events;
    },
    onResponse: (call, res, tools) => {
      learnSend(call, res, tools);
      return undefined;
    },
  },
  {
    name: "cost-in-cents",
    area: "meaning",
    description:
      "Events rule 4: `total_cost_usd` is the cost of the turn in US dollars: a deployment on the repository agent that reports it in cents",
    breaks: [],
    onEvents: (events, call) => {
      if (sendAgent(call) !== DEMO.repoAgent) return undefined;
      const usage = usageOf(events);
      if (typeof usage?.total_cost_usd !== "number" || usage.total_cost_usd === 0) return undefined;
      usage.total_cost_usd = Math.round(usage.total_cost_usd * 100 * 1e6) / 1e6;
      return events;
    },
  },
  {
    name: "routed-message-start-without-usage",
    area: "sse",
    description:
      "Events: `message_start` carries `{type, message: {id, model, usage}}`: a deployment whose model-routed send leaves `usage` out of it",
    breaks: [],
    onEvents: (events, call) => {
      if (call.route.kind !== "routed") return undefined;
      for (const e of events) if (e.event === "message_start" && e.data?.message) delete e.data.message.usage;
      return events;
    },
  },
  {
    name: "message-id-empty-on-resume",
    area: "sse",
    description:
      "Events: `message_start.message` carries the message's `id`: a deployment that sends it empty on resumed turns",
    breaks: [],
    onEvents: (events, call, tools) => {
      if (!resumesSeen(call, tools)) return undefined;
      for (const e of events) if (e.event === "message_start" && e.data?.message) e.data.message.id = "";
      return events;
    },
    onResponse: (call, res, tools) => {
      learnSend(call, res, tools);
      return undefined;
    },
  },
  {
    name: "stop-reason-tool-use-when-tools-streamed",
    area: "sse",
    description:
      "Events rule 6: the stop reason seen is `end_turn` (a full agent turn, tools included, has ended): a deployment that says `tool_use` when the turn streamed tool calls",
    breaks: [],
    onEvents: (events) => {
      if (
        !events.some((e) => e.event === "content_block_start" && e.data?.content_block?.type === "tool_use")
      )
        return undefined;
      for (const e of events)
        if (e.event === "message_delta" && e.data?.delta) e.data.delta.stop_reason = "tool_use";
      return events;
    },
  },
  {
    name: "tool-result-reuses-tool-use-index",
    area: "sse",
    description:
      "Events rule 3: `index` is a running counter for the turn: a deployment that gives a `tool_result` block the index of the `tool_use` it answers",
    breaks: [],
    onEvents: (events) => {
      const byTool = new Map<string, number>();
      for (const e of events)
        if (e.event === "content_block_start" && e.data?.content_block?.type === "tool_use")
          byTool.set(String(e.data.content_block.id), e.data.index);
      let changed = false;
      const remap = new Map<number, number>();
      for (const e of events) {
        if (e.event === "content_block_start" && e.data?.content_block?.type === "tool_result") {
          const to = byTool.get(String(e.data.content_block.tool_use_id));
          if (to !== undefined) {
            remap.set(e.data.index, to);
            changed = true;
          }
        }
        if (typeof e.data?.index === "number" && remap.has(e.data.index))
          e.data.index = remap.get(e.data.index);
      }
      return changed ? events : undefined;
    },
  },
  {
    name: "tool-result-without-is-error-with-attachments",
    area: "sse",
    description:
      "Events rule 1: a `tool_result` block carries `tool_use_id`, `content` and `is_error`: a deployment that leaves `is_error` out on turns that carry attachments",
    breaks: [],
    onEvents: (events, call) => {
      if ((attachmentsOf(sendBody(call))?.length ?? 0) === 0) return undefined;
      let changed = false;
      for (const e of events)
        if (e.event === "content_block_start" && e.data?.content_block?.type === "tool_result") {
          delete e.data.content_block.is_error;
          changed = true;
        }
      return changed ? events : undefined;
    },
  },
];

const valueMutations: Mutation[] = [
  {
    name: "turn-count-stuck-at-two",
    area: "consistency",
    description:
      "Conversation, `turn_count`: a deployment whose count stops at 2 (the third turn and later are not counted)",
    breaks: [],
    onResponse: conversationsOn(undefined, (c) => {
      if (typeof c.turn_count === "number" && c.turn_count > 2) c.turn_count = 2;
    }),
  },
  {
    name: "updated-at-frozen-after-second-turn",
    area: "consistency",
    description:
      "Conversation, `updated_at`, and List conversations (ordered newest activity first): a deployment that stops moving `updated_at` after a conversation's second turn",
    breaks: [],
    onResponse: conversationsOn(undefined, (c, _call, tools) => {
      if (typeof c.turn_count !== "number" || typeof c.id !== "string") return;
      const key = `at2:${c.id}`;
      if (c.turn_count === 2 && !tools.state.has(key)) tools.state.set(key, c.updated_at);
      if (c.turn_count > 2 && tools.state.has(key)) c.updated_at = tools.state.get(key);
    }),
  },
  {
    name: "title-follows-prompt-from-third-turn",
    area: "consistency",
    description:
      "Conversation, `title`: derived from the first prompt and never changed afterwards: a deployment that re-derives it from the prompt of the third turn and later",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (isSendPost(call)) {
        learnSend(call, res, tools);
        return undefined;
      }
      return everyConversation(call, res, (c) => {
        const seen = seenOf(tools).get(c.id);
        if (seen && seen.turns >= 3 && typeof c.turn_count === "number" && c.turn_count >= 3)
          c.title = titleFrom(seen.latestPrompt);
      });
    },
  },
  {
    name: "title-from-system",
    area: "consistency",
    description:
      "Conversation, `title`: derived from the first prompt: a deployment that derives it from the first turn's `system` text when one is given",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (isSendPost(call)) {
        learnSend(call, res, tools);
        return undefined;
      }
      return everyConversation(call, res, (c) => {
        const seen = seenOf(tools).get(c.id);
        if (seen?.system && !c.parent_conversation_id) c.title = titleFrom(seen.system);
      });
    },
  },
  {
    name: "title-from-oldest-user-message",
    area: "consistency",
    description:
      "Conversation, `title`: derived from the first prompt, which is the newest `user` element of `messages` (Send a message): a deployment that derives it from the oldest `user` element",
    breaks: [],
    onResponse: (call, res, tools) => {
      const body = sendBody(call);
      const known: Map<string, string> = tools.state.get("oldest") ?? new Map();
      tools.state.set("oldest", known);
      if (body) {
        const seen = learnSend(call, res, tools);
        const users = (Array.isArray(body.messages) ? body.messages : []).filter(
          (m: Json) => m?.role === "user",
        );
        const id = res.headers["x-conversation-id"];
        if (seen?.turns === 1 && id && users.length >= 2) known.set(id, titleFrom(promptText(users[0])));
        return undefined;
      }
      return everyConversation(call, res, (c) => {
        const title = known.get(c.id);
        if (title) c.title = title;
      });
    },
  },
  {
    name: "routed-created-conversation-shared",
    area: "state",
    description:
      "States and transitions: a conversation created by send-message is private (`shared` false by default); the model-routed send has the same behaviour: a deployment whose routed send creates it shared",
    breaks: [],
    onResponse: async (call, res, tools) => {
      if (call.route.kind !== "routed" || !isEventStream(res)) return undefined;
      const id = res.headers["x-conversation-id"];
      const agent = sendAgent(call);
      if (!id || !agent || tools.state.has(`made:${id}`)) return undefined;
      tools.state.set(`made:${id}`, true);
      const got = await tools.forward(ProxyCall.make("GET", conversationPath(agent, id), call.key));
      if (jsonOf(got)?.conversation?.turn_count > 1) return undefined;
      await tools.forward(ProxyCall.make("POST", conversationPath(agent, id), call.key, { shared: true }));
      return undefined;
    },
  },
  {
    name: "routed-created-turn-count-zero",
    area: "consistency",
    description:
      "Conversation, `turn_count`; Model-routed send (same behaviour as send-message): a deployment that does not count turns run through the model-routed send",
    breaks: [],
    onResponse: (call, res, tools) => {
      if (isSendPost(call)) {
        const seen = learnSend(call, res, tools);
        if (seen && call.route.kind === "routed") {
          const id = res.headers["x-conversation-id"];
          tools.state.set(`routedTurns:${id}`, Number(tools.state.get(`routedTurns:${id}`) ?? 0) + 1);
        }
        return undefined;
      }
      return everyConversation(call, res, (c) => {
        const routed = Number(tools.state.get(`routedTurns:${c.id}`) ?? 0);
        if (routed > 0 && typeof c.turn_count === "number") c.turn_count = Math.max(0, c.turn_count - routed);
      });
    },
  },
  {
    name: "list-forked-at-turn-index-null",
    area: "consistency",
    description:
      "Conversation, `forked_at_turn_index`: set on forks: a deployment whose list shows it null for fork children (the single fetch has it)",
    breaks: [],
    onResponse: conversationsOn(["list"], (c) => {
      if (c.parent_conversation_id) c.forked_at_turn_index = null;
    }),
  },
  {
    name: "transcript-parent-id-null",
    area: "consistency",
    description:
      "Conversation, `parent_conversation_id`: set on forks: a deployment whose transcript's conversation object shows it null",
    breaks: [],
    onResponse: conversationsOn(["transcript"], (c) => {
      if (c.parent_conversation_id) {
        c.parent_conversation_id = null;
        c.forked_at_turn_index = null;
      }
    }),
  },
  {
    name: "list-channel-lowercase",
    area: "shapes",
    description:
      "Conversation, `channel`: one of `INTERACTIVE`, `NOTEBOOK`, `SLACK`, `EMAIL`: a deployment whose list writes it in lower case",
    breaks: [],
    onResponse: conversationsOn(["list"], (c) => {
      if (typeof c.channel === "string") c.channel = c.channel.toLowerCase();
    }),
  },
  {
    name: "channel-owned-reported-interactive",
    area: "consistency",
    description:
      "Conversation, `channel`: a conversation owned by a notebook, chat channel or e-mail carries its channel: a deployment whose single fetch and transcript report every conversation as `INTERACTIVE`",
    breaks: [],
    onResponse: conversationsOn(["conversation", "transcript"], (c) => {
      if (typeof c.channel === "string" && c.channel !== "INTERACTIVE") c.channel = "INTERACTIVE";
    }),
  },
  {
    name: "member-fork-unshares-parent",
    area: "state",
    description:
      "States and transitions, fork: the parent is unchanged: a deployment where a member's fork of a shared conversation makes the parent private",
    breaks: [],
    onResponse: async (call, res, tools) => {
      const route = call.route;
      if (route.kind !== "fork" || res.status < 200 || res.status >= 300 || !route.agent || !route.id) return;
      if (!callerIsNotOwner(call, tools)) return undefined;
      const owner = tools.ledger.conversations.get(route.id)?.owner;
      await tools.forward(
        ProxyCall.make("POST", conversationPath(route.agent, route.id), owner, { shared: false }),
      );
      return undefined;
    },
  },
  {
    name: "transcript-author-missing-after-first-turn",
    area: "shapes",
    description:
      "Transcript, message object: `author_user_id` and `author_name` are present on user messages: a deployment that writes them on the first user message only",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "transcript" || res.status !== 200) return undefined;
      const body = jsonOf(res);
      if (!Array.isArray(body?.messages)) return undefined;
      const users = body.messages.filter((m: Json) => m?.role === "user" && !m.is_compact_summary);
      if (users.length < 2) return undefined;
      for (const m of users.slice(1)) {
        delete m.author_user_id;
        delete m.author_name;
      }
      return withJson(res, body);
    },
  },
  {
    name: "list-session-pointer-null",
    area: "consistency",
    description:
      "Conversation, `agent_session_id`: non-null once the server has recorded the turn's session: a deployment whose list always shows it null (the single fetch has it)",
    breaks: [],
    onResponse: conversationsOn(["list"], (c) => {
      c.agent_session_id = null;
    }),
  },
  {
    name: "own-fork-not-owned-in-list",
    area: "consistency",
    description:
      "Fork a conversation: the child is owned by the caller (`is_owner`: whether the caller owns it): a deployment whose list says `is_owner` false for the caller's fork children",
    breaks: [],
    onResponse: conversationsOn(["list"], (c) => {
      if (c.parent_conversation_id) c.is_owner = false;
    }),
  },
  {
    name: "member-fork-child-not-owned",
    area: "consistency",
    description:
      "Fork a conversation: the child is owned by the caller: a deployment whose reads of a member's fork child say `is_owner` false to that member",
    breaks: [],
    onResponse: conversationsOn(undefined, (c, call) => {
      if (c.parent_conversation_id && call.key === DEMO_MEMBER_KEY && c.is_owner === true) c.is_owner = false;
    }),
  },
  {
    name: "member-transcript-says-owner",
    area: "consistency",
    description:
      "Conversation, `is_owner`: whether the caller owns it: a deployment whose transcript route says true to a member reading another's shared conversation",
    breaks: [],
    onResponse: conversationsOn(["transcript"], (c, call, tools) => {
      if (callerIsNotOwner(call, tools, c.id)) c.is_owner = true;
    }),
  },
  {
    name: "repo-agent-created-shared",
    area: "state",
    description:
      "States and transitions: a new conversation is private (`shared` false by default): a deployment whose reads say `shared` true for conversations of the repository-backed agent nobody shared",
    breaks: [],
    onRequest: (call, tools) => {
      const route = call.route;
      if (route.kind === "conversation" && call.method === "POST" && route.id)
        tools.state.set(`toggled:${route.id}`, true);
      return undefined;
    },
    onResponse: conversationsOn(undefined, (c, call, tools) => {
      if (call.route.agent === DEMO.repoAgent && !tools.state.get(`toggled:${c.id}`)) c.shared = true;
    }),
  },
  {
    name: "repo-agent-session-never-recorded",
    area: "state",
    description:
      "States and transitions: after a turn with output `agent_session_id` becomes non-null: a deployment whose repository agent never records it",
    breaks: [],
    knownGap: HELD,
    onResponse: conversationsOn(undefined, (c, call) => {
      if (call.route.agent === DEMO.repoAgent) c.agent_session_id = null;
    }),
  },
  {
    name: "fork-default-forked-at-turn-zero",
    area: "consistency",
    description:
      "Fork a conversation: without `at_turn` all turns are copied, and the result's `forked_at_turn` says where: a deployment that answers 0 there when `at_turn` was omitted",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "fork" || res.status < 200 || res.status >= 300) return undefined;
      if (call.json()?.at_turn !== undefined) return undefined;
      const body = jsonOf(res);
      if (!body || typeof body.forked_at_turn !== "number" || body.forked_at_turn === 0) return undefined;
      body.forked_at_turn = 0;
      return withJson(res, body);
    },
  },
  {
    name: "fork-child-transcript-all-turns",
    area: "consistency",
    description:
      "Fork a conversation, `at_turn`: copies history up to this turn: a deployment whose child's transcript shows every turn of the parent (the context is cut, the stored messages are not)",
    breaks: [],
    onResponse: async (call, res, tools) => {
      if (call.route.kind !== "transcript" || res.status !== 200 || !call.route.agent) return undefined;
      const body = jsonOf(res);
      const parent = body?.conversation?.parent_conversation_id;
      const at = body?.conversation?.forked_at_turn_index;
      if (typeof parent !== "string" || typeof at !== "number" || !Array.isArray(body.messages)) return;
      const owner = tools.ledger.conversations.get(parent)?.owner ?? call.key;
      const of = await tools.forward(
        ProxyCall.make("GET", `${conversationPath(call.route.agent, parent)}/messages`, owner),
      );
      const parentMessages = jsonOf(of)?.messages;
      if (!Array.isArray(parentMessages)) return undefined;
      const copied = body.messages.slice(0, at * 2);
      const extra = parentMessages.slice(copied.length);
      if (extra.length === 0 || parentMessages.length <= at * 2) return undefined;
      body.messages = [...parentMessages, ...body.messages.slice(at * 2)];
      return withJson(res, body);
    },
  },
  {
    name: "fork-child-transcript-own-turns-only",
    area: "consistency",
    description:
      "Fork a conversation: the child's history is the parent's up to `at_turn`: a deployment whose child's transcript leaves the copied turns out (only the child's own turns)",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "transcript" || res.status !== 200) return undefined;
      const body = jsonOf(res);
      const at = body?.conversation?.forked_at_turn_index;
      if (!body?.conversation?.parent_conversation_id || typeof at !== "number" || at <= 0) return undefined;
      if (!Array.isArray(body.messages) || body.messages.length === 0) return undefined;
      body.messages = body.messages.slice(at * 2);
      return withJson(res, body);
    },
  },
  {
    name: "transcript-turn-count-from-creation",
    area: "consistency",
    description:
      "Conversation, `turn_count`: a deployment whose transcript's conversation object keeps the count it had after the first turn",
    breaks: [],
    onResponse: conversationsOn(["transcript"], (c) => {
      if (typeof c.turn_count === "number" && c.turn_count > 1) c.turn_count = 1;
    }),
  },
  {
    name: "member-list-ignores-channel-id",
    area: "consistency",
    description:
      "List conversations: `channel_id` filters the list: a deployment that ignores it for a member's key (a non-admin query path)",
    breaks: [],
    onRequest: (call) => {
      if (call.route.kind !== "list" || call.method !== "GET" || call.key !== DEMO_MEMBER_KEY) return;
      const q = call.url.searchParams;
      if (!q.has("channel_id")) return;
      q.delete("channel_id");
      call.path = `${call.path.split("?")[0]}${q.size ? `?${q.toString()}` : ""}`;
      return undefined;
    },
  },
  {
    name: "viewer-list-ignores-since",
    area: "consistency",
    description:
      "List conversations: `since` filters the list: a deployment that ignores it for a Viewer's key",
    breaks: [],
    onRequest: (call) => {
      if (call.route.kind !== "list" || call.method !== "GET" || call.key !== DEMO_VIEWER_KEY) return;
      const q = call.url.searchParams;
      if (!q.has("since")) return;
      q.delete("since");
      call.path = `${call.path.split("?")[0]}${q.size ? `?${q.toString()}` : ""}`;
      return undefined;
    },
  },
  {
    name: "fork-result-parent-is-child",
    area: "consistency",
    description:
      "Fork result: `parent_conversation_id` is the conversation forked: a deployment that puts the child's own id there",
    breaks: [],
    onResponse: (call, res) => {
      if (call.route.kind !== "fork" || res.status < 200 || res.status >= 300) return undefined;
      const body = jsonOf(res);
      if (typeof body?.conversation_id !== "string") return undefined;
      body.parent_conversation_id = body.conversation_id;
      return withJson(res, body);
    },
  },
  {
    name: "fork-child-index-not-clamped",
    area: "consistency",
    description:
      "Fork a conversation: `at_turn` is clamped to the conversation's length: a deployment whose result is clamped but whose child stores the asked turn as `forked_at_turn_index`",
    breaks: [],
    onResponse: (call, res, tools) => {
      const route = call.route;
      if (route.kind === "fork" && res.status >= 200 && res.status < 300) {
        const asked = call.json()?.at_turn;
        const body = jsonOf(res);
        if (
          typeof asked === "number" &&
          typeof body?.forked_at_turn === "number" &&
          asked > body.forked_at_turn
        )
          tools.state.set(`asked:${body.conversation_id}`, asked);
        return undefined;
      }
      return everyConversation(call, res, (c) => {
        const asked = tools.state.get(`asked:${c.id}`);
        if (typeof asked === "number") c.forked_at_turn_index = asked;
      });
    },
  },
  {
    name: "reshare-after-unshare-ignored",
    area: "state",
    description:
      'Toggle sharing / States and transitions: `{"shared": true}` makes the conversation shared: a deployment that answers as usual but keeps a conversation private once it was unshared',
    breaks: [],
    knownGap: HELD,
    onRequest: (call, tools) => {
      const route = call.route;
      if (route.kind !== "conversation" || call.method !== "POST" || !route.id) return;
      const wanted = call.json()?.shared;
      if (wanted === false) tools.state.set(`unshared:${route.id}`, true);
      if (wanted === true && tools.state.get(`unshared:${route.id}`)) call.setJson({ shared: false });
      return undefined;
    },
  },
];

export const outsideMutations5: Mutation[] = [
  ...sendMutations,
  ...statusMutations,
  ...afterDeleteMutations,
  ...headerMutations,
  ...streamMutations,
  ...valueMutations,
].map((m) => ({ ...m, outsideRound: 5 }));
