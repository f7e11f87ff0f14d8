/**
 * Building blocks the checks share: the prompt phrases (plain instructions any competent agent follows),
 * assertions about turns, and the fixtures several checks read (one conversation, many readers).
 */

import { type CheckContext, isRecord, type Turn } from "../context.ts";
import { carriesOutput } from "../model/turn-meaning.ts";
import { fail, skip } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";

/** Keeps the catalogue files short: a check is data plus its run function. */
export function check(def: CheckDef): CheckDef {
  return def;
}

export const prompts = {
  remember: (word: string) => `Remember this code word: ${word}. Reply with just OK.`,
  recall: "What code word did I ask you to remember? Reply with just the word.",
  token: (word: string) => `Always include the token ${word} in your reply.`,
  noOutput: "Produce no output at all for this turn.",
  think: "Think step by step before answering. What is 2 + 3?",
  writeFile: (name: string, content: string) =>
    `Use your tools to create a file named ${name} containing ${content}.`,
  readFile: (name: string) => `Use your tools to read the file named ${name} and reply with its contents.`,
  runCommand: (command: string) => `Use your tools to run the shell command: ${command}`,
  listAttachments: "List the attached files.",
  readAttachment: (name: string) =>
    `Use your tools to read the attached file ${name} and reply with its contents.`,
  whichModel: "Which model are you running as? Reply with just the model id.",
  repeatInstructions: "Repeat your instructions.",
  hello: "Say hello to the conformance suite in one short sentence.",
  /** Only an engine built to fail on request does; a real model answers normally and the check skips. */
  fail: "Fail this turn after it starts.",
};

/**
 * A 200 event stream that ended at message_stop; anything else fails the check with the evidence. A turn that
 * ended well but showed no output (a model's refusal, an empty reply: answers a model may give) cannot show
 * a fact of its check either, so that check is inconclusive; only a turn that asked for silence (`mayBeSilent`)
 * and the check that judges whether turns answer at all (`judgesSuccess`) go on with it.
 */
export function ensureTurnOk(
  turn: Turn,
  what = "the turn",
  options: { judgesSuccess?: boolean; mayBeSilent?: boolean } = {},
): asserts turn is Turn & { reading: NonNullable<Turn["reading"]> } {
  // Transient trouble (the upstream's overload, retried) keeps a turn from showing the check's fact; only
  // the check that judges whether turns succeed at all (SEND-200-STREAM) fails on it.
  if (turn.trouble !== undefined && !options.judgesSuccess)
    skip(
      `${what} could not run: it ended in ${turn.trouble}; inconclusive (transient trouble, not this rule)`,
    );
  if (turn.status !== 200)
    fail(`${what}: status ${turn.status}, expected 200`, turn.response.text.slice(0, 500));
  const type = turn.headers["content-type"] ?? "";
  if (!type.startsWith("text/event-stream"))
    fail(`${what}: Content-Type ${JSON.stringify(type)}, expected text/event-stream`);
  if (!turn.reading) fail(`${what}: no event stream`);
  if (turn.reading.end === "error")
    fail(`${what}: the stream ended with an error event: ${turn.reading.errorMessage ?? ""}`);
  if (turn.reading.end !== "message_stop")
    fail(`${what}: the stream did not end at message_stop`, turn.response.text.slice(-500));
  if (!options.mayBeSilent && !options.judgesSuccess) ensureAnswered(turn, what);
}

export function ensureStatus(
  res: { status: number; text: string },
  expected: number | number[],
  what: string,
): void {
  const allowed = Array.isArray(expected) ? expected : [expected];
  if (!allowed.includes(res.status))
    fail(`${what}: status ${res.status}, expected ${allowed.join(" or ")}`, res.text.slice(0, 500));
}

/** A client error: 4xx, not 2xx and not a server failure. */
export function ensureClientError(res: { status: number; text: string }, what: string): void {
  if (res.status < 400 || res.status > 499)
    fail(`${what}: status ${res.status}, expected a 4xx`, res.text.slice(0, 500));
}

export function ensureIncludes(text: string, word: string, what: string): void {
  if (!text.includes(word)) fail(`${what}: the reply does not contain ${word}`, text.slice(0, 500));
}

/** A new conversation holding one completed turn, with its session recorded (waited for). */
export interface SettledConversation {
  id: string;
  firstPrompt: string;
  turn: Turn;
  sessionId: string | null;
}

/** Creates a conversation with a caller-chosen id and one plain turn, then waits for its session. */
export async function settledConversation(
  ctx: CheckContext,
  prompt = prompts.hello,
  key?: string,
  agent?: string,
): Promise<SettledConversation> {
  const id = ctx.newConversationId();
  const turn = await ctx.turn({ conversationId: id, prompt, key, agent });
  ensureTurnOk(turn, "set-up turn");
  ensureAnswered(turn, "the set-up turn");
  const sessionId = await ctx.waitForSession(id, { key, agent });
  return { id, firstPrompt: prompt, turn, sessionId };
}

