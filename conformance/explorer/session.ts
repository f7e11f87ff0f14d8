/**
 * One sequence's run against the deployment: each operation is sent through the suite's context (the one send
 * helper, validation against the spec, the grammar), its answer compared with the model, and the model moved
 * on by what the operation did. A departure throws a Mismatch naming the rule it breaks.
 */
import { randomBytes } from "node:crypto";
import { prompts } from "../checks/common.ts";
import { type ApiResponse, type CheckContext, sleep } from "../context.ts";
import { isRecord } from "../json.ts";
import { accessRefusal } from "../model/access.ts";
import { attachedFile, attachmentRules, attachmentsOf } from "../model/attachments.ts";
import type { LearnedChoices } from "../model/choices.ts";
import { deleteRules, predictDelete } from "../model/deletes.ts";
import type { Refusal, StatusExpectation } from "../model/expectation.ts";
import { fieldRules, judgeConversation } from "../model/fields.ts";
import { copiedTurns, forkRules, judgeForkedAt, predictFork } from "../model/forks.ts";
import { predictSendStatus } from "../model/ids.ts";
import { judgeList, type Listed, listRules, type SourceFilters } from "../model/lists.ts";
import { lookUpConversation } from "../model/lookup.ts";
import { judgeRecall } from "../model/memory.ts";
import { expectRule, Mismatch } from "../model/mismatch.ts";
import type { ModelRule } from "../model/rules.ts";
import { ASYNC_REFUSAL, sendRules } from "../model/send-flags.ts";
import { predictShare, type ShareBody, sharingRules } from "../model/sharing.ts";
import type { Actor, AgentKind, ConversationModel, ModelState } from "../model/state.ts";
import { ruleOfViolation } from "../model/stream.ts";
import { judgeTranscript, messageText, turnMessages } from "../model/transcripts.ts";
import { carriesOutput, judgeTurnMeaning } from "../model/turn-meaning.ts";
import { visibilityRules } from "../model/visibility.ts";
import { replyText } from "../sse/grammar.ts";
import { judgeStatus } from "./judge.ts";
import type { AgentChoice, Operation, PromptKind, Target } from "./operations.ts";
import { agentName, EARLIER_TEXT, keyOf, messagesOf, type SentRequest } from "./requests.ts";

/** The `system` a send carries, and the start of the older user element of "earlier-messages": never a title. */
const SYSTEM_TEXT = "Answer briefly";

/** The prompt's request of each kind; `word` is the code word a remember prompt asks to keep. */
function askOf(kind: PromptKind, word: string, nonce: string): string {
  switch (kind) {
    case "ok":
      return "Say OK.";
    case "think":
      return prompts.think;
    case "remember":
      return prompts.remember(word);
    case "recall":
      return prompts.recall;
    case "tools":
      return prompts.runCommand(`echo ${nonce}`);
    case "attached":
      return prompts.readAttachment(attachedFile(nonce).name);
  }
}

/** The model a sequence runs against: the state, and the turns it spent (bounded per sequence). */
export interface SequenceModel {
  state: ModelState;
  turns: number;
}

/** What a run of sequences shares: the run's context factory, the learned choices, the agents' models. */
export interface ExplorerShared {
  choices: LearnedChoices;
  runId: string;
  /** Model ids of each agent, as its models list first gave them (first = default). */
  models: Map<AgentKind, string[] | null>;
  /** The model id of the conversation's default recorded for each model id requested explicitly. */
  sequenceCount: number;
  /** `message_start.message.id` of every turn the run read: each turn's is new. */
  messageIds: Set<string>;
  /** The channel each channel-owned conversation showed first (a channel_id list). */
  channelOf: Map<string, unknown>;
  /** Agent kind and depth (`main:2`) whose session pointer a run has waited for. */
  sessionWaits: Set<string>;
  /** Per agent, the channel-owned conversations the first channel_id list showed. */
  channelOwned: Map<AgentKind, ReadonlySet<string>>;
  /** The same conversations as that list showed them (owed in the readers' other lists: lists.ts). */
  channelItems: Map<AgentKind, Listed[]>;
}

/** The model a turn with the inputs' automation and no `model` named, learned per agent. */
const automationModelChoice = (agent: AgentKind) =>
  `message_start model of a turn with the automation and no model on the ${agent} agent`;

/** A model id a turn's message_start named for an explicitly requested id; learned per run. */
const reportedChoice = (id: string) => `message_start model of a turn that asked for ${id}`;

export class SequenceRun {
  readonly ctx: CheckContext;
  readonly shared: ExplorerShared;
  readonly prefix: string;
  readonly sent: SentRequest[] = [];
  /** Operations run (in order), for the report. */
  readonly done: Operation[] = [];
  #next = 0;

  constructor(ctx: CheckContext, shared: ExplorerShared) {
    this.ctx = ctx;
    this.shared = shared;
    shared.sequenceCount++;
    this.prefix = `acc-${shared.runId}-x${shared.sequenceCount}`;
  }

