/**
 * Outside round 9: breakages written from the API's text alone by someone who had not read the checks, the
 * earlier rounds' rows (their names aside) or the catalogue of catchers. Each row is one fault a real
 * deployment could plausibly have, departing from one rule of the API text (cited in its description), and
 * aimed at a corner: one agent kind, one key role, one route, one turn depth, one input shape, a field of the
 * right type holding a wrong value, state going wrong across time, which status wins, what a stream's events
 * mean. A row changes an answer only where its fault applies and passes everything else through untouched;
 * what happened to a conversation comes from the traffic the row has seen (its per-proxy state, `tools.state`).
 * `breaks` stays empty: the rows are judged as `agent-api check` judges a deployment.
 */
import { CONVERSATION_CARRIERS } from "./conversation-rewrites.ts";
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
  forwardAs,
  is2xx,
  isFresh,
  isSendPost,
  listQuery,
  noteFresh,
  sendAgent,
  sendBody,
  setQuery,
  throughAgent,
} from "./outside-helpers.ts";
import {
  isEventStream,
  type Json,
  jsonOf,
  type Mutation,
  ProxyCall,
  type ProxyResponse,
  type ProxyTools,
  type SseEvent,
  withJson,
} from "./proxy-calls.ts";

/** The demo deployment's keys, as it knows them. */
const ADMIN = "demo-admin-key";
const MEMBER = "demo-member-key";
const VIEWER = "demo-viewer-key";
const REVOKED = "demo-revoked-key";
const OTHER = "other-admin-key";
const FLOW = "demo-flow-key";
const DEMO_KEYS = [ADMIN, MEMBER, VIEWER];

/** The demo's models and the automation's stored prompt and model, as the deployment holds them. */
const DISPLAY_NAMES: Record<string, string> = { "demo-small": "Demo Small", "demo-large": "Demo Large" };
const AUTOMATION_PROMPT = "Summarise the day. Always include the token AUTOMATION-PROMPT-USED";
const AUTOMATION_MODEL = "demo-small";

// ---------------------------------------------------------------------------------------------------------
// What the rows learn from traffic (per proxy).

interface ForkInfo {
  parent: string;
  agent: string;
  owner: string | undefined;
  turn: number;
  session: string | undefined;
}

/** Records a fork's child (its parent, agent, owner, forked turn) from a 2xx fork answer. */
function trackForks(call: ProxyCall, res: ProxyResponse, tools: ProxyTools): void {
  if (call.route.kind !== "fork" || call.method !== "POST" || !is2xx(res)) return;
  const body = jsonOf(res);
  const child = body?.conversation_id;
  const parent = call.route.id;
  if (typeof child !== "string" || parent === undefined || call.route.agent === undefined) return;
  bag<ForkInfo>(tools, "forks").set(child, {
    parent,
    agent: call.route.agent,
    owner: call.key,
    turn: typeof body.forked_at_turn === "number" ? body.forked_at_turn : 0,
    session: typeof body.agent_session_id === "string" ? body.agent_session_id : undefined,
  });
}

const forksOf = (tools: ProxyTools) => bag<ForkInfo>(tools, "forks");

/** Records share toggles answered 2xx: the current flag, and whether the conversation was ever shared. */
function trackShares(call: ProxyCall, res: ProxyResponse, tools: ProxyTools): void {
  if (call.route.kind !== "conversation" || call.method !== "POST" || !is2xx(res)) return;
  const shared = call.json()?.shared;
  const id = call.route.id;
  if (typeof shared !== "boolean" || id === undefined) return;
  bag<boolean>(tools, "shared").set(id, shared);
  if (shared) bag<boolean>(tools, "ever-shared").set(id, true);
}

const isShared = (tools: ProxyTools, id: string | undefined) =>
  id !== undefined && bag<boolean>(tools, "shared").get(id) === true;
const wasUnshared = (tools: ProxyTools, id: string | undefined) =>
  id !== undefined && bag<boolean>(tools, "ever-shared").get(id) === true && !isShared(tools, id);

/** Records deletes answered 2xx. */
function trackDeletes(call: ProxyCall, res: ProxyResponse, tools: ProxyTools): void {
  if (call.route.kind !== "conversation" || call.method !== "DELETE" || !is2xx(res)) return;
  if (call.route.id !== undefined) bag<boolean>(tools, "deleted").set(call.route.id, true);
}

const isDeleted = (tools: ProxyTools, id: string | undefined) =>
  id !== undefined && bag<boolean>(tools, "deleted").get(id) === true;

/** A send answered with an event stream: its conversation id. */
function sentTurn(call: ProxyCall, res: ProxyResponse): string | undefined {
  if (!isSendPost(call) || !isEventStream(res)) return undefined;
  return answerId(call, res);
}

/** A call naming neither `model` nor `automation` run on `model`, as a deployment that stored it would. */
function runStoredModel(call: ProxyCall, model: string): undefined {
  return editSend(
    call,
    (body) => body.model === undefined && body.metadata?.automation === undefined,
    (body) => {
      body.model = model;
    },
  );
}

/** Records when a turn's stream on a conversation ended (the proxy has it whole when `onResponse` runs). */
function noteTurnEnd(call: ProxyCall, res: ProxyResponse, tools: ProxyTools): void {
  const id = sentTurn(call, res);
  if (id !== undefined) bag<number>(tools, "turn-ended").set(id, Date.now());
}

/** A turn on the conversation ended within the last few seconds (the window the session is recorded in). */
const justEnded = (tools: ProxyTools, id: string) => {
  const at = bag<number>(tools, "turn-ended").get(id);
  return at !== undefined && Date.now() - at < 5_000;
};

/** The conversation objects of a GET answer, edited asynchronously (a row that reads upstream first). */
async function editConversationsAsync(
  call: ProxyCall,
  res: ProxyResponse,
  edit: (c: Json) => Promise<boolean>,
): Promise<ProxyResponse | undefined> {
  if (res.status !== 200 || call.method !== "GET") return undefined;
  const carrier = CONVERSATION_CARRIERS[call.route.kind];
  if (!carrier) return undefined;
  const body = jsonOf(res);
  let changed = false;
  for (const c of carrier(body)) if (c && (await edit(c))) changed = true;
  return changed ? withJson(res, body) : undefined;
}

/** Reads one conversation upstream as `key` sees it (undefined when not 200). */
async function readConversation(
  tools: ProxyTools,
  agent: string,
  id: string,
  key: string | undefined,
): Promise<Json> {
  const res = await tools.forward(ProxyCall.make("GET", conversationPath(agent, id), key));
  return res.status === 200 ? jsonOf(res)?.conversation : undefined;
}

/** Edits the events of a 200 stream only when `edit` reports a change. */
function mapEvents(events: SseEvent[], edit: (e: SseEvent) => boolean): SseEvent[] | undefined {
  let changed = false;
  for (const e of events) if (edit(e)) changed = true;
  return changed ? events : undefined;
}

const blockTypeAt = (events: SseEvent[], index: number): string | undefined =>
  events.find((e) => e.event === "content_block_start" && e.data?.index === index)?.data?.content_block?.type;

/** A send whose conversation id a row took away, and the id it answers with anyway. */
const claimed = new WeakMap<ProxyCall, string>();

// ---------------------------------------------------------------------------------------------------------