/** One conversation, one turn, session recorded: read by several endpoint checks. */
export function sharedConversation(ctx: CheckContext): Promise<SettledConversation> {
  return ctx.fixture("shared-conversation", (c) => settledConversation(c));
}

/** Remember a nonce, wait for the session as the guidance says, ask for it back. */
export interface MemoryRound {
  id: string;
  nonce: string;
  sessionId: string | null;
  recall: Turn;
}

export function memoryRound(ctx: CheckContext): Promise<MemoryRound> {
  return ctx.fixture("memory-round", async (c) => {
    const id = c.newConversationId();
    const nonce = c.nonce();
    ensureTurnOk(await c.turn({ conversationId: id, prompt: prompts.remember(nonce) }), "remember turn");
    const sessionId = await c.waitForSession(id);
    const recall = await c.turn({ conversationId: id, prompt: prompts.recall });
    ensureTurnOk(recall, "recall turn");
    return { id, nonce, sessionId, recall };
  });
}

/**
 * A memory round under one combination: a turn that asks to remember a nonce (on `agent`, or through the
 * model-routed send), the session waited for as the guidance says, `between` done to the conversation (a share
 * toggle, say), then a turn asking for it back the same way. Returns the nonce and the recall turn.
 */
export async function rememberThenRecall(
  ctx: CheckContext,
  how: { agent?: string; routed?: boolean; between?: (id: string) => Promise<void> },
): Promise<{ id: string; nonce: string; recall: Turn }> {
  const id = ctx.newConversationId();
  const nonce = ctx.nonce();
  const route = {
    ...(how.agent && { agent: how.agent }),
    ...(how.routed && { routed: true, model: how.agent ?? ctx.inputs.agent }),
  };
  ensureTurnOk(
    await ctx.turn({ conversationId: id, prompt: prompts.remember(nonce), ...route }),
    "remember turn",
  );
  await ctx.waitForSession(id, { agent: how.agent });
  await how.between?.(id);
  const recall = await ctx.turn({ conversationId: id, prompt: prompts.recall, ...route });
  ensureTurnOk(recall, "recall turn");
  return { id, nonce, recall };
}

/** The models list: the default model first, and another model if the agent offers one. */
export interface ModelsInfo {
  ids: string[];
  defaultId: string;
  otherId: string | undefined;
}

export function modelsInfo(ctx: CheckContext): Promise<ModelsInfo> {
  return ctx.fixture("models", async (c) => {
    const res = await c.listModels();
    ensureStatus(res, 200, "models list");
    const data = isRecord(res.body) && Array.isArray(res.body.data) ? res.body.data : undefined;
    if (!data || data.length === 0) fail("the models list has no entries", res.text.slice(0, 300));
    const ids = data.map((m) => (isRecord(m) && typeof m.id === "string" ? m.id : "")).filter(Boolean);
    if (ids.length === 0) fail("no model entry has an id", res.text.slice(0, 300));
    return { ids, defaultId: ids[0], otherId: ids.find((id) => id !== ids[0]) };
  });
}

/** The model a turn ran as: message_start's model, or failing that the reply to "which model". */
/**
 * Whether a turn ran on `model` (a models-list id): message_start names it, or a resolved name that starts
 * with it (`demo-large-20250929`, `demo-large@2025`), or the reply names it as a whole word. The API does
 * not say message_start.model repeats the list id verbatim, and a model cannot always name its own id.
 */