  /**
   * A conversation id of the caller's choosing: "any string" (Resources/Conversation), so every third one is
   * long (past the 64 characters a fixed-width column holds), within the 256 the spec's schema allows.
   */
  freshId(): string {
    this.#next++;
    const id = `${this.prefix}-c${this.#next}`;
    if (this.#next % 3 === 0) return `${id}-${"long".repeat(25)}`;
    // Characters a naive server percent-encodes, form-decodes or trims (no `%`: how a header carries one is not
    // shown): X-Conversation-Id and every read echo them.
    return this.#next % 4 === 1 ? `${id}.Mixed_Case a+b ~!*(x).` : id;
  }

  nonce(): string {
    return randomBytes(3).toString("hex");
  }

  agent(kind: AgentKind): string {
    return agentName(kind, this.ctx.inputs, this.shared.runId);
  }

  /** The agent's model ids (the owner's key, outside the sequence); null when the list cannot be read. */
  async modelsOf(kind: AgentKind): Promise<string[] | null> {
    if (!["main", "storage", "repo"].includes(kind)) return null;
    if (!this.shared.models.has(kind)) {
      const res = await this.ctx.listModels({ agent: this.agent(kind) });
      const data = isRecord(res.body) && Array.isArray(res.body.data) ? res.body.data : null;
      const ids = data?.map((m) => (isRecord(m) ? String(m.id) : "")).filter(Boolean) ?? null;
      this.shared.models.set(kind, res.status === 200 && ids && ids.length > 0 ? ids : null);
    }
    return this.shared.models.get(kind) ?? null;
  }
}

/** Whether `op` would run a turn in `m` (the only costly operation). */
export function runsTurn(m: SequenceModel, op: Operation): boolean {
  if (op.op !== "send") return false;
  const { conversation, agent } = resolve(m.state, op.target, op.agent, op.actor);
  const id = op.target.kind === "omit" || !conversation ? undefined : conversation.id;
  if (op.target.kind === "fresh") return accessRefusal(op.actor, agent) === null && op.actor !== "viewer";
  return (
    predictSendStatus(m.state, op.actor, agent, id, op.flags.asyncDelivery === true, ASYNC_REFUSAL)
      .expectation.kind === "success"
  );
}

function resolve(
  state: ModelState,
  target: Target,
  choice: AgentChoice,
  actor: Actor,
): { conversation?: ConversationModel; agent: AgentKind } {
  const newest = state.slot(0);
  const conversation =
    target.kind === "slot"
      ? state.slot(target.n)
      : target.kind === "parent"
        ? ((newest?.parent && state.byId(newest.parent.id)) ?? newest)
        : undefined;
  const agent = choice === "same" ? (conversation?.agent ?? "main") : choice;
  // Another workspace's key naming this workspace's conversation through an agent of another workspace: 404,
  // whichever workspace that agent is (Errors: a conversation on a different workspace), so the route is kept.
  if (conversation?.live && actor === "foreign" && agent === "foreign") return { conversation, agent };
  return { conversation, agent: agentFor(actor, agent) };
}

/**
 * The agent a request names. Another workspace's key on that workspace's own agent is a caller the model
 * knows nothing of: it names an agent no workspace has instead (404 for every key).
 */
export function agentFor(actor: Actor, agent: AgentKind): AgentKind {
  return actor === "foreign" && agent === "foreign" ? "unknown" : agent;
}

/** Runs `op` against the deployment and the model; throws a Mismatch where they part. */
export async function runOperation(m: SequenceModel, r: SequenceRun, op: Operation): Promise<void> {
  r.done.push(op);
  const schemaBefore = r.ctx.schemaFailures.length;
  const shapeRule = await dispatch(m, r, op);
  const failures = r.ctx.schemaFailures.slice(schemaBefore);
  if (failures.length > 0) {
    throw new Mismatch(
      shapeRule,
      "a body the API's schema allows",
      failures.map((f) => f.message).join("; "),
    );
  }
}

const SHAPE: Record<Operation["op"], ModelRule> = {
  send: {
    id: "shapes.send",
    section: "Events",
    check: "SSE-EVENT-SCHEMA",
    level: "MUST",
    text: "Every event's data has the API's shape",
  },
  read: {
    id: "shapes.read",
    section: "Resources/Conversation",
    check: "GET-SHAPE",
    level: "MUST",
    text: "Conversation, transcript and compaction bodies have the API's shapes",
  },
  list: {
    id: "shapes.list",
    section: "Endpoints/List conversations",
    check: "LIST-SHAPE-ORDER",
    level: "MUST",
    text: "A list is {conversations: [<conversation>]}",
  },
  share: {
    id: "shapes.share",
    section: "Endpoints/Toggle sharing",
    check: "STATE-SHARE-TRUE",
    level: "MUST",
    text: "The share toggle's answer has the API's shape",
  },
  fork: {
    id: "shapes.fork",
    section: "Resources/Fork result",
    check: "CONSIST-FORK-READBACK",
    level: "MUST",
    text: "The fork result has the API's shape",
  },
  delete: {
    id: "shapes.delete",
    section: "Endpoints/Delete a conversation",
    check: "STATE-DELETE",
    level: "MUST",
    text: "The delete's answer has the API's shape",
  },
  models: {
    id: "shapes.models",
    section: "Endpoints/List models",
    check: "MODELS-SHAPE",
    level: "MUST",
    text: "The models list has the API's shape",
  },
};
export const shapeRules: ModelRule[] = Object.values(SHAPE);

async function dispatch(m: SequenceModel, r: SequenceRun, op: Operation): Promise<ModelRule> {
  switch (op.op) {
    case "send":
      await runSend(m, r, op);
      break;
    case "read":
      await runRead(m, r, op);
      break;
    case "list":
      await runList(m, r, op);
      break;
    case "share":
      await runShare(m, r, op);
      break;
    case "fork":
      await runFork(m, r, op);
      break;
    case "delete":
      await runDelete(m, r, op);
      break;
    case "models":
      await runModels(m, r, op);
      break;
  }
  return SHAPE[op.op];
}

function callOptions(r: SequenceRun, actor: Operation["actor"], agent: AgentKind) {
  return { key: keyOf(actor, r.ctx.inputs), agent: r.agent(agent) };
}

function record(r: SequenceRun, req: SentRequest): SentRequest {
  r.sent.push(req);
  return req;
}

async function runSend(
  m: SequenceModel,
  r: SequenceRun,
  op: Extract<Operation, { op: "send" }>,
): Promise<void> {
  const { conversation, agent } = resolve(m.state, op.target, op.agent, op.actor);
  const id =
    op.target.kind === "fresh" ? r.freshId() : op.target.kind === "omit" ? undefined : conversation?.id;
  const nonce = r.nonce();
  // The suite's own nonce (sweeps/titles.ts knows where each was sent): a code word appears in no other request.
  const word = r.ctx.nonce();
  const { messages, stored } = messagesOf(op.content, nonce, askOf(op.prompt, word, nonce));
  const routed = op.route !== "agent";
  const models = routed || !op.flags.model ? null : await r.modelsOf(agent);
  const model = models ? (op.flags.model === "first" ? models[0] : models[models.length - 1]) : undefined;
  const metadata: Record<string, unknown> = {};
  if (id !== undefined) metadata.conversation_id = id;
  if (op.flags.streamToolCalls) metadata.stream_tool_calls = true;
  if (op.flags.isolated) metadata.isolated = true;
  if (op.flags.asyncDelivery) metadata.delivery = "async";
  if (op.flags.automation)
    metadata.automation =
      op.flags.automation === "given" ? r.ctx.inputs.automation : `acc-${r.shared.runId}-no-such-automation`;
  if (op.flags.attachments) metadata.attachments = attachmentsOf(op.flags.attachments, nonce);
  if (op.flags.explicitDefaults) {
    metadata.read_only ??= true;
    metadata.isolated ??= false;
    metadata.stream_tool_calls ??= false;
    metadata.delivery ??= "sync";
  }
  const body: Record<string, unknown> = { stream: !op.flags.streamFalse, messages };
  // Left out of what is sent (undefined is dropped from the JSON), over the send helper's own `stream: true`.
  if (op.flags.streamOmitted) body.stream = undefined;
  // A directive the reply shows (as SEND-SYSTEM-APPLIED asks), after text a title must never hold.
  const systemToken = r.ctx.nonce();
  if (op.flags.system) body.system = `${SYSTEM_TEXT}. ${prompts.token(systemToken)}`;
  // Accepted and ignored, whatever their values: ones the messages API itself would refuse among them.
  if (op.flags.ignoredFields)
    Object.assign(
      body,
      op.flags.ignoredFields === "usual"
        ? { max_tokens: 64, temperature: 0.5, tools: [] }
        : { max_tokens: 0, temperature: 5, top_p: 2, stop_sequences: ["OK"], tool_choice: { type: "none" } },
    );
  const name = r.agent(agent);
  if (routed) body.model = op.route === "prefix" ? `${r.ctx.inputs.routingPrefix}--${name}` : name;
  else if (model !== undefined) body.model = model;
  const url = routed
    ? `${r.ctx.inputs.baseUrl}/api/agents/v1/messages`
    : `${r.ctx.agentUrl(name)}/v1/messages`;
  const sentBody = { ...body, ...(Object.keys(metadata).length > 0 && { metadata }) };
  const req = record(r, { method: "POST", url, actor: op.actor, json: sentBody });
  const prediction = predictSendStatus(
    m.state,
    op.actor,
    agent,
    id,
    op.flags.asyncDelivery === true,
    ASYNC_REFUSAL,
  );
  const readBefore =
    prediction.target?.kind === "resume" ? prediction.target.conversation.updatedAt : undefined;
  const memory = prediction.target?.kind === "resume" ? prediction.target.conversation.remembered : undefined;
  // A recall needs the remembering turn's session recorded: waited for now, not after every remembering turn.
  if (memory && op.prompt === "recall" && !op.flags.isolated && prediction.target?.kind === "resume")
    await awaitMemory(r, prediction.target.conversation, op.actor);
  // A few ms of the suite's clock between the last read and the turn are as many of the server's, whatever
  // its skew: the turn's activity then falls strictly after anything read before it.
  if (readBefore !== undefined) await sleep(3);
  const { stream_tool_calls: _toolCalls, ...otherMetadata } = metadata;
  const turn = await r.ctx.turn({
    key: keyOf(op.actor, r.ctx.inputs),
    agent: name,
    messages,
    metadata: otherMetadata,
    streamToolCalls: op.flags.streamToolCalls ? true : op.flags.explicitDefaults ? false : undefined,
    extraBody: body,
    routed,
  });
  const successRule =
    op.flags.attachments === "malformed"
      ? attachmentRules.droppedSilently
      : op.flags.attachments
        ? attachmentRules.accepted
        : op.flags.streamFalse
          ? sendRules.streamFalse
          : sendRules.stream200;
  if (!judgeStatus(prediction.expectation, turn.response, r.shared.choices, successRule)) return;
  expectRule(
    successRule,
    (turn.headers["content-type"] ?? "").startsWith("text/event-stream"),
    "Content-Type text/event-stream",
    turn.headers["content-type"],
  );
  const headerId = turn.headers["x-conversation-id"];
  const target = prediction.target;
  if (target?.kind === "create") {
    expectRule(
      target.rule,
      typeof headerId === "string" && headerId !== "" && !m.state.live(headerId),
      "a new conversation's id",
      headerId,
    );
    req.captures = { id: headerId as string, from: "header" };
  } else {
    expectRule(
      target?.kind === "create-verbatim" ? target.rule : sendRules.headerId,
      headerId === id,
      String(id),
      headerId,
    );
  }
  const reading = turn.reading;
  if (reading) {
    const grammarError = reading.violations.find((v) => v.severity === "error");
    if (grammarError)
      throw new Mismatch(
        ruleOfViolation(grammarError),
        "a stream in the API's grammar",
        grammarError.message,
      );
    if (reading.end === "error")
      throw new Inconclusive(`the turn ended in an error event: ${reading.errorMessage ?? ""}`);
  }
  // A turn sent again after an error event naming load: what the conversation kept of the failed try (its
  // user message, a counted turn) is not shown, so the model no longer knows its history.
  if (turn.resent !== undefined && id !== undefined)
    throw new Inconclusive(`the turn was sent again ${turn.resent} time(s) after an error event naming load`);
  m.turns++;
  if (reading) judgeTurnMeaning(reading, op.flags.streamToolCalls === true, r.shared);
  // A body's model wins; then the conversation's recorded default; then the agent's (first in its list).
  let conv: ConversationModel;
  if (target?.kind === "resume") {
    conv = target.conversation;
    conv.history.push(stored);
    conv.authors.push(op.actor);
    if (op.flags.automation === "given") conv.ranAutomation = true;
    conv.ownTurns++;
    if (readBefore !== undefined) conv.mustExceed = readBefore;
  } else {
    conv = {
      id: target?.kind === "create-verbatim" ? target.id : (headerId as string),
      agent,
      owner: op.actor,
      shared: false,
      history: [stored],
      authors: [op.actor],
      ownTurns: 1,
      ranAutomation: op.flags.automation === "given",
      notTitle: [
        ...(op.flags.system ? [SYSTEM_TEXT] : []),
        ...(op.content === "earlier-messages" ? [EARLIER_TEXT] : []),
      ],
      parent: null,
      live: true,
      generated: target?.kind === "create",
      defaultModel: { kind: "agent" },
    };
    m.state.add(conv);
  }
  if (reading?.model !== undefined) await r.modelsOf(agent);
  judgeModel(r, op, conv, reading?.model, routed ? undefined : model, agent);
  conv.remembered = undefined;
  // An isolated turn runs in a throwaway sandbox: whether it remembers, or leaves a session to resume, is not
  // shown. An empty reply shows no memory either way (a model may refuse).
  if (reading && op.prompt === "recall" && memory?.sessionSeen && !op.flags.isolated)
    judgeRecall(replyText(reading), memory);
  if (reading && op.prompt === "attached") judgeAttachmentRead(replyText(reading), nonce);
  if (reading && op.flags.system) {
    const reply = replyText(reading);
    if (reply.trim() !== "")
      expectRule(
        sendRules.systemApplies,
        reply.includes(systemToken),
        `a reply holding ${systemToken} (the system text asks for it)`,
        JSON.stringify(reply.slice(0, 120)),
      );
  }
  if (reading && carriesOutput(reading.blocks) && !op.flags.isolated) {
    const waited = await judgeSessionRecorded(r, conv, op.actor);
    if (op.prompt === "remember")
      conv.remembered = { word, turn: conv.history.length - 1, via: "resume", sessionSeen: waited };
  }
  // The transcript: the turn's user message as the API says it is stored, and the conversation beside it.
  await readBack(m, r, conv, op.actor, routed ? sendRules.routedReadBack : sendRules.readBack, "messages");
}

/**
 * After a turn with output the session pointer becomes non-null within the bounded wait of the Client
 * guidance (States and transitions). Waited for once per agent kind and depth (1, 2, 3+) in a run: the wait
 * costs time, not turns, and every combination is still met.
 */
async function judgeSessionRecorded(r: SequenceRun, conv: ConversationModel, actor: Actor): Promise<boolean> {
  const key = `${conv.agent}:${Math.min(conv.history.length, 3)}`;
  if (r.shared.sessionWaits.has(key)) return false;
  r.shared.sessionWaits.add(key);
  await waitForRecorded(r, conv, actor);
  return true;
}

/** A turn asked to read its attached file answers with the file's text; an empty reply shows nothing. */
function judgeAttachmentRead(reply: string, nonce: string): void {
  if (reply.trim() === "") return;
  const file = attachedFile(nonce);
  expectRule(
    attachmentRules.read,
    reply.includes(file.text),
    `a reply holding ${JSON.stringify(file.text)}, the text of the attached ${file.name}`,
    JSON.stringify(reply.slice(0, 120)),
  );
}

/** The remembered turn's session, waited for once, before a turn or a fork that needs it. */
async function awaitMemory(r: SequenceRun, conv: ConversationModel, actor: Actor): Promise<void> {
  if (!conv.remembered || conv.remembered.sessionSeen) return;
  await waitForRecorded(r, conv, actor);
  conv.remembered.sessionSeen = true;
}

async function waitForRecorded(r: SequenceRun, conv: ConversationModel, actor: Actor): Promise<void> {
  const options = callOptions(r, actor, conv.agent);
  record(r, { method: "GET", url: r.ctx.conversationUrl(conv.id, options.agent), actor });
  const session = await r.ctx.waitForSession(conv.id, options);
  expectRule(
    fieldRules.sessionRecorded,
    session !== null,
    `a non-null agent_session_id within ${r.ctx.inputs.sessionWaitMs} ms of a turn with output (depth ${conv.history.length})`,
    "null",
  );
}

/**
 * The conversation a turn ran in (or a toggle changed), read back at once by `actor` on its agent's route: no
 * turn spent, and every field the model knows judged under the combination (agent kind, route, depth, input
 * shape) the operation had.
 */
async function readBack(
  m: SequenceModel,
  r: SequenceRun,
  conv: ConversationModel,
  actor: Actor,
  rule: ModelRule,
  route: "get" | "messages" = "get",
): Promise<void> {
  const options = callOptions(r, actor, conv.agent);
  const res = await readRoute(r, conv.id, route, actor, options);
  const found = lookUpConversation(m.state, actor, conv.agent, conv.id);
  if ("refusal" in found) return;
  judgeStatus({ kind: "success" }, res, r.shared.choices, rule);
  const body = isRecord(res.body) ? res.body : {};
  if (isRecord(body.conversation)) judgeConversation(body.conversation, conv, actor, r.shared.choices);
  if (route === "messages") judgeTranscript(body.messages, conv, r.shared.choices);
}

/** message_start names the turn's model: the body's, else the conversation's default, else the agent's. */
function judgeModel(
  r: SequenceRun,
  op: Extract<Operation, { op: "send" }>,
  conv: ConversationModel,
  reported: string | undefined,
  bodyModel: string | undefined,
  agent: AgentKind,
): void {
  if (reported === undefined) return;
  const choices = r.shared.choices;
  if (bodyModel !== undefined) {
    // The body's model wins over an automation's and the conversation's (values in the body win): once a
    // turn showed how the deployment names it, every turn that asks for it names it so.
    const named = choices.get(reportedChoice(bodyModel));
    if (named !== undefined)
      expectRule(
        sendRules.modelSelects,
        reported === named,
        `${named} (the body's model ${bodyModel})`,
        reported,
      );
    choices.observe(reportedChoice(bodyModel), reported);
    // Only this call's: a later call without `model` falls back to the automation's model, then the agent's
    // default (Send a message, `model`), or the default a fork recorded. What a fork of it inherits: not shown.
    conv.modelNamed = true;
    return;
  }
  if (op.flags.automation === "given") {
    // The automation's model comes before the agent's default: the first such turn on an agent teaches how
    // it is named, and each later one on a conversation with no other default names it so. Whether a fork's
    // recorded model or an earlier turn's beats it is not shown.
    if (conv.defaultModel.kind !== "id" && conv.modelNamed !== true) {
      const key = automationModelChoice(agent);
      const named = choices.get(key);
      if (named === undefined) choices.observe(key, reported);
      else
        expectRule(sendRules.modelDefault, reported === named, `${named} (the automation's model)`, reported);
    }
    // A default "for the turn" (metadata `automation`): the next call without it falls back as before.
    return;
  }
  if (conv.defaultModel.kind === "automation") {
    // A fork recorded the automation as the child's default (Endpoints/Fork a conversation): its turns without
    // a model run on the automation's model, named as the turns sent with the automation name it.
    const named = choices.get(automationModelChoice(agent));
    if (named === undefined) return;
    expectRule(forkRules.modelRecorded, reported === named, `${named} (the automation's model)`, reported);
    return;
  }
  const models = r.shared.models.get(agent);
  const effective =
    conv.defaultModel?.kind === "id"
      ? conv.defaultModel.id
      : conv.defaultModel?.kind === "agent"
        ? models?.[0]
        : undefined;
  if (effective === undefined) return;
  const expected = choices.get(reportedChoice(effective));
  if (expected === undefined) {
    // The first turn on a default teaches how the deployment names that model; every later turn on the same
    // default, on either send route, must name it the same way.
    choices.observe(reportedChoice(effective), reported);
    return;
  }
  const rule = conv.defaultModel?.kind === "id" ? forkRules.modelRecorded : sendRules.modelDefault;
  expectRule(rule, reported === expected, `${expected} (the default ${effective})`, reported);
}

/** The deployment could not show the fact now (a turn ended in an error event): the sequence proves nothing. */
export class Inconclusive extends Error {}

/** One read of a conversation route (the conversation, its transcript or its last compaction), recorded. */
async function readRoute(
  r: SequenceRun,
  id: string,
  route: "get" | "messages" | "compaction",
  actor: Actor,
  options: ReturnType<typeof callOptions>,
): Promise<ApiResponse> {
  const path = route === "get" ? "" : route === "messages" ? "/messages" : "/last-compaction";
  record(r, { method: "GET", url: `${r.ctx.conversationUrl(id, options.agent)}${path}`, actor });
  return route === "get"
    ? r.ctx.getConversation(id, options)
    : route === "messages"
      ? r.ctx.transcript(id, options)
      : r.ctx.lastCompaction(id, options);
}

/**
 * The fork result judged (it names the parent, and the child id asked for or a new one) and the child's
 * transcript read back by the forking caller: the child, its transcript's messages and the user texts they hold.
 */
async function readForkChild(
  m: SequenceModel,
  r: SequenceRun,
  res: ApiResponse,
  fork: { parentId: string; childId: string | undefined; req: SentRequest; actor: Actor },
  options: ReturnType<typeof callOptions>,
) {
  const result = isRecord(res.body) ? res.body : {};
  expectRule(
    forkRules.result,
    result.parent_conversation_id === fork.parentId,
    fork.parentId,
    result.parent_conversation_id,
  );
  const child = String(result.conversation_id ?? "");
  if (fork.childId !== undefined) expectRule(forkRules.customId, child === fork.childId, fork.childId, child);
  else {
    expectRule(forkRules.result, child !== "" && !m.state.live(child), "a new conversation's id", child);
    fork.req.captures = { id: child, from: "fork-result" };
  }
  const forkedAt = typeof result.forked_at_turn === "number" ? result.forked_at_turn : -1;
  const read = await readRoute(r, child, "messages", fork.actor, options);
  expectRule(
    forkRules.childPrivateOwned,
    read.status === 200,
    "200 (the caller reads its child)",
    read.status,
  );
  const messages =
    isRecord(read.body) && Array.isArray(read.body.messages) ? read.body.messages.filter(isRecord) : [];
  const users = turnMessages(messages).map((x) => messageText(x.content));
  const conversation =
    isRecord(read.body) && isRecord(read.body.conversation) ? read.body.conversation : undefined;
  return { result, child, forkedAt, messages, users, conversation };
}

/** A channel-owned conversation a channel_id list showed (the main agent's first), or undefined. */
function channelTarget(r: SequenceRun): { id: string; agent: AgentKind; item: Listed } | undefined {
  const agents = [...r.shared.channelItems.keys()].sort((a, b) => (a === "main" ? -1 : b === "main" ? 1 : 0));
  for (const agent of agents) {
    const item = r.shared.channelItems.get(agent)?.[0];
    if (item) return { id: item.id, agent, item };
  }
  return undefined;
}

/** The refusal a request about a channel-owned conversation gets for its key and the agent it names. */
function channelRefusal(actor: Actor, requested: AgentKind, owner: AgentKind): Refusal | null {
  const access = accessRefusal(actor, requested);
  if (access) return access;
  return requested === owner ? null : { status: 404, rule: visibilityRules.otherAgentIs404 };
}

/** Reads a channel-owned conversation: every reader key may, on its agent's routes; it is never the caller's. */
async function runChannelRead(
  r: SequenceRun,
  op: Extract<Operation, { op: "read" }>,
  target: { id: string; agent: AgentKind; item: Listed },
): Promise<void> {
  const requested = op.agent === "same" ? target.agent : agentFor(op.actor, op.agent);
  const options = callOptions(r, op.actor, requested);
  const res = await readRoute(r, target.id, op.route, op.actor, options);
  const refusal = channelRefusal(op.actor, requested, target.agent);
  const expectation: StatusExpectation = refusal ? { kind: "exact", refusal } : { kind: "success" };
  if (!judgeStatus(expectation, res, r.shared.choices, visibilityRules.channelReadable) || refusal) return;
  const body = isRecord(res.body) ? res.body : {};
  if (!isRecord(body.conversation)) return;
  judgeChannelConversation(body.conversation, target);
}

function judgeChannelConversation(body: Record<string, unknown>, target: { id: string; item: Listed }): void {
  expectRule(fieldRules.id, body.id === target.id, JSON.stringify(target.id), body.id);
  expectRule(visibilityRules.channelReadable, body.is_owner === false, "false", body.is_owner);
  expectRule(
    fieldRules.channel,
    body.channel === target.item.channel,
    `${String(target.item.channel)} (as the channel_id list showed it)`,
    body.channel,
  );
}

/**
 * Forks a channel-owned conversation (any reader may fork what it may read): the child is the caller's,
 * private, with every turn of the parent's transcript; it then joins the model like any fork. No at_turn.
 */
async function runChannelFork(
  m: SequenceModel,
  r: SequenceRun,
  op: Extract<Operation, { op: "fork" }>,
  target: { id: string; agent: AgentKind; item: Listed },
): Promise<void> {
  const requested = op.agent === "same" ? target.agent : agentFor(op.actor, op.agent);
  const options = callOptions(r, op.actor, requested);
  const refusal = channelRefusal(op.actor, requested, target.agent);
  let parentUsers: string[] = [];
  if (!refusal) {
    const before = await readRoute(r, target.id, "messages", op.actor, options);
    judgeStatus({ kind: "success" }, before, r.shared.choices, visibilityRules.channelReadable);
    const list = isRecord(before.body) && Array.isArray(before.body.messages) ? before.body.messages : [];
    parentUsers = turnMessages(list.filter(isRecord)).map((x) => messageText(x.content));
  }
  const childId = op.child === "fresh" ? r.freshId() : undefined;
  const json = childId === undefined ? {} : { conversation_id: childId };
  const req = record(r, {
    method: "POST",
    url: `${r.ctx.conversationUrl(target.id, options.agent)}/fork`,
    actor: op.actor,
    json,
  });
  const expectation: StatusExpectation = refusal
    ? { kind: "exact", refusal }
    : op.actor === "viewer"
      ? { kind: "learned", among: [200, 403], rule: forkRules.readerForks, choice: "fork by a Viewer key" }
      : { kind: "exact", refusal: { status: 200, rule: visibilityRules.channelReadable } };
  const res = await r.ctx.fork(target.id, json, options);
  if (!judgeStatus(expectation, res, r.shared.choices, visibilityRules.channelReadable) || refusal) return;
  const { child, forkedAt, messages, users, conversation } = await readForkChild(
    m,
    r,
    res,
    { parentId: target.id, childId, req, actor: op.actor },
    options,
  );
  expectRule(
    forkRules.allTurns,
    users.length === parentUsers.length,
    `${parentUsers.length} copied turns`,
    users.length,
  );
  const c: ConversationModel = {
    id: child,
    agent: target.agent,
    owner: op.actor,
    shared: false,
    history: parentUsers,
    // The channel's users wrote those turns: no key of the run's is their author.
    authors: parentUsers.map(() => undefined),
    ownTurns: 0,
    parent: { id: target.id, forkedAt },
    live: true,
    generated: childId === undefined,
    // The channel conversation's model is not the run's to know.
    defaultModel: { kind: "unknown" },
    modelNamed: true,
    fromChannel: true,
  };
  m.state.add(c);
  judgeTranscript(messages, c, r.shared.choices);
  if (conversation) judgeConversation(conversation, c, op.actor, r.shared.choices);
}

async function runRead(
  m: SequenceModel,
  r: SequenceRun,
  op: Extract<Operation, { op: "read" }>,
): Promise<void> {
  const channel = op.target.kind === "channel" ? channelTarget(r) : undefined;
  if (channel) return runChannelRead(r, op, channel);
  const { conversation, agent } = resolve(m.state, op.target, op.agent, op.actor);
  const id = conversation?.id ?? r.freshId();
  const found = lookUpConversation(m.state, op.actor, agent, id);
  const options = callOptions(r, op.actor, agent);
  const res = await readRoute(r, id, op.route, op.actor, options);
  const expectation: StatusExpectation =
    "refusal" in found ? { kind: "exact", refusal: found.refusal } : { kind: "success" };
  const rule =
    "refusal" in found
      ? visibilityRules.ownerReads
      : found.visibility === "owner"
        ? visibilityRules.ownerReads
        : op.actor === "viewer"
          ? visibilityRules.viewerReads
          : visibilityRules.sharedReadable;
  if (!judgeStatus(expectation, res, r.shared.choices, rule) || "refusal" in found) return;
  if (op.route === "compaction") return;
  const body = isRecord(res.body) ? res.body : {};
  if (isRecord(body.conversation))
    judgeConversation(body.conversation, found.conversation, op.actor, r.shared.choices);
  if (op.route === "messages") judgeTranscript(body.messages, found.conversation, r.shared.choices);
}

async function runList(
  m: SequenceModel,
  r: SequenceRun,
  given: Extract<Operation, { op: "list" }>,
): Promise<void> {
  const op = { ...given, agent: agentFor(given.actor, given.agent) };
  const query: Record<string, string> = {};
  if (op.limit !== undefined) query.limit = String(op.limit);
  const own = r.shared.choices.get("channel of a conversation made through the API") ?? "INTERACTIVE";
  // Another value of the enum (List conversations): a channel-owned conversation's, where one is known (it is
  // then owed in that list), else the first the run's own conversations do not show.
  const owners = r.shared.channelItems.get(agentFor(given.actor, given.agent)) ?? [];
  const other =
    owners.map((c) => String(c.channel)).find((c) => c !== own) ??
    ["EMAIL", "SLACK", "NOTEBOOK", "INTERACTIVE"].find((c) => c !== own);
  const channel = op.channel === "other" ? other : op.channel ? own : undefined;
  if (channel) query.channel = channel;
  // since: just after the last activity the model read of one of the sequence's conversations, so some fall
  // before it and the later ones after.
  // Two days ahead: no conversation's activity is that late, whatever the server's clock skew (an hour, say).
  const anchor =
    op.since === "anchor"
      ? m.state.slot(1)?.updatedAt
      : op.since === "ahead"
        ? new Date(Date.now() + 2 * 86_400_000).toISOString()
        : undefined;
  const since = anchor !== undefined ? new Date(Date.parse(anchor) + 1).toISOString() : undefined;
  if (since !== undefined) query.since = since;
  const inputs = r.ctx.inputs;
  const source: SourceFilters = {
    channelId: op.channelId === true && inputs.channelId !== undefined,
    notebookPath: op.notebookPath === true && inputs.notebookPath !== undefined,
    automation: op.automation === true && inputs.automation !== undefined,
  };
  if (source.channelId) query.channel_id = String(inputs.channelId);
  if (source.notebookPath) query.notebook_path = String(inputs.notebookPath);
  if (source.automation) query.automation = String(inputs.automation);
  const channelIdAlone =
    source.channelId && !source.notebookPath && !source.automation && !channel && since === undefined;
  const owned = r.shared.channelOwned.get(op.agent);
  if (channelIdAlone && owned) source.owned = owned;
  const items = r.shared.channelItems.get(op.agent);
  if (items) source.channelOwned = items;
  const options = callOptions(r, op.actor, op.agent);
  const qs = new URLSearchParams(query).toString();
  record(r, {
    method: "GET",
    url: `${r.ctx.agentUrl(options.agent)}/conversations${qs ? `?${qs}` : ""}`,
    actor: op.actor,
  });
  const res = await r.ctx.listConversations(query, options);
  const refusal = accessRefusal(op.actor, op.agent);
  const expectation: StatusExpectation = refusal ? { kind: "exact", refusal } : { kind: "success" };
  if (!judgeStatus(expectation, res, r.shared.choices, listRules.order) || refusal) return;
  const listed =
    isRecord(res.body) && Array.isArray(res.body.conversations)
      ? res.body.conversations.filter(isRecord)
      : [];
  judgeList(
    m.state,
    op.actor,
    op.agent,
    listed as Array<{ id: string }>,
    op.limit ?? 50,
    channel,
    since,
    source,
  );
  if (channelIdAlone && !r.shared.channelOwned.has(op.agent)) {
    // Neither the reader's nor shared, yet visible to it: owned by the channel (Resources/Conversation).
    const owned = listed.filter((c) => c.is_owner === false && c.shared === false);
    r.shared.channelOwned.set(op.agent, new Set(owned.map((c) => String(c.id))));
    r.shared.channelItems.set(
      op.agent,
      owned.map((c) => ({
        id: String(c.id),
        updated_at: c.updated_at,
        created_at: c.created_at,
        channel: c.channel,
      })),
    );
    for (const c of owned) r.shared.channelOf.set(String(c.id), c.channel);
    // Once per agent: every other reader key's list of that channel_id holds them, with the same channel.
    for (const reader of ["owner", "member", "viewer"] as const)
      if (reader !== op.actor && keyOf(reader, inputs) !== null)
        await runList(m, r, { op: "list", actor: reader, agent: op.agent, limit: 200, channelId: true });
  }
  // A channel-owned conversation's channel is the one stored: the same for every reader key and filter.
  for (const item of listed) {
    const id = String(item.id);
    if (!r.shared.channelOf.has(id)) continue;
    const stored = r.shared.channelOf.get(id);
    expectRule(listRules.channelOwned, item.channel === stored, `${id} with channel ${stored}`, item.channel);
  }
  for (const item of listed) {
    const c = m.state.live(String(item.id));
    if (c && c.agent === op.agent) judgeConversation(item, c, op.actor, r.shared.choices);
    // Visible only as owned, shared or owned by a channel (chat channel, e-mail: Resources/Conversation).
    if (item.is_owner === false && item.shared === false)
      expectRule(
        listRules.visibleOnly,
        item.channel === "SLACK" || item.channel === "EMAIL",
        `${String(item.id)} left out (neither the caller's nor shared, and not owned by a chat channel or e-mail)`,
        `${String(item.id)} listed with channel ${JSON.stringify(item.channel)}`,
      );
  }
}

async function runShare(
  m: SequenceModel,
  r: SequenceRun,
  op: Extract<Operation, { op: "share" }>,
): Promise<void> {
  if (op.body === "twice") {
    await runShare(m, r, { ...op, body: "flip" });
    await runShare(m, r, { ...op, body: "flip" });
    return;
  }
  const { conversation, agent } = resolve(m.state, op.target, op.agent, op.actor);
  const id = conversation?.id ?? r.freshId();
  const value = op.body === "flip" ? !(conversation?.shared ?? false) : op.body === "true";
  const json =
    op.body === "true" || op.body === "flip"
      ? { shared: value }
      : op.body === "false"
        ? { shared: false }
        : op.body === "string"
          ? { shared: "true" }
          : op.body === "empty"
            ? {}
            : { shared: true, note: "x" };
  const model: ShareBody =
    op.body === "true" || op.body === "false" || op.body === "flip" ? { shared: value } : { malformed: json };
  const options = callOptions(r, op.actor, agent);
  record(r, { method: "POST", url: r.ctx.conversationUrl(id, options.agent), actor: op.actor, json });
  const expectation = predictShare(m.state, op.actor, agent, id, model);
  const res = await r.ctx.share(id, json, options);
  if (!judgeStatus(expectation, res, r.shared.choices, sharingRules.ownerToggles)) return;
  if (expectation.kind === "learned" && expectation.rule !== sharingRules.ownerToggles) {
    // A refusal the model expected answered 2xx: the rule it breaks is the refusal's.
    expectRule(expectation.rule, false, `a refusal (${expectation.among.join(", ")})`, res.status);
  }
  const c = m.state.live(id);
  if (c && "shared" in model) c.shared = model.shared;
  if (c && c.owner === op.actor) await afterToggle(m, r, c);
}

/**
 * After a toggle its effect is read where the API says it shows: `shared` on the owner's read, and each
 * member's list (plain and filtered by channel) holding or leaving out the conversation. No turn spent.
 */
async function afterToggle(m: SequenceModel, r: SequenceRun, c: ConversationModel): Promise<void> {
  await readBack(m, r, c, c.owner, sharingRules.ownerToggles);
  // The other reader: a member for the owner's conversation, the owner's key for a member's.
  const reader: Actor | undefined =
    c.owner !== "owner" ? "owner" : r.ctx.inputs.memberKey ? "member" : undefined;
  if (!reader) return;
  await runList(m, r, { op: "list", actor: reader, agent: c.agent, limit: 200 });
  if (r.shared.choices.get("channel of a conversation made through the API") !== undefined)
    await runList(m, r, { op: "list", actor: reader, agent: c.agent, limit: 200, channel: true });
  // A conversation the reader may now see, made through the API: never in a channel_id-filtered list.
  if (c.shared && r.ctx.inputs.channelId)
    await runList(m, r, { op: "list", actor: reader, agent: c.agent, limit: 200, channelId: true });
}

async function runFork(
  m: SequenceModel,
  r: SequenceRun,
  op: Extract<Operation, { op: "fork" }>,
): Promise<void> {
  const channel = op.target.kind === "channel" ? channelTarget(r) : undefined;
  if (channel) return runChannelFork(m, r, op, channel);
  const { conversation, agent } = resolve(m.state, op.target, op.agent, op.actor);
  const id = conversation?.id ?? r.freshId();
  const childId = op.bare ? undefined : forkChildId(m, r, op, agent);
  const models = op.model && !op.bare ? await r.modelsOf(agent) : null;
  const model = models ? (op.model === "first" ? models[0] : models[models.length - 1]) : undefined;
  const atTurn = op.bare ? undefined : op.atTurn;
  const fields: Record<string, unknown> = {};
  if (atTurn !== undefined) fields.at_turn = atTurn;
  if (childId !== undefined) fields.conversation_id = childId;
  if (model !== undefined) fields.model = model;
  // The inputs' automation is the main agent's: recorded on the child as a default for its future turns.
  const automation = op.automation && !op.bare && agent === "main" ? r.ctx.inputs.automation : undefined;
  if (automation !== undefined) fields.automation = automation;
  const json = op.bare === "no-body" ? undefined : fields;
  const options = callOptions(r, op.actor, agent);
  const req = record(r, {
    method: "POST",
    url: `${r.ctx.conversationUrl(id, options.agent)}/fork`,
    actor: op.actor,
    json,
  });
  const expectation = predictFork(m.state, op.actor, agent, id, childId);
  // A fork of every turn carries the remembered one: its session is waited for first, as a recall's is.
  const copiesAll =
    atTurn === undefined || (conversation !== undefined && atTurn >= conversation.history.length);
  if (
    conversation?.remembered &&
    copiesAll &&
    expectation.kind === "exact" &&
    expectation.refusal.status === 200
  )
    await awaitMemory(r, conversation, conversation.owner);
  const res = await r.ctx.fork(id, json, options);
  if (!judgeStatus(expectation, res, r.shared.choices, forkRules.readerForks)) return;
  if (expectation.kind === "exact" && expectation.refusal.status !== 200) return;
  const parent = m.state.live(id) as ConversationModel;
  // The child's history, read back as the forking caller: how many turns it copied.
  const {
    result,
    child,
    forkedAt,
    messages,
    users,
    conversation: childRead,
  } = await readForkChild(m, r, res, { parentId: id, childId, req, actor: op.actor }, options);
  const { expected, rule } = copiedTurns(parent, atTurn, users.length, r.shared.choices);
  if (expected !== undefined)
    expectRule(rule, users.length === expected, `${expected} copied turns`, users.length);
  const c: ConversationModel = {
    id: child,
    agent,
    owner: op.actor,
    shared: false,
    history: parent.history.slice(0, users.length),
    authors: parent.authors.slice(0, users.length),
    ownTurns: 0,
    // The automation is inherited (Endpoints/Fork a conversation): the child may belong to it as its parent.
    ranAutomation: parent.ranAutomation || automation !== undefined,
    modelNamed: parent.modelNamed,
    parent: { id, forkedAt },
    live: true,
    generated: childId === undefined,
    defaultModel:
      model !== undefined
        ? { kind: "id", id: model }
        : automation !== undefined
          ? { kind: "automation" }
          : // "inherited": the parent's recorded default; whether a model or automation one of its calls
            // named is inherited instead is not shown.
            parent.modelNamed || parent.ranAutomation
            ? { kind: "unknown" }
            : parent.defaultModel,
    fromChannel: parent.fromChannel,
  };
  // Every turn copied, the remembered one among them: the child's first turn recalls it (STATE-FORK-CONTEXT).
  if (parent.remembered?.sessionSeen && copiesAll && users.length > parent.remembered.turn)
    c.remembered = { ...parent.remembered, via: "fork" };
  m.state.add(c);
  judgeForkedAt(parent, atTurn, result.forked_at_turn, r.shared.choices);
  judgeTranscript(messages, c, r.shared.choices);
  if (childRead) judgeConversation(childRead, c, op.actor, r.shared.choices);
  // The parent is unchanged (States and transitions), whoever forked it: its owner reads the same transcript,
  // sharing, count and title as before. No turn spent.
  await readBack(m, r, parent, parent.owner, forkRules.childPrivateOwned, "messages");
}

/**
 * The child id a fork asks for: a new one of the caller's; one a live conversation holds (its own agent's or,
 * on an odd at_turn, another agent's first: ids are the workspace's); or a deleted conversation's, free again.
 */
function forkChildId(
  m: SequenceModel,
  r: SequenceRun,
  op: Extract<Operation, { op: "fork" }>,
  agent: AgentKind,
): string | undefined {
  const all = m.state.conversations;
  switch (op.child) {
    case "auto":
      return undefined;
    case "fresh":
      return r.freshId();
    case "taken": {
      const live = all.filter((c) => c.live);
      const same = live.find((c) => c.agent === agent);
      const other = live.find((c) => c.agent !== agent);
      return ((op.atTurn ?? 0) % 2 === 1 ? (other ?? same) : (same ?? other))?.id;
    }
    case "deleted":
      return all.find((c) => !c.live && m.state.live(c.id) === undefined)?.id ?? r.freshId();
  }
}

async function runDelete(
  m: SequenceModel,
  r: SequenceRun,
  op: Extract<Operation, { op: "delete" }>,
): Promise<void> {
  const { conversation, agent } = resolve(m.state, op.target, op.agent, op.actor);
  const id = conversation?.id ?? r.freshId();
  const options = callOptions(r, op.actor, agent);
  record(r, { method: "DELETE", url: r.ctx.conversationUrl(id, options.agent), actor: op.actor });
  const expectation = predictDelete(m.state, op.actor, agent, id);
  const res = await r.ctx.deleteConversation(id, options);
  const ok = judgeStatus(expectation, res, r.shared.choices, deleteRules.owner204, 204);
  if (!ok) return;
  if (expectation.kind === "learned")
    expectRule(expectation.rule, false, `a refusal (${expectation.among.join(", ")})`, res.status);
  const c = m.state.live(id);
  if (c) c.live = false;
  if (c && expectation.kind === "exact") await afterDelete(m, r, c, op.actor);
}

/**
 * After a delete: the conversation is gone from its routes (a second delete and a read are 404), and each
 * child forked from it is still its owner's (States and transitions: the child is independent). No turn.
 */
async function afterDelete(
  m: SequenceModel,
  r: SequenceRun,
  c: ConversationModel,
  actor: Actor,
): Promise<void> {
  const options = callOptions(r, actor, c.agent);
  record(r, { method: "DELETE", url: r.ctx.conversationUrl(c.id, options.agent), actor });
  const again = await r.ctx.deleteConversation(c.id, options);
  judgeStatus(
    { kind: "exact", refusal: { status: 404, rule: deleteRules.goneEverywhere } },
    again,
    r.shared.choices,
    deleteRules.goneEverywhere,
  );
  const read = await readRoute(r, c.id, "get", actor, options);
  judgeStatus(
    { kind: "exact", refusal: { status: 404, rule: deleteRules.goneEverywhere } },
    read,
    r.shared.choices,
    deleteRules.goneEverywhere,
  );
  for (const child of m.state.conversations) {
    if (!child.live || child.parent?.id !== c.id) continue;
    child.parentGone = true;
    await readBack(m, r, child, child.owner, forkRules.independent);
  }
  // A delete removes that conversation and nothing else: its parent and its siblings (forks of the same
  // parent) are still their owners'. No turn.
  for (const other of m.state.conversations) {
    const related = other.id === c.parent?.id || (c.parent !== null && other.parent?.id === c.parent.id);
    if (!other.live || other.id === c.id || !related) continue;
    await readBack(m, r, other, other.owner, deleteRules.onlyThat);
  }
}

async function runModels(
  m: SequenceModel,
  r: SequenceRun,
  given: Extract<Operation, { op: "models" }>,
): Promise<void> {
  const op = { ...given, agent: agentFor(given.actor, given.agent) };
  const options = callOptions(r, op.actor, op.agent);
  record(r, { method: "GET", url: `${r.ctx.agentUrl(options.agent)}/v1/models`, actor: op.actor });
  const res: ApiResponse = await r.ctx.listModels(options);
  const refusal = accessRefusal(op.actor, op.agent);
  const expectation: StatusExpectation = refusal ? { kind: "exact", refusal } : { kind: "success" };
  if (!judgeStatus(expectation, res, r.shared.choices, sendRules.modelsFirstDefault) || refusal) return;
  const data = isRecord(res.body) && Array.isArray(res.body.data) ? res.body.data.filter(isRecord) : [];
  const known = await r.modelsOf(op.agent);
  if (known)
    expectRule(
      sendRules.modelsFirstDefault,
      data[0]?.id === known[0],
      `${known[0]} first (the agent's default)`,
      data[0]?.id,
    );
  void m;
}