/** No named check sends this combination; the explorer's default draw (150 sequences, seed 5) reaches it. */
const EXPLORER_CATCH =
  "a rule asked under a combination no named check sends (a key, an agent kind, a route, a flag, a depth); the explorer's model judges it and its default draw reaches it";
/** Modelled by the explorer but not drawn: the combination is rarer than its default 150 sequences reach. */
const DRAW_GAP =
  "the explorer's model predicts this answer, but its default draw (150 sequences, seed 5) does not meet the combination (a revoked or foreign key with a taken id, a fork after an unshare or of an orphan, a sibling's delete, channel-owned conversations under since, a fork's model on its parent, stream false with a model): which rare combinations a draw meets moves with every change to what it draws, so these are gaps, not catches; no named check sends them";
const FOREIGN_WORKSPACE_GAP =
  "the inputs do not say that --foreign-key belongs to the workspace of --foreign-agent, so what that key may do on that agent is not the suite's to predict";
const FLOW_KEY_GAP =
  "the API does not say whether a deployed-flow key is refused on the agent routes (Authentication 6): a correct deployment could read it either way";
const SYSTEM_ABSENCE_GAP =
  "that a later turn without `system` no longer follows it is judged only by a directive's absence, which a real model imitating its own earlier replies breaks on a correct deployment";
const SANITIZED_NAME_GAP =
  "how a name with a space is sanitized is not shown, so a turn cannot be asked to read the file by the name it is stored under";
const HEADER_WHITESPACE_GAP =
  "HTTP strips the whitespace around a header value, so an id with surrounding whitespace cannot come back verbatim in X-Conversation-Id from a correct deployment";
const FORK_SESSION_GAP =
  "the API lists `agent_session_id` in the fork result without saying it is the pointer the child then shows";
const REPLY_MESSAGES_GAP =
  "how many assistant messages a turn's reply takes in the transcript is not shown (tool steps may add some), so an extra one repeating an earlier reply is not told apart";
const COMPACTION_GAP =
  "a second compaction takes a conversation long enough to be compacted twice: more turns than a run spends on one rule";
const AUTOMATION_PROMPT_GAP =
  "an automation's stored prompt is not shown through the API, and a title may be a deployment's own summary of the prompt: a title taken from the stored prompt is not told apart";
const SESSION_WINDOW_GAP =
  "a pointer may move until a few seconds after its own conversation's turn: two conversations sharing one is told only by a wait after each turn, which no check makes for a member's conversations";
const NOTEBOOK_GAP =
  "the suite knows no private notebook conversation of another user to look for (the inputs give one notebook path, not its owner)";