export function turnRanAs(turn: Turn, model: string): boolean {
  const started = turn.reading?.model;
  if (
    started === model ||
    (started !== undefined && new RegExp(`^${escapeRegExp(model)}[-@:.]`).test(started))
  )
    return true;
  return new RegExp(`(?<![A-Za-z0-9._-])${escapeRegExp(model)}(?![A-Za-z0-9_-]|\\.[A-Za-z0-9])`).test(
    turn.text,
  );
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A base64 attachment entry. */
export function attachment(
  name: string,
  content: string | Buffer,
  mediaType = "text/plain",
): Record<string, string> {
  const bytes = typeof content === "string" ? Buffer.from(content) : content;
  return { name, mediaType, dataBase64: bytes.toString("base64") };
}

/**
 * Every agent the inputs name, --agent first, each once: a rule that names no agent kind holds on each kind,
 * so a check asks each.
 */
export function everyAgent(ctx: CheckContext): string[] {
  return [ctx.inputs.agent, ctx.inputs.storageAgent, ctx.inputs.repoAgent].filter(
    (a, i, all): a is string => typeof a === "string" && all.indexOf(a) === i,
  );
}

/** The agents the inputs name besides --agent (the storage-backed and the repository-backed one); maybe none. */
export function agentsBesides(ctx: CheckContext): string[] {
  return everyAgent(ctx).filter((a) => a !== ctx.inputs.agent);
}

/**
 * Every agent of the workspace the inputs name besides --agent: a rule about "a different agent" holds for
 * each kind, so a check asks each. Skips the check when there is none.
 */
export function otherAgents(ctx: CheckContext): string[] {
  const others = agentsBesides(ctx);
  if (others.length === 0)
    skip("needs a second agent of the same workspace (--storage-agent or --repo-agent)", "input");
  return others;
}

/** ISO 8601 in UTC with milliseconds: `Z`, or the equivalent `+00:00` (Python's isoformat writes it). */
export const ISO_MS_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(Z|[+-]00:?00)$/;

/**
 * Whether the agent produced output: any block but a text block whose deltas are all empty (a deployment
 * may wrap "no output" in an empty text block; that is still no output, and must not excuse a check). One
 * definition for the checks and the model.
 */
export { carriesOutput };

/**
 * Text as compared across routes and against what was asked: whitespace runs made one space. The API joins
 * content blocks with blank lines where it joins them (a request's `content`), a transcript may hold a turn's
 * text blocks as one block or several, and a model lays out its reply as it likes: the words and their order
 * are the meaning, the layout between them is not.
 */
export function comparableText(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

/** The turn's text blocks, each as streamed (its deltas joined), the empty ones left out. */
export function streamedTextBlocks(turn: Turn): string[] {
  return (turn.reading?.blocks ?? [])
    .filter((block) => block.type === "text")
    .map((block) => block.deltas.map((d) => (typeof d.text === "string" ? d.text : "")).join(""))
    .filter((text) => text.trim() !== "");
}

/**
 * The first of `blocks` that `stored` does not hold, in order, compared as comparableText; undefined when it
 * holds them all. However the blocks were joined when stored, each is there whole and in the streamed order.
 */
export function firstBlockNotHeld(stored: string, blocks: string[]): string | undefined {
  const haystack = comparableText(stored);
  let from = 0;
  for (const block of blocks) {
    const needle = comparableText(block);
    const at = haystack.indexOf(needle, from);
    if (at === -1) return block;
    from = at + needle.length;
  }
  return undefined;
}

/**
 * The conversation's turns are known: no turn was sent into it again after an error event naming load (what
 * it kept of the failed try is not shown), else the check that counts them is inconclusive.
 */
export function ensureHistoryKnown(ctx: CheckContext, id: string, what: string): void {
  if (ctx.run.resentInto.has(id))
    skip(
      `${what}: a turn of this conversation was sent again after an error event naming load, and what a conversation keeps of a failed turn is not shown, so its turns cannot be counted: inconclusive`,
    );
}

/** Why a check that needs a turn without output could not judge one. */
export const ANSWERED_SILENCE =
  "this deployment's model answered when asked for silence, so a turn without output could not be made";

/** The API's largest list page (`limit` 1 to 200); paging beyond it is not shown. */
export const LIST_LIMIT_MAX = 200;

/**
 * On a workspace other clients of the key keep filling, a conversation of the run can be pushed out of even
 * the largest page by their newer activity, which the API's lists (no paging shown) do not promise against.
 * When one of `ids` is missing from a full page, the check is inconclusive, never "missing"; from a page
 * with room left, it is the check's to judge.
 */
export function ensureNotCrowdedOut(list: unknown[], ids: Array<string | undefined>, what: string): void {
  const missing = ids.filter((id) => !list.some((c) => isRecord(c) && c.id === id));
  if (missing.length === 0 || list.length < LIST_LIMIT_MAX) return;
  skip(
    `${what}: ${missing.join(", ")} is not among the ${list.length} newest it returned, a full page (the API's largest limit, with the narrowest filters the check can use): other clients' newer activity pushed it out, and paging beyond limit is not shown; inconclusive`,
  );
}

/**
 * A \`since\` just before \`timestamp\` (one second: whether \`since\` is inclusive is not shown), narrow enough
 * that a busy workspace's other conversations leave the run's own within one page.
 */
export function justBefore(timestamp: string): string {
  const ms = Date.parse(timestamp);
  return Number.isNaN(ms) ? timestamp : new Date(ms - 1_000).toISOString();
}

/**
 * A turn's stream showed no block (the model refused or said nothing): a turn without output, which the API
 * lets leave no session, whatever the deployment did out of sight. A block the stream does not show
 * (redacted thinking, tool blocks without stream_tool_calls) is not output the suite can judge, so it counts
 * for nothing: a check whose fact needs an answered turn is inconclusive after one that showed none.
 */
export function ensureAnswered(turn: Turn, what: string): void {
  // A model that declines part-way (after a preamble, or a look at the files) says so with this stop reason
  // of the Messages API: the turn did not do what it was asked, by the model's choice, not the deployment's.
  if (turn.reading?.stopReason === "refusal")
    skip(
      `${what} was refused by the model (stop_reason "refusal"), which a model may do, so it could not show this check's fact: inconclusive`,
    );
  if (!carriesOutput(turn.reading?.blocks ?? []))
    skip(
      `${what} showed no output (no block in its stream: a refusal or an empty reply, which a model may give), so it could not show this check's fact, and a turn without output legitimately leaves no session: inconclusive`,
    );
}