export const outsideMutations9: Mutation[] = [
  // ===================================== status precedence and key roles =====================================
  {
    name: "revoked-key-fork-onto-taken-id-409",
    area: "status",
    description:
      "Authentication 4 / Errors: a revoked key gives 401 with `API key has been revoked`, whatever the request; " +
      "this deployment checks a fork's requested `conversation_id` before the key and answers a revoked key 409 when the id is taken.",
    breaks: [],
    outsideRound: 9,
    knownGap: DRAW_GAP,
    onRequest(call, tools) {
      const want = forkBody(call)?.conversation_id;
      if (call.key !== REVOKED || typeof want !== "string" || !tools.ledger.conversations.has(want)) return;
      return apiError(409, "invalid_request_error", `Conversation id already taken: ${want}`);
    },
  },
  {
    name: "foreign-admin-reads-through-own-agent",
    area: "status",
    description:
      "Authentication 2 / Errors 404: a key reaches only its workspace's agents and a conversation on a different agent or workspace is 404; " +
      "this deployment looks a conversation up by id alone, so another workspace's admin reads a demo conversation through its own agent's path.",
    breaks: [],
    outsideRound: 9,
    async onRequest(call, tools) {
      const kind = call.route.kind;
      if (call.method !== "GET" || call.key !== OTHER || call.route.agent !== DEMO.foreignAgent) return;
      if (kind !== "conversation" && kind !== "transcript" && kind !== "compaction") return;
      const entry = call.route.id ? tools.ledger.conversations.get(call.route.id) : undefined;
      if (!entry || !DEMO_AGENTS.includes(entry.agent)) return;
      return forwardAs(
        call,
        tools,
        { path: throughAgent(call, entry.agent), key: entry.owner },
        (res) => res.status === 200,
      );
    },
  },
  {
    name: "foreign-workspace-send-claims-demo-id",
    area: "status",
    description:
      "Send a message, conversation id resolution: an id that belongs to a different workspace gives 404 `Conversation not found`; " +
      "this deployment scopes ids per workspace and starts a new conversation under the other workspace's id, echoing it in `X-Conversation-Id`.",
    breaks: [],
    outsideRound: 9,
    onRequest(call, tools) {
      const body = sendBody(call);
      const id = call.conversationId;
      if (!body || call.key !== OTHER || sendAgent(call) !== DEMO.foreignAgent || id === undefined) return;
      const entry = tools.ledger.conversations.get(id);
      if (!entry || !DEMO_AGENTS.includes(entry.agent)) return;
      delete body.metadata.conversation_id;
      call.setJson(body);
      claimed.set(call, id);
    },
    onResponse(call, res) {
      const id = claimed.get(call);
      if (id === undefined || !isEventStream(res)) return;
      return { ...res, headers: { ...res.headers, "x-conversation-id": id } };
    },
  },
  {
    name: "owner-send-into-own-shared-403",
    area: "status",
    description:
      "Send a message, conversation id resolution: the caller's own conversation on this agent resumes (403 is only for someone else's shared one); " +
      "this deployment checks the `shared` flag before the owner and refuses the owner's own turn once the conversation is shared.",
    breaks: [],
    outsideRound: 9,
    onRequest(call, tools) {
      const id = call.conversationId;
      if (!isSendPost(call) || !isShared(tools, id) || id === undefined) return;
      if (tools.ledger.conversations.get(id)?.owner !== call.key) return;
      return apiError(403, "permission_error", "A shared conversation is read-only; fork it instead");
    },
    onResponse(call, res, tools) {
      trackShares(call, res, tools);
      return undefined;
    },
  },
  {
    name: "unshared-send-still-403",
    area: "status",
    description:
      "States and transitions, share toggle false: the conversation is private again, so another member's send is 404 (existence never leaked); " +
      "this deployment remembers it was once shared and keeps answering 403.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onRequest(call, tools) {
      const id = call.conversationId;
      if (!isSendPost(call) || !wasUnshared(tools, id) || !callerIsNotOwner(call, tools, id)) return;
      return apiError(403, "permission_error", "A shared conversation is read-only; fork it instead");
    },
    onResponse(call, res, tools) {
      trackShares(call, res, tools);
      return undefined;
    },
  },
  {
    name: "member-fork-after-unshare-allowed",
    area: "status",
    description:
      "States and transitions: a fork needs a caller who may read the conversation, and after `shared` false it is private again (404 to others); " +
      "this deployment caches the share grant and still forks it for the member who could read it before.",
    breaks: [],
    outsideRound: 9,
    knownGap: DRAW_GAP,
    async onRequest(call, tools) {
      const id = call.route.id;
      if (call.route.kind !== "fork" || call.method !== "POST" || !wasUnshared(tools, id)) return;
      if (!callerIsNotOwner(call, tools, id) || id === undefined) return;
      return forwardAs(call, tools, { key: tools.ledger.conversations.get(id)?.owner }, is2xx);
    },
    onResponse(call, res, tools) {
      trackShares(call, res, tools);
      return undefined;
    },
  },
  {
    name: "routed-member-send-into-private-403",
    area: "status",
    description:
      "Model-routed send (same behaviour as send-message) / conversation id resolution: someone else's unshared conversation is 404, existence never leaked; " +
      "the model-routed path of this deployment answers 403 instead.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onRequest(call, tools) {
      const id = call.conversationId;
      if (call.route.kind !== "routed" || call.method !== "POST" || id === undefined) return;
      if (!callerIsNotOwner(call, tools, id) || isShared(tools, id)) return;
      return apiError(403, "permission_error", "You may not write to this conversation");
    },
    onResponse(call, res, tools) {
      trackShares(call, res, tools);
      return undefined;
    },
  },
  {
    name: "routed-other-workspace-key-404",
    area: "status",
    description:
      "Model-routed send: the agent is selected by `model`, among the key's workspace's agents (Authentication 2); " +
      "this deployment's router knows only the first workspace's agents, so another workspace's admin routing to its own agent gets 404.",
    breaks: [],
    outsideRound: 9,
    knownGap: FOREIGN_WORKSPACE_GAP,
    onRequest(call) {
      if (call.route.kind !== "routed" || call.method !== "POST" || call.key !== OTHER) return;
      if (sendAgent(call) !== DEMO.foreignAgent) return;
      return apiError(404, "not_found_error", `Agent not found: ${DEMO.foreignAgent}`);
    },
  },
  {
    name: "send-before-session-recorded-409",
    area: "status",
    description:
      "States and transitions / Errors, silent failure modes: a message sent before `agent_session_id` is recorded resumes with no session and no error is returned; " +
      "this deployment refuses it with 409 while the session is still being recorded.",
    breaks: [],
    outsideRound: 9,
    async onRequest(call, tools) {
      const id = call.conversationId;
      const agent = sendAgent(call);
      if (!isSendPost(call) || id === undefined || agent === undefined) return;
      const entry = tools.ledger.conversations.get(id);
      if (!entry || entry.owner !== call.key || !justEnded(tools, id)) return;
      const c = await readConversation(tools, agent, id, call.key);
      if (!c || c.agent_session_id !== null || !(c.turn_count > 0)) return;
      return apiError(
        409,
        "invalid_request_error",
        "The previous turn is still being recorded; retry shortly",
      );
    },
    onResponse(call, res, tools) {
      noteTurnEnd(call, res, tools);
      return undefined;
    },
  },
  {
    name: "fork-before-session-recorded-409",
    area: "status",
    description:
      "States and transitions, fork: a caller who may read the conversation gets a child, whatever the session pointer; " +
      "this deployment answers 409 to a fork made before the parent's `agent_session_id` was recorded.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    async onRequest(call, tools) {
      const id = call.route.id;
      if (call.route.kind !== "fork" || call.method !== "POST" || id === undefined || !call.route.agent)
        return;
      if (!justEnded(tools, id)) return;
      const c = await readConversation(tools, call.route.agent, id, call.key);
      if (!c || c.agent_session_id !== null || !(c.turn_count > 0)) return;
      return apiError(409, "invalid_request_error", "The conversation's session is not recorded yet");
    },
    onResponse(call, res, tools) {
      noteTurnEnd(call, res, tools);
      return undefined;
    },
  },
  {
    name: "flow-key-lists-conversations",
    area: "status",
    description:
      "Authentication 1 and 4: the agent routes take a workspace API key and an unrecognized key gives 401; a deployed-flow key is a separate key " +
      "(Authentication 6); this deployment accepts the flow key on the conversation list, as the flow's run-as member.",
    breaks: [],
    outsideRound: 9,
    knownGap: FLOW_KEY_GAP,
    async onRequest(call, tools) {
      if (call.route.kind !== "list" || call.method !== "GET" || call.key !== FLOW) return;
      return forwardAs(call, tools, { key: ADMIN }, (res) => res.status === 200);
    },
  },
  {
    name: "other-admin-deletes-through-own-agent",
    area: "status",
    description:
      "Delete a conversation: owner only, and a conversation on a different agent or workspace is 404 (Errors); " +
      "this deployment resolves the id across workspaces, so another workspace's admin deletes a demo conversation through its own agent's path.",
    breaks: [],
    outsideRound: 9,
    knownGap: DRAW_GAP,
    async onRequest(call, tools) {
      if (call.method !== "DELETE" || call.route.kind !== "conversation" || call.key !== OTHER) return;
      const entry = call.route.id ? tools.ledger.conversations.get(call.route.id) : undefined;
      if (call.route.agent !== DEMO.foreignAgent || !entry || !DEMO_AGENTS.includes(entry.agent)) return;
      return forwardAs(call, tools, { path: throughAgent(call, entry.agent), key: entry.owner }, is2xx);
    },
  },
  {
    name: "revoked-key-reads-shared-transcript",
    area: "status",
    description:
      "Authentication 4: a revoked key gives 401 `API key has been revoked` on every route; this deployment checks revocation only for writes, " +
      "so the revoked member reads the transcript of a conversation shared with the workspace.",
    breaks: [],
    outsideRound: 9,
    knownGap: DRAW_GAP,
    async onRequest(call, tools) {
      if (call.route.kind !== "transcript" || call.method !== "GET" || call.key !== REVOKED) return;
      if (!isShared(tools, call.route.id)) return;
      return forwardAs(call, tools, { key: MEMBER }, (res) => res.status === 200);
    },
    onResponse(call, res, tools) {
      trackShares(call, res, tools);
      return undefined;
    },
  },
  {
    name: "fork-onto-others-private-id-404",
    area: "status",
    description:
      "Fork a conversation: a `conversation_id` for the child that is already taken gives 409 (Errors 409); " +
      "this deployment answers 404 when the taken id belongs to another member's private conversation.",
    breaks: [],
    outsideRound: 9,
    knownGap: DRAW_GAP,
    onRequest(call, tools) {
      const want = forkBody(call)?.conversation_id;
      if (typeof want !== "string" || call.key === undefined) return;
      const entry = tools.ledger.conversations.get(want);
      if (!entry || entry.owner === call.key || isShared(tools, want)) return;
      return apiError(404, "not_found_error", "Conversation not found");
    },
    onResponse(call, res, tools) {
      trackShares(call, res, tools);
      return undefined;
    },
  },
  {
    name: "routed-bare-foreign-name-crosses-workspace",
    area: "status",
    description:
      "Authentication 2: a key reaches only its workspace's agents, another workspace's agent gives 404; the model-routed send of this " +
      "deployment resolves a bare agent name across workspaces and runs the other workspace's agent for a demo key.",
    breaks: [],
    outsideRound: 9,
    async onRequest(call, tools) {
      if (call.route.kind !== "routed" || call.method !== "POST" || !DEMO_KEYS.includes(call.key ?? ""))
        return;
      if (sendAgent(call) !== DEMO.foreignAgent) return;
      return forwardAs(call, tools, { key: OTHER }, isEventStream);
    },
  },
  {
    name: "routed-send-into-fork-child-404",
    area: "status",
    description:
      "Model-routed send, same behaviour as send-message: the caller's own conversation on this agent resumes; " +
      "this deployment's routed path does not find fork children and answers 404 `Conversation not found`.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onRequest(call, tools) {
      const id = call.conversationId;
      if (call.route.kind !== "routed" || call.method !== "POST" || id === undefined) return;
      if (!forksOf(tools).has(id)) return;
      return apiError(404, "not_found_error", "Conversation not found");
    },
    onResponse(call, res, tools) {
      trackForks(call, res, tools);
      return undefined;
    },
  },
  {
    name: "operator-share-silently-ignored",
    area: "silent",
    description:
      "Toggle sharing / States and transitions: the owner's `{\"shared\": true}` makes it shared; this deployment answers an Operator owner's toggle " +
      "as if it worked and leaves `shared` false (only Admin toggles take effect).",
    breaks: [],
    outsideRound: 9,
    async onRequest(call, tools) {
      const id = call.route.id;
      if (
        call.route.kind !== "conversation" ||
        call.method !== "POST" ||
        call.key !== MEMBER ||
        !call.route.agent
      )
        return;
      if (id === undefined || tools.ledger.conversations.get(id)?.owner !== MEMBER) return;
      if (typeof call.json()?.shared !== "boolean") return;
      const res = await tools.forward(
        ProxyCall.make("GET", conversationPath(call.route.agent, id), call.key),
      );
      return res.status === 200 ? res : undefined;
    },
  },

  // ============================================ send body and metadata ============================================
  {
    name: "system-sticks-to-next-turn",
    area: "send",
    description:
      "Send a message, `system`: appended to the agent's own instructions for the call that carries it; " +
      "this deployment stores the first turn's `system` on the conversation and appends it to later turns that send none.",
    breaks: [],
    outsideRound: 9,
    knownGap: SYSTEM_ABSENCE_GAP,
    onRequest(call, tools) {
      const id = call.conversationId;
      if (id === undefined) return;
      const saved = bag<string>(tools, "system").get(id);
      if (saved === undefined) return;
      return editSend(
        call,
        (body) => body.system === undefined,
        (body) => {
          body.system = saved;
        },
      );
    },
    onResponse(call, res, tools) {
      const id = sentTurn(call, res);
      const system = sendBody(call)?.system;
      if (id !== undefined && typeof system === "string" && system !== "")
        bag<string>(tools, "system").set(id, system);
      return undefined;
    },
  },
  {
    name: "attachment-name-with-space-dropped",
    area: "silent",
    description:
      "Attachment `name`: sanitized to a safe basename and de-duplicated; this deployment drops an attachment whose name has a space instead of sanitizing it.",
    breaks: [],
    outsideRound: 9,
    knownGap: SANITIZED_NAME_GAP,
    onRequest(call) {
      const hasSpace = (a: Json) => typeof a?.name === "string" && a.name.includes(" ");
      return editSend(
        call,
        (body) => Boolean(attachmentsOf(body)?.some(hasSpace)),
        (body) => {
          body.metadata.attachments = attachmentsOf(body)?.filter((a) => !hasSpace(a));
        },
      );
    },
  },
  {
    name: "attachments-dropped-with-tool-streaming",
    area: "silent",
    description:
      "metadata `attachments`: each file is written to `.uploads/<name>` and announced to the agent, whatever `stream_tool_calls` says; " +
      "this deployment's tool-streaming path forgets the turn's attachments.",
    breaks: [],
    outsideRound: 9,
    onRequest(call) {
      return editSend(
        call,
        (body) => body.metadata?.stream_tool_calls === true && (attachmentsOf(body)?.length ?? 0) > 0,
        (body) => {
          body.metadata.attachments = [];
        },
      );
    },
  },
  {
    name: "read-only-true-refused-on-storage-agent",
    area: "send",
    description:
      "metadata `read_only` (default true for API-key calls): an explicit `true` is its default and storage-backed agents never push; " +
      "this deployment refuses an explicit `read_only: true` on a storage-backed agent with 400.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onRequest(call) {
      const body = sendBody(call);
      const agent = sendAgent(call);
      if (body?.metadata?.read_only !== true || (agent !== DEMO.defaultAgent && agent !== DEMO.storageAgent))
        return;
      return apiError(400, "invalid_request_error", "read_only applies only to repository-backed agents");
    },
  },
  {
    name: "isolated-false-read-as-true-on-notes-agent",
    area: "send",
    description:
      "metadata `isolated` (default false): `false` keeps the agent's workspace files; this deployment tests for the key's presence on the " +
      "storage-backed agent with files, so an explicit `isolated: false` runs in a throwaway sandbox without them.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onRequest(call) {
      if (sendAgent(call) !== DEMO.storageAgent) return;
      return editSend(
        call,
        (body) => body.metadata?.isolated === false,
        (body) => {
          body.metadata.isolated = true;
        },
      );
    },
  },
  {
    name: "member-automation-ignored",
    area: "send",
    description:
      "metadata `automation`: the active automation's stored prompt and model become the turn's defaults, for any key that may run a turn " +
      "(Admin, Builder, Operator); this deployment applies automations only to Admin keys.",
    breaks: [],
    outsideRound: 9,
    onRequest(call) {
      if (call.key !== MEMBER) return;
      return editSend(
        call,
        (body) => typeof body.metadata?.automation === "string",
        (body) => {
          delete body.metadata.automation;
        },
      );
    },
  },
  {
    name: "stream-false-ignores-model",
    area: "send",
    description:
      "Send a message: `stream: false` still yields an event stream of the same turn, and `model` selects the turn's model; " +
      "this deployment's non-streaming path drops `model` and runs the agent's default.",
    breaks: [],
    outsideRound: 9,
    knownGap: DRAW_GAP,
    onRequest(call) {
      if (call.route.kind !== "send") return;
      return editSend(
        call,
        (body) => body.stream === false && typeof body.model === "string",
        (body) => {
          delete body.model;
        },
      );
    },
  },
  {
    name: "max-tokens-zero-refused",
    area: "send",
    description:
      "Send a message: `max_tokens` is accepted and ignored; this deployment validates it as the messages API does and refuses `max_tokens: 0` with 400.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onRequest(call) {
      if (sendBody(call)?.max_tokens !== 0) return;
      return apiError(400, "invalid_request_error", "max_tokens: must be at least 1");
    },
  },
  {
    name: "fork-model-default-leaks-to-parent",
    area: "state",
    description:
      "Fork `model`: recorded on the child as a default for its future turns, and the parent is unchanged (States and transitions, fork); " +
      "this deployment records the fork's model on the parent too, so the parent's next turn runs it.",
    breaks: [],
    outsideRound: 9,
    knownGap: DRAW_GAP,
    onRequest(call, tools) {
      const id = call.conversationId;
      const model = id === undefined ? undefined : bag<string>(tools, "parent-model").get(id);
      if (model === undefined || call.route.kind !== "send") return;
      return runStoredModel(call, model);
    },
    onResponse(call, res, tools) {
      const model = forkBody(call)?.model;
      if (is2xx(res) && typeof model === "string" && call.route.id !== undefined)
        bag<string>(tools, "parent-model").set(call.route.id, model);
      return undefined;
    },
  },
  {
    name: "automation-model-sticks-to-next-turn",
    area: "state",
    description:
      "metadata `automation`: its model becomes a default for the turn; with neither `model` nor `automation` a later turn falls back to the agent's default; " +
      "this deployment records the automation's model on the conversation and keeps using it.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onRequest(call, tools) {
      const id = call.conversationId;
      if (id === undefined || !bag<boolean>(tools, "automated").get(id)) return;
      return runStoredModel(call, AUTOMATION_MODEL);
    },
    onResponse(call, res, tools) {
      const id = sentTurn(call, res);
      if (id !== undefined && sendBody(call)?.metadata?.automation === DEMO.automation)
        bag<boolean>(tools, "automated").set(id, true);
      return undefined;
    },
  },
  {
    name: "body-model-sticks-to-next-turn",
    area: "state",
    description:
      "Send a message `model`: falls back to the automation's model, then the agent's default, when a call omits it; " +
      "this deployment remembers the model a conversation's last call named and keeps running it.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onRequest(call, tools) {
      const id = call.conversationId;
      const model = id === undefined ? undefined : bag<string>(tools, "body-model").get(id);
      if (model === undefined || call.route.kind !== "send") return;
      return runStoredModel(call, model);
    },
    onResponse(call, res, tools) {
      const id = sentTurn(call, res);
      const model = sendBody(call)?.model;
      if (id !== undefined && call.route.kind === "send" && typeof model === "string")
        bag<string>(tools, "body-model").set(id, model);
      return undefined;
    },
  },
  {
    name: "conversation-id-whitespace-trimmed",
    area: "send",
    description:
      "Conversation `id`: any string chosen by the caller; an unknown id is created with exactly that id, verbatim; " +
      "this deployment trims surrounding whitespace from a caller's id.",
    breaks: [],
    outsideRound: 9,
    knownGap: HEADER_WHITESPACE_GAP,
    onRequest(call) {
      return editSend(
        call,
        (body) => {
          const id = body.metadata?.conversation_id;
          return typeof id === "string" && id.trim() !== id && id.trim() !== "";
        },
        (body) => {
          body.metadata.conversation_id = body.metadata.conversation_id.trim();
        },
      );
    },
  },

  // ================================================ event streams ================================================
  {
    name: "fork-child-delta-type-text",
    area: "sse",
    description:
      "Events rule 2: text arrives as a `text_delta` (field `text`); on a fork child's first turn this deployment sends the delta typed `text`.",
    breaks: [],
    outsideRound: 9,
    onEvents(events, call, tools) {
      const id = call.conversationId;
      const fork = id === undefined ? undefined : forksOf(tools).get(id);
      if (!fork || id === undefined || bag<boolean>(tools, "child-turned").get(id)) return;
      bag<boolean>(tools, "child-turned").set(id, true);
      return mapEvents(events, (e) => {
        if (e.event !== "content_block_delta" || e.data?.delta?.type !== "text_delta") return false;
        e.data.delta.type = "text";
        return true;
      });
    },
    onResponse(call, res, tools) {
      trackForks(call, res, tools);
      return undefined;
    },
  },
  {
    name: "redacted-thinking-streamed",
    area: "sse",
    description:
      "Events rule 1: block types are `text`, `thinking`, and with `stream_tool_calls` `tool_use` and `tool_result`; this deployment passes the " +
      "model's `redacted_thinking` block through after a thinking block.",
    breaks: [],
    outsideRound: 9,
    onEvents(events) {
      const stop = events.findIndex(
        (e, i) =>
          e.event === "content_block_stop" &&
          blockTypeAt(events, e.data?.index) === "thinking" &&
          i === events.findIndex((f) => f.event === "content_block_stop" && f.data?.index === e.data?.index),
      );
      if (stop < 0) return;
      const at = events[stop].data.index as number;
      for (const e of events)
        if (typeof e.data?.index === "number" && e.data.index > at && e.event.startsWith("content_block"))
          e.data.index += 1;
      events.splice(
        stop + 1,
        0,
        {
          event: "content_block_start",
          data: {
            type: "content_block_start",
            index: at + 1,
            content_block: { type: "redacted_thinking", data: "RVJBU0VEIFRISU5LSU5H" },
          },
        },
        { event: "content_block_stop", data: { type: "content_block_stop", index: at + 1 } },
      );
      return events;
    },
  },
  {
    name: "tool-use-name-missing-on-resume",
    area: "sse",
    description:
      "Events rule 1 (`tool_use` blocks, in the messages-API shape): a tool_use block names its tool; on resumed turns with `stream_tool_calls` " +
      "this deployment sends the tool_use block start without `name`.",
    breaks: [],
    outsideRound: 9,
    onRequest(call, tools) {
      return noteFresh(call, tools);
    },
    onEvents(events, call) {
      if (isFresh(call) || call.conversationId === undefined) return;
      return mapEvents(events, (e) => {
        const block = e.event === "content_block_start" ? e.data?.content_block : undefined;
        if (block?.type !== "tool_use" || block.name === undefined) return false;
        delete block.name;
        return true;
      });
    },
  },
  {
    name: "empty-turn-without-message-delta",
    area: "sse",
    description:
      "Events, sequence of a turn: `message_delta` carries the stop reason and usage, then `message_stop`; for a turn that produced no output this " +
      "deployment goes from `message_start` straight to `message_stop`.",
    breaks: [],
    outsideRound: 9,
    onEvents(events) {
      if (events.some((e) => e.event === "content_block_start" || e.event === "error")) return;
      const delta = events.findIndex((e) => e.event === "message_delta");
      if (delta < 0) return;
      events.splice(delta, 1);
      return events;
    },
  },
  {
    name: "error-event-flat-message",
    area: "sse",
    description:
      'Events, `error`: data `{error: {type: "api_error", message}}` (rule 5: a failure after the stream opens); this deployment sends ' +
      '`{type: "error", message}` with no `error` object.',
    breaks: [],
    outsideRound: 9,
    onEvents(events) {
      return mapEvents(events, (e) => {
        if (e.event !== "error" || typeof e.data?.error !== "object") return false;
        e.data = { type: "error", message: e.data.error.message };
        return true;
      });
    },
  },
  {
    name: "repo-agent-thinking-delta-field-text",
    area: "sse",
    description:
      "Events rule 2: `thinking_delta` carries field `thinking`; on the repository-backed agent this deployment puts the thinking in field `text`.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onEvents(events, call) {
      if (sendAgent(call) !== DEMO.repoAgent) return;
      return mapEvents(events, (e) => {
        const delta = e.event === "content_block_delta" ? e.data?.delta : undefined;
        if (delta?.type !== "thinking_delta" || typeof delta.thinking !== "string") return false;
        delta.text = delta.thinking;
        delete delta.thinking;
        return true;
      });
    },
  },
  {
    name: "message-start-model-display-name-on-automation",
    area: "sse",
    description:
      "Events `message_start` `message.model` is the turn's model, an id from the models list (Send a message `model`); on turns run with " +
      "`metadata.automation` this deployment reports the model's display name.",
    breaks: [],
    outsideRound: 9,
    onEvents(events, call) {
      if (typeof sendBody(call)?.metadata?.automation !== "string") return;
      return mapEvents(events, (e) => {
        const message = e.event === "message_start" ? e.data?.message : undefined;
        const name = message ? DISPLAY_NAMES[message.model] : undefined;
        if (!name) return false;
        message.model = name;
        return true;
      });
    },
  },
  {
    name: "conversation-header-repeated-on-automation-turns",
    area: "headers",
    description:
      "Send a message, response: header `X-Conversation-Id` names the conversation; on automation turns this deployment sets the header twice, " +
      "so clients read `<id>, <id>`.",
    breaks: [],
    outsideRound: 9,
    onResponse(call, res) {
      const id = res.headers["x-conversation-id"];
      if (!isEventStream(res) || id === undefined || typeof sendBody(call)?.metadata?.automation !== "string")
        return;
      return { ...res, headers: { ...res.headers, "x-conversation-id": `${id}, ${id}` } };
    },
  },
  {
    name: "notes-agent-stop-reason-stop",
    area: "sse",
    description:
      "Events rule 6: the stop reason seen is `end_turn`; on the storage-backed agent with files this deployment maps it to `stop`.",
    breaks: [],
    outsideRound: 9,
    onEvents(events, call) {
      if (sendAgent(call) !== DEMO.storageAgent) return;
      return mapEvents(events, (e) => {
        if (e.event !== "message_delta" || e.data?.delta?.stop_reason !== "end_turn") return false;
        e.data.delta.stop_reason = "stop";
        return true;
      });
    },
  },
  {
    name: "isolated-turn-message-id-missing",
    area: "sse",
    description:
      "Events, `message_start`: `{type, message: {id, model, usage}}`; on turns run with `metadata.isolated` this deployment leaves out `message.id`.",
    breaks: [],
    outsideRound: 9,
    onEvents(events, call) {
      if (sendBody(call)?.metadata?.isolated !== true) return;
      return mapEvents(events, (e) => {
        const message = e.event === "message_start" ? e.data?.message : undefined;
        if (!message || message.id === undefined) return false;
        delete message.id;
        return true;
      });
    },
  },

  // ====================================== conversation fields and their values ======================================
  {
    name: "routed-created-channel-api",
    area: "shapes",
    description:
      "Conversation `channel`: one of `INTERACTIVE`, `NOTEBOOK`, `SLACK`, `EMAIL`; this deployment records conversations created through the " +
      "model-routed send with channel `API`.",
    breaks: [],
    outsideRound: 9,
    onResponse(call, res, tools) {
      if (call.route.kind === "routed") {
        const id = sentTurn(call, res);
        if (id !== undefined && !tools.ledger.conversations.has(id))
          bag<boolean>(tools, "routed").set(id, true);
        return undefined;
      }
      const routed = bag<boolean>(tools, "routed");
      return editConversations(call, res, (c) => {
        if (!routed.get(c.id) || c.channel !== "INTERACTIVE") return false;
        c.channel = "API";
        return true;
      });
    },
  },
  {
    name: "repo-agent-list-shared-as-string",
    area: "shapes",
    description:
      'Conversation `shared`: a boolean; this deployment\'s list of the repository-backed agent\'s conversations serialises it as the string `"true"`/`"false"`.',
    breaks: [],
    outsideRound: 9,
    onResponse(call, res) {
      if (call.route.kind !== "list" || call.route.agent !== DEMO.repoAgent) return;
      return editConversations(call, res, (c) => {
        if (typeof c.shared !== "boolean") return false;
        c.shared = String(c.shared);
        return true;
      });
    },
  },
  {
    name: "transcript-turn-count-dropped-after-resume",
    area: "shapes",
    description:
      "Transcript `conversation`: the conversation metadata, with `turn_count` (Conversation fields); once a conversation has two or more turns this " +
      "deployment's transcript leaves `turn_count` out.",
    breaks: [],
    outsideRound: 9,
    onResponse(call, res) {
      return editJson(call, res, "transcript", (body) => {
        if (!(body?.conversation?.turn_count >= 2)) return false;
        delete body.conversation.turn_count;
        return true;
      });
    },
  },
  {
    name: "fork-child-session-differs-from-result",
    area: "consistency",
    description:
      "Fork result `agent_session_id` and the child's `agent_session_id` (the session the conversation resumes) name the same session; this " +
      "deployment reports a fresh session id on the child before its first turn, not the one the fork returned.",
    breaks: [],
    outsideRound: 9,
    knownGap: FORK_SESSION_GAP,
    onResponse(call, res, tools) {
      trackForks(call, res, tools);
      const forks = forksOf(tools);
      return editConversations(call, res, (c) => {
        const fork = forks.get(c.id);
        if (!fork?.session || c.agent_session_id !== fork.session) return false;
        c.agent_session_id = `sess_${fork.session
          .split("")
          .reverse()
          .join("")
          .replace(/[^0-9a-f-]/g, "")}`;
        return true;
      });
    },
  },
  {
    name: "viewer-is-owner-on-shared",
    area: "consistency",
    description:
      "Conversation `is_owner`: whether the caller owns it; a Viewer owns nothing it did not create, yet this deployment reports `is_owner` true to a " +
      "Viewer on conversations shared with the workspace.",
    breaks: [],
    outsideRound: 9,
    onResponse(call, res) {
      if (call.key !== VIEWER) return;
      return editConversations(call, res, (c) => {
        if (c.shared !== true || c.is_owner !== false) return false;
        c.is_owner = true;
        return true;
      });
    },
  },
  {
    name: "child-turn-moves-parent-session",
    area: "state",
    description:
      "States and transitions, fork: the parent is unchanged; after the child's turn this deployment points the parent's `agent_session_id` at the child's session.",
    breaks: [],
    outsideRound: 9,
    async onResponse(call, res, tools) {
      trackForks(call, res, tools);
      const forks = forksOf(tools);
      const moved = bag<string>(tools, "moved");
      const turned = sentTurn(call, res);
      if (turned !== undefined) {
        const fork = forks.get(turned);
        if (fork) moved.set(fork.parent, turned);
        return undefined;
      }
      return editConversationsAsync(call, res, async (c) => {
        const child = moved.get(c.id);
        const fork = child === undefined ? undefined : forks.get(child);
        if (child === undefined || !fork) return false;
        const read = await readConversation(tools, fork.agent, child, fork.owner);
        const session = read?.agent_session_id;
        if (typeof session !== "string" || session === c.agent_session_id) return false;
        c.agent_session_id = session;
        return true;
      });
    },
  },
  {
    name: "fork-counts-as-parent-turn",
    area: "state",
    description:
      "States and transitions, fork: the parent is unchanged; this deployment adds one to the parent's `turn_count` for every fork made of it.",
    breaks: [],
    outsideRound: 9,
    onResponse(call, res, tools) {
      const counts = bag<number>(tools, "fork-count");
      if (call.route.kind === "fork" && call.method === "POST" && is2xx(res) && call.route.id !== undefined) {
        counts.set(call.route.id, (counts.get(call.route.id) ?? 0) + 1);
        return undefined;
      }
      return editConversations(call, res, (c) => {
        const n = counts.get(c.id);
        if (!n || typeof c.turn_count !== "number") return false;
        c.turn_count += n;
        return true;
      });
    },
  },
  {
    name: "transcript-duplicates-previous-reply-from-third-turn",
    area: "consistency",
    description:
      "Transcript `messages`: the conversation's messages, one assistant reply per turn; from the third turn on this deployment's transcript " +
      "repeats the previous turn's assistant reply.",
    breaks: [],
    outsideRound: 9,
    knownGap: REPLY_MESSAGES_GAP,
    onResponse(call, res) {
      return editJson(call, res, "transcript", (body) => {
        const messages: Json[] = Array.isArray(body?.messages) ? body.messages : [];
        const replies = messages
          .map((m, i) => ({ m, i }))
          .filter(({ m }) => m?.role === "assistant" && !m.is_compact_summary);
        if (replies.length < 3) return false;
        const previous = replies[replies.length - 2];
        messages.splice(previous.i + 1, 0, structuredClone(previous.m));
        return true;
      });
    },
  },
  {
    name: "compact-summary-as-assistant",
    area: "shapes",
    description:
      "Message `is_compact_summary`: `true` on a `user` message that represents an automatic compaction; this deployment stores the summary as an assistant message.",
    breaks: [],
    outsideRound: 9,
    onResponse(call, res) {
      return editJson(call, res, "transcript", (body) =>
        Boolean(
          (Array.isArray(body?.messages) ? body.messages : [])
            .filter((m: Json) => m?.is_compact_summary === true && m.role === "user")
            .map((m: Json) => {
              m.role = "assistant";
              return m;
            }).length,
        ),
      );
    },
  },
  {
    name: "last-compaction-returns-oldest-summary",
    area: "consistency",
    description:
      "Get last compaction: `{compacted, summary}` of the last compaction; after a second compaction this deployment still returns the first summary.",
    breaks: [],
    outsideRound: 9,
    knownGap: COMPACTION_GAP,
    async onResponse(call, res, tools) {
      if (call.route.kind !== "compaction" || call.method !== "GET" || res.status !== 200) return;
      const body = jsonOf(res);
      if (body?.compacted !== true) return;
      const path = call.path.split("?")[0].replace(/\/last-compaction$/, "/messages");
      const transcript = await tools.forward(ProxyCall.make("GET", path, call.key));
      const summaries = (jsonOf(transcript)?.messages ?? []).filter(
        (m: Json) => m?.is_compact_summary === true,
      );
      const first = summaries[0]?.content?.[0]?.text;
      if (summaries.length < 2 || typeof first !== "string" || first === body.summary) return;
      return withJson(res, { ...body, summary: first });
    },
  },
  {
    name: "title-prefixed-when-shared",
    area: "state",
    description:
      "Conversation `title`: derived from the first prompt at creation, never changed afterwards; this deployment prefixes `[Shared] ` while it is shared.",
    breaks: [],
    outsideRound: 9,
    onResponse(call, res, tools) {
      trackShares(call, res, tools);
      return editConversations(call, res, (c) => {
        if (!isShared(tools, c.id) || typeof c.title !== "string" || c.title.startsWith("[Shared] "))
          return false;
        c.title = `[Shared] ${c.title}`;
        return true;
      });
    },
  },
  {
    name: "title-from-automation-prompt",
    area: "meaning",
    description:
      "Conversation `title`: derived from the first prompt at creation; for a conversation created with `metadata.automation` this deployment " +
      "titles it with the automation's stored prompt instead of the caller's message.",
    breaks: [],
    outsideRound: 9,
    knownGap: AUTOMATION_PROMPT_GAP,
    onRequest(call, tools) {
      return noteFresh(call, tools);
    },
    onResponse(call, res, tools) {
      const automated = bag<boolean>(tools, "automation-created");
      const id = sentTurn(call, res);
      if (id !== undefined) {
        if (isFresh(call) && sendBody(call)?.metadata?.automation === DEMO.automation)
          automated.set(id, true);
        return undefined;
      }
      return editConversations(call, res, (c) => {
        if (!automated.get(c.id) || c.title === AUTOMATION_PROMPT) return false;
        c.title = AUTOMATION_PROMPT;
        return true;
      });
    },
  },
  {
    name: "created-at-moves-on-unshare",
    area: "state",
    description:
      'Conversation `created_at`: when it was created; this deployment rewrites the row on `{"shared": false}` and its `created_at` becomes the time of the unshare.',
    breaks: [],
    outsideRound: 9,
    onResponse(call, res, tools) {
      const times = bag<string>(tools, "unshared-at");
      const id = call.route.id;
      if (
        call.route.kind === "conversation" &&
        call.method === "POST" &&
        is2xx(res) &&
        id !== undefined &&
        call.json()?.shared === false &&
        isShared(tools, id)
      )
        times.set(id, new Date().toISOString());
      trackShares(call, res, tools);
      return editConversations(call, res, (c) => {
        const at = times.get(c.id);
        if (at === undefined || c.created_at === at) return false;
        c.created_at = at;
        return true;
      });
    },
  },
  {
    name: "session-pointer-shared-across-member-conversations",
    area: "consistency",
    description:
      "Conversation `agent_session_id`: the pointer to the agent session this conversation resumes; this deployment keeps one session per Operator key " +
      "and reports the same pointer on all of that member's conversations.",
    breaks: [],
    outsideRound: 9,
    knownGap: SESSION_WINDOW_GAP,
    onResponse(call, res, tools) {
      if (call.key !== MEMBER) return;
      const first = bag<string>(tools, "member-session");
      return editConversations(call, res, (c) => {
        if (tools.ledger.conversations.get(c.id)?.owner !== MEMBER || typeof c.agent_session_id !== "string")
          return false;
        const seen = first.get("session");
        if (seen === undefined) {
          first.set("session", c.agent_session_id);
          return false;
        }
        if (seen === c.agent_session_id) return false;
        c.agent_session_id = seen;
        return true;
      });
    },
  },
  {
    name: "models-ids-uppercased-on-notes-agent",
    area: "consistency",
    description:
      "Model entry `id`: the model identifier usable in the `model` field; for the storage-backed agent with files this deployment lists ids upper-cased, " +
      "which the turn's `message_start` never reports.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onResponse(call, res) {
      if (call.route.agent !== DEMO.storageAgent) return;
      return editJson(call, res, "models", (body) => {
        const data: Json[] = Array.isArray(body?.data) ? body.data : [];
        for (const m of data) if (typeof m?.id === "string") m.id = m.id.toUpperCase();
        return data.length > 0;
      });
    },
  },
  {
    name: "transcript-role-human-on-notes-agent",
    area: "shapes",
    description:
      "Message object `role`: `user` or `assistant`; this deployment's transcripts of the storage-backed agent with files label user messages `human`.",
    breaks: [],
    outsideRound: 9,
    onResponse(call, res) {
      if (call.route.agent !== DEMO.storageAgent) return;
      return editJson(call, res, "transcript", (body) => {
        let changed = false;
        for (const m of Array.isArray(body?.messages) ? body.messages : [])
          if (m?.role === "user") {
            m.role = "human";
            changed = true;
          }
        return changed;
      });
    },
  },
  {
    name: "fork-child-transcript-events-null",
    area: "shapes",
    description:
      "Transcript `events`: an array (the raw underlying agent event stream); for a fork child this deployment answers `events: null`.",
    breaks: [],
    outsideRound: 9,
    onResponse(call, res, tools) {
      trackForks(call, res, tools);
      if (call.route.id === undefined || !forksOf(tools).has(call.route.id)) return;
      return editJson(call, res, "transcript", (body) => {
        if (!Array.isArray(body?.events)) return false;
        body.events = null;
        return true;
      });
    },
  },

  // ============================================ state across time ============================================
  {
    name: "fork-of-orphan-child-404",
    area: "state",
    description:
      "States and transitions, fork: a caller who may read a conversation can fork it; once a fork's parent is deleted this deployment can no " +
      "longer resolve the child's history and answers a fork of the child 404.",
    breaks: [],
    outsideRound: 9,
    knownGap: DRAW_GAP,
    onRequest(call, tools) {
      const id = call.route.id;
      if (call.route.kind !== "fork" || call.method !== "POST" || id === undefined) return;
      const fork = forksOf(tools).get(id);
      if (!fork || !isDeleted(tools, fork.parent)) return;
      return apiError(404, "not_found_error", "Conversation not found");
    },
    onResponse(call, res, tools) {
      trackForks(call, res, tools);
      trackDeletes(call, res, tools);
      return undefined;
    },
  },
  {
    name: "child-transcript-empties-after-parent-delete",
    area: "state",
    description:
      "Rule 2 (transcripts are stored durably) and fork: the child's history was copied from the parent; after the parent is deleted this " +
      "deployment's child transcript loses the copied turns.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onResponse(call, res, tools) {
      trackForks(call, res, tools);
      trackDeletes(call, res, tools);
      const id = call.route.id;
      const fork = id === undefined ? undefined : forksOf(tools).get(id);
      if (!fork || !isDeleted(tools, fork.parent) || fork.turn < 1) return;
      return editJson(call, res, "transcript", (body) => {
        if (!Array.isArray(body?.messages) || body.messages.length === 0) return false;
        body.messages = body.messages.slice(2 * fork.turn);
        return true;
      });
    },
  },
  {
    name: "child-delete-removes-siblings",
    area: "state",
    description:
      "Delete a conversation: removes that conversation; this deployment deletes by parent, so deleting one fork child removes its siblings too.",
    breaks: [],
    outsideRound: 9,
    knownGap: DRAW_GAP,
    async onResponse(call, res, tools) {
      trackForks(call, res, tools);
      trackDeletes(call, res, tools);
      const id = call.route.id;
      if (call.method !== "DELETE" || call.route.kind !== "conversation" || !is2xx(res) || id === undefined)
        return;
      const forks = forksOf(tools);
      const fork = forks.get(id);
      if (!fork) return;
      for (const [child, other] of forks) {
        if (child === id || other.parent !== fork.parent || isDeleted(tools, child)) continue;
        await tools.forward(ProxyCall.make("DELETE", conversationPath(other.agent, child), other.owner));
        bag<boolean>(tools, "deleted").set(child, true);
      }
      return undefined;
    },
  },
  {
    name: "fork-at-turn-over-length-clamped-short",
    area: "state",
    description:
      "Fork `at_turn`: clamped to the conversation's length; this deployment clamps a value past the end to one turn less than the length.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    async onRequest(call, tools) {
      const body = forkBody(call);
      const id = call.route.id;
      if (typeof body?.at_turn !== "number" || id === undefined || !call.route.agent) return;
      const c = await readConversation(tools, call.route.agent, id, call.key);
      if (!c || typeof c.turn_count !== "number" || body.at_turn <= c.turn_count || c.turn_count < 2) return;
      body.at_turn = c.turn_count - 1;
      call.setJson(body);
      return undefined;
    },
  },

  // ============================================ list filters ============================================
  {
    name: "list-email-channel-returns-all",
    area: "consistency",
    description:
      "List conversations `channel` filter (`INTERACTIVE`, `NOTEBOOK`, `SLACK`, `EMAIL`); this deployment does not know `EMAIL` as a filter value " +
      "and lists every channel for it.",
    breaks: [],
    outsideRound: 9,
    onRequest(call) {
      const query = listQuery(call);
      if (query?.get("channel") !== "EMAIL") return;
      query.delete("channel");
      setQuery(call, query);
      return undefined;
    },
  },
  {
    name: "list-channel-with-channel-id-empty",
    area: "consistency",
    description:
      "List conversations: `channel` and `channel_id` are filters that combine; this deployment treats them as alternatives and answers an empty list when both are given.",
    breaks: [],
    outsideRound: 9,
    caughtByExplorer: EXPLORER_CATCH,
    onResponse(call, res) {
      const query = listQuery(call);
      if (!query?.has("channel") || !query.has("channel_id")) return;
      return editJson(call, res, "list", (body) => {
        if (!Array.isArray(body?.conversations) || body.conversations.length === 0) return false;
        body.conversations = [];
        return true;
      });
    },
  },
  {
    name: "notebook-path-filter-reveals-private",
    area: "consistency",
    description:
      "Conversation visibility: a caller sees conversations it owns, shared ones and channel-owned ones; with a `notebook_path` filter this " +
      "deployment lists every notebook conversation of that path to a member or Viewer, private ones included.",
    breaks: [],
    outsideRound: 9,
    knownGap: NOTEBOOK_GAP,
    async onResponse(call, res, tools) {
      const query = listQuery(call);
      if (!query?.has("notebook_path") || (call.key !== MEMBER && call.key !== VIEWER) || res.status !== 200)
        return;
      const all = await tools.forward(ProxyCall.make("GET", call.path, ADMIN));
      const body = jsonOf(res);
      const extra = (jsonOf(all)?.conversations ?? []).filter(
        (c: Json) => !body.conversations.some((d: Json) => d.id === c.id),
      );
      if (extra.length === 0) return;
      for (const c of extra) c.is_owner = false;
      body.conversations.push(...extra);
      return withJson(res, body);
    },
  },
  {
    name: "fork-child-listed-under-default-agent",
    area: "consistency",
    description:
      "List conversations of `{agent}`: that agent's conversations; this deployment files a fork of another agent's conversation under the " +
      "workspace's default agent, so it shows in the default agent's list.",
    breaks: [],
    outsideRound: 9,
    async onResponse(call, res, tools) {
      trackForks(call, res, tools);
      if (call.route.kind !== "list" || call.route.agent !== DEMO.defaultAgent || res.status !== 200) return;
      if ([...call.url.searchParams.keys()].some((k) => k !== "limit")) return;
      const body = jsonOf(res);
      let changed = false;
      for (const [child, fork] of forksOf(tools)) {
        if (fork.agent === DEMO.defaultAgent || fork.owner !== call.key || isDeleted(tools, child)) continue;
        if (body.conversations.some((c: Json) => c.id === child)) continue;
        const c = await readConversation(tools, fork.agent, child, call.key);
        if (!c) continue;
        body.conversations.unshift(c);
        changed = true;
      }
      return changed ? withJson(res, body) : undefined;
    },
  },
  {
    name: "list-since-drops-channel-owned",
    area: "consistency",
    description:
      "List conversations `since` and visibility: conversations owned by a channel (chat, e-mail) are visible to the caller; with a `since` filter " +
      "this deployment's query joins on the owner and leaves channel-owned conversations out.",
    breaks: [],
    outsideRound: 9,
    knownGap: DRAW_GAP,
    onResponse(call, res) {
      if (!listQuery(call)?.has("since")) return;
      return editJson(call, res, "list", (body) => {
        const before = body?.conversations?.length ?? 0;
        body.conversations = (body?.conversations ?? []).filter(
          (c: Json) => c?.channel !== "SLACK" && c?.channel !== "EMAIL",
        );
        return body.conversations.length !== before;
      });
    },
  },
];
