/**
 * One fact, every route that shows it. The API returns a conversation through the single fetch, the list
 * and the transcript, a fork's child can be read back, a deleted conversation must be gone from every
 * route, and the model-routed send behaves as the per-agent one. Each check here reads the same fact
 * through every route that returns it and fails on the first disagreement, so a deployment that gets a
 * field right on one route and wrong on another is caught. The evident meaning of fields the API names
 * without defining (timestamps that move with activity, the list's "newest activity first", usage that
 * counts what a turn produced) is judged here too, each assuming no more than the API's words imply.
 */
import { type CallOptions, type CheckContext, isRecord, sleep } from "../context.ts";
import { messageText, turnMessages } from "../model/transcripts.ts";
import { costCeiling } from "../model/turn-meaning.ts";
import { fail, skip } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import {
  agentsBesides,
  carriesOutput,
  check,
  ensureNotCrowdedOut,
  ensureStatus,
  ensureTurnOk,
  justBefore,
  LIST_LIMIT_MAX,
  memoryRound,
  prompts,
  type SettledConversation,
  settledConversation,
} from "./common.ts";
import { grammarStreams } from "./events.ts";

const CONVERSATION = "Resources/Conversation";

type Fields = Record<string, unknown>;

/** How many times a conversation is re-read when a field moved between two reads of one comparison. */
const STABLE_READ_ATTEMPTS = 5;

/**
 * Fields a deployment may write after a turn's stream closed (the API: the session is recorded "after a
 * turn"), so two reads may see them move with no request in between; every other field may not.
 */
const LATE_FIELDS = new Set(["agent_session_id", "updated_at", "turn_count"]);

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The fields in which `other` disagrees with `reference`, over the fields `reference` carries. */
function disagreements(reference: Fields, other: Fields): string[] {
  return Object.keys(reference)
    .filter((field) => !sameValue(reference[field], other[field]))
    .map((field) => `${field}: ${JSON.stringify(reference[field])} vs ${JSON.stringify(other[field])}`);
}

/** The conversation object of a 200 single fetch, as plain fields. */
async function fetched(ctx: CheckContext, id: string, options?: CallOptions): Promise<Fields> {
  return { ...(await ctx.conversation(id, options)) } as Fields;
}

/** The entry of `id` in the list (limit 200, the run's conversations are among the newest), if listed. */
async function listedEntry(
  ctx: CheckContext,
  id: string,
  options?: CallOptions,
): Promise<Fields | undefined> {
  // Since a second before the conversation began, when it can still be read: on a busy workspace the
  // newest 200 may all be others'.
  const single = await ctx.getConversation(id, options);
  const began =
    single.status === 200 && isRecord(single.body) && isRecord(single.body.conversation)
      ? single.body.conversation.created_at
      : undefined;
  const query: Record<string, string> = { limit: "200" };
  if (typeof began === "string") query.since = justBefore(began);
  const res = await ctx.listConversations(query, options);
  ensureStatus(res, 200, "list conversations");
  const list = isRecord(res.body) && Array.isArray(res.body.conversations) ? res.body.conversations : [];
  ensureNotCrowdedOut(list, [id], "the list since the conversation began");
  const entry = list.find((c) => isRecord(c) && c.id === id);
  return isRecord(entry) ? entry : undefined;
}

/**
 * Whether a deleted conversation still shows in a list, as a client opens it (no filter) or since a second
 * before it began (`createdAt`, read before the delete: on a busy workspace the newest 200 may be others').
 * Shown in either is a failure; absent from a full page since then is inconclusive (later pages are not shown).
 */
async function stillListed(
  ctx: CheckContext,
  id: string,
  createdAt: unknown,
  options?: CallOptions,
): Promise<boolean> {
  const queries: Array<Record<string, string>> = [{ limit: "200" }];
  if (typeof createdAt === "string") queries.unshift({ limit: "200", since: justBefore(createdAt) });
  let full = false;
  for (const [i, query] of queries.entries()) {
    const res = await ctx.listConversations(query, options);
    ensureStatus(res, 200, "list conversations");
    const list = isRecord(res.body) && Array.isArray(res.body.conversations) ? res.body.conversations : [];
    if (list.some((c) => isRecord(c) && c.id === id)) return true;
    if (i === 0) full = list.length >= LIST_LIMIT_MAX;
  }
  if (full)
    skip(
      `the list since ${id} began is a full page without it (the API's largest limit): a later page, which is not shown, may hold it; inconclusive`,
    );
  return false;
}

/** The `conversation` of a 200 transcript. */
async function transcriptConversation(ctx: CheckContext, id: string, options?: CallOptions): Promise<Fields> {
  const res = await ctx.transcript(id, options);
  ensureStatus(res, 200, "transcript");
  if (!isRecord(res.body) || !isRecord(res.body.conversation))
    fail("the transcript has no conversation object", res.text.slice(0, 300));
  return res.body.conversation;
}

/** The `messages` of a 200 transcript. */
async function transcriptMessages(ctx: CheckContext, id: string, options?: CallOptions): Promise<unknown[]> {
  const res = await ctx.transcript(id, options);
  ensureStatus(res, 200, "transcript");
  if (!isRecord(res.body) || !Array.isArray(res.body.messages))
    fail("the transcript has no messages array", res.text.slice(0, 300));
  return res.body.messages;
}

/**
 * Reads one conversation through the single fetch, the list and the transcript, as `options`' caller, and
 * fails on any field the routes disagree on. The single fetch is read before and after the others; when it
 * moved in between (a session recorded late), the comparison is made again, so only a disagreement that
 * holds while nothing changes fails the check.
 */
async function sameOnEveryRoute(
  ctx: CheckContext,
  id: string,
  options?: CallOptions,
  who = "the owner",
): Promise<Fields> {
  for (let attempt = 1; ; attempt++) {
    const before = await fetched(ctx, id, options);
    const listed = await listedEntry(ctx, id, options);
    const inTranscript = await transcriptConversation(ctx, id, options);
    const after = await fetched(ctx, id, options);
    if (!sameValue(before, after)) {
      const moved = disagreements(before, after);
      // Only what a turn's late bookkeeping writes may move between two reads with nothing in between; a
      // field the API fixes (a title "never changed afterwards", created_at, ownership, sharing, fork
      // origin) that moves is itself the fault, whatever the other routes say.
      const fixed = moved.filter((d) => !LATE_FIELDS.has(d.slice(0, d.indexOf(":"))));
      if (fixed.length > 0)
        fail(
          `two single fetches of ${id} as ${who}, with no turn, share toggle or fork between them, disagree on ${fixed.join("; ")}`,
        );
      if (attempt >= STABLE_READ_ATTEMPTS)
        skip(
          `conversation ${id} never settled: ${moved.join("; ")} kept moving over ${STABLE_READ_ATTEMPTS} reads while no turn ran on it, so the deployment showed no state in which its routes could be compared`,
        );
      await sleep(500);
      continue;
    }
    if (!listed) fail(`conversation ${id} is readable by ${who} but not in ${who}'s list (limit 200)`);
    const listDiff = disagreements(before, listed);
    if (listDiff.length > 0)
      fail(`the list and the single fetch disagree for ${who} on ${id}: ${listDiff.join("; ")}`);
    const transcriptDiff = disagreements(before, inTranscript);
    if (transcriptDiff.length > 0)
      fail(
        `the transcript's conversation and the single fetch disagree for ${who} on ${id}: ${transcriptDiff.join("; ")}`,
      );
    return before;
  }
}

/** Every route that addresses conversation `id` answers 404, and the list leaves it out. */
async function goneEverywhere(ctx: CheckContext, id: string, createdAt: unknown): Promise<void> {
  const routes: Array<[string, () => Promise<{ status: number; text: string }>]> = [
    ["single fetch", () => ctx.getConversation(id)],
    ["transcript", () => ctx.transcript(id)],
    ["last compaction", () => ctx.lastCompaction(id)],
    ["share toggle", () => ctx.share(id, { shared: true })],
    ["fork", () => ctx.fork(id, {})],
  ];
  for (const [route, call] of routes) ensureStatus(await call(), 404, `${route} of a deleted conversation`);
  if (await stillListed(ctx, id, createdAt)) fail(`the list still shows the deleted conversation ${id}`);
}

/** `updated_at` as milliseconds; fails when it is not a timestamp. */
function millis(fields: Fields, field: "created_at" | "updated_at"): number {
  const value = Date.parse(String(fields[field]));
  if (Number.isNaN(value)) fail(`${field} ${JSON.stringify(fields[field])} is not a timestamp`);
  return value;
}

/** The user message texts of a transcript, each its text blocks joined with blank lines. */
function userTexts(body: unknown): string[] {
  return turnMessages(body).map((m) => messageText(m.content));
}

export const consistencyChecks: CheckDef[] = [
  check({
    id: "CONSIST-ROUTES-AGREE",
    level: "MUST",
    section: CONVERSATION,
    title:
      "The single fetch, the list and the transcript show a conversation with the same fields (owner's view)",
    needs: [],
    async run(ctx) {
      // Two turns, so turn_count, updated_at and agent_session_id have all moved at least once.
      const round = await memoryRound(ctx);
      await ctx.waitForSession(round.id);
      await sameOnEveryRoute(ctx, round.id);
    },
  }),
  check({
    id: "CONSIST-SHARED-MEMBER-VIEW",
    level: "MUST",
    section: CONVERSATION,
    title:
      "A shared conversation shows a member the same fields on every route (is_owner false, shared true), the same transcript messages and the same last compaction, and a Viewer the same conversation",
    needs: ["memberKey"],
    async run(ctx) {
      const member = { key: ctx.inputs.memberKey };
      const conv = await settledConversation(ctx);
      ensureStatus(await ctx.share(conv.id, { shared: true }), [200, 204], "share toggle");
      const owners = await sameOnEveryRoute(ctx, conv.id);
      const members = await sameOnEveryRoute(ctx, conv.id, member, "a member");
      if (owners.is_owner !== true) fail(`is_owner is ${JSON.stringify(owners.is_owner)} for the owner`);
      if (members.is_owner !== false)
        fail(`is_owner is ${JSON.stringify(members.is_owner)} for a member who does not own it`);
      if (owners.shared !== true || members.shared !== true)
        fail(
          `shared is ${JSON.stringify(owners.shared)} for the owner and ${JSON.stringify(members.shared)} for a member after sharing`,
        );
      // Last compaction is a read too: the member gets what the owner gets.
      const ownerCompaction = await ctx.lastCompaction(conv.id);
      const memberCompaction = await ctx.lastCompaction(conv.id, member);
      ensureStatus(ownerCompaction, 200, "last compaction read by the owner");
      ensureStatus(memberCompaction, 200, "last compaction of a shared conversation read by a member");
      if (!sameValue(ownerCompaction.body, memberCompaction.body))
        fail(
          `last compaction answers a member ${memberCompaction.text.slice(0, 200)} and the owner ${ownerCompaction.text.slice(0, 200)}`,
        );
      const ownerMessages = await transcriptMessages(ctx, conv.id);
      const memberMessages = await transcriptMessages(ctx, conv.id, member);
      if (!sameValue(ownerMessages, memberMessages))
        fail(
          `the transcript shows a member other messages than the owner: ${ownerMessages.length} message(s) for the owner, ${memberMessages.length} for a member`,
          JSON.stringify(memberMessages).slice(0, 300),
        );
      const { is_owner: _o, ...ownerRest } = owners;
      const { is_owner: _m, ...memberRest } = members;
      const diff = disagreements(ownerRest, memberRest);
      if (diff.length > 0)
        fail(`the owner and a member see different fields besides is_owner: ${diff.join("; ")}`);
      // A Viewer reads conversations too (Authentication 3): the same conversation, whichever reader's key.
      if (ctx.inputs.viewerKey) {
        const viewer = { key: ctx.inputs.viewerKey };
        const viewers = await sameOnEveryRoute(ctx, conv.id, viewer, "a Viewer");
        if (viewers.is_owner !== false)
          fail(`is_owner is ${JSON.stringify(viewers.is_owner)} for a Viewer who does not own it`);
        const { is_owner: _v, ...viewerRest } = viewers;
        const viewerDiff = disagreements(ownerRest, viewerRest);
        if (viewerDiff.length > 0)
          fail(`the owner and a Viewer see different fields besides is_owner: ${viewerDiff.join("; ")}`);
        if (!sameValue(ownerMessages, await transcriptMessages(ctx, conv.id, viewer)))
          fail("the transcript shows a Viewer other messages than the owner");
      }
    },
  }),
  check({
    id: "CONSIST-FORK-READBACK",
    level: "MUST",
    section: "Endpoints/Fork a conversation",
    title:
      "A fork's child reads back as the fork result says (parent, turn, owned, private) on every route; the parent is unchanged, and its later turns are not the child's",
    needs: [],
    async run(ctx) {
      const parent: SettledConversation = await settledConversation(ctx);
      // A second turn, later than the first by more than a clock tick: the parent's creation and its last
      // activity are two instants, so a child stamped with anything but its own creation shows.
      await sleep(20);
      ensureTurnOk(
        await ctx.turn({ conversationId: parent.id, prompt: prompts.hello }),
        "the parent's second turn",
      );
      await ctx.waitForSession(parent.id);
      const parentBefore = await fetched(ctx, parent.id);
      const res = await ctx.fork(parent.id, { at_turn: 1 });
      ensureStatus(res, 200, "fork");
      if (!isRecord(res.body) || typeof res.body.conversation_id !== "string")
        fail("the fork result has no conversation_id", res.text.slice(0, 300));
      const result = res.body;
      const childId = String(result.conversation_id);
      const child = await sameOnEveryRoute(ctx, childId);
      if (child.id !== childId) fail(`the child reads back with id ${JSON.stringify(child.id)}`);
      if (child.parent_conversation_id !== parent.id || result.parent_conversation_id !== parent.id)
        fail(
          `parent_conversation_id is ${JSON.stringify(result.parent_conversation_id)} in the fork result and ${JSON.stringify(child.parent_conversation_id)} on the child; the parent is ${parent.id}`,
        );
      if (child.forked_at_turn_index !== result.forked_at_turn)
        fail(
          `the fork result says forked_at_turn ${JSON.stringify(result.forked_at_turn)}, the child says forked_at_turn_index ${JSON.stringify(child.forked_at_turn_index)}`,
        );
      // The child is created by the fork: its created_at is not before the parent's last activity.
      if (Date.parse(String(child.created_at)) < Date.parse(String(parentBefore.updated_at)))
        fail(
          `the child's created_at ${String(child.created_at)} is before the parent's last activity ${String(parentBefore.updated_at)}: it was not set when the fork created it`,
        );
      if (child.is_owner !== true || child.shared !== false)
        fail(
          `the child is is_owner ${JSON.stringify(child.is_owner)}, shared ${JSON.stringify(child.shared)}: it must be the caller's and private`,
        );
      // A conversation's updated_at is never before its created_at, a child's included.
      if (Date.parse(String(child.updated_at)) < Date.parse(String(child.created_at)))
        fail(
          `the child's updated_at ${String(child.updated_at)} is before its created_at ${String(child.created_at)}`,
        );
      const parentAfter = await fetched(ctx, parent.id);
      const diff = disagreements(parentBefore, parentAfter);
      if (diff.length > 0) fail(`forking changed the parent: ${diff.join("; ")}`);
      // The child copies the history as of the fork: a later turn on the parent is not the child's.
      const childMessages = await transcriptMessages(ctx, childId);
      // A fork runs no turn: the child counts the turns it copied, or none of its own (which of the two is
      // not shown), never one more.
      const copied = turnMessages(childMessages).length;
      if (child.turn_count !== copied && child.turn_count !== 0)
        fail(
          `the child holds ${copied} copied turn(s) and has run none, yet its turn_count is ${JSON.stringify(child.turn_count)}`,
        );
      ensureTurnOk(
        await ctx.turn({ conversationId: parent.id, prompt: prompts.hello }),
        "the parent's turn after the fork",
      );
      const childLater = await transcriptMessages(ctx, childId);
      if (!sameValue(childMessages, childLater))
        fail(
          `a turn on the parent after the fork changed the child's transcript (${childMessages.length} message(s) before, ${childLater.length} after)`,
          JSON.stringify(childLater.slice(childMessages.length)).slice(0, 300),
        );
    },
  }),
  check({
    id: "CONSIST-DELETED-EVERYWHERE",
    level: "MUST",
    section: "Endpoints/Delete a conversation",
    title:
      "A deleted conversation is gone from every route and for every caller: fetch, transcript, last compaction, share, fork give 404 and the lists leave it out",
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      const member = ctx.inputs.memberKey;
      // Shared first, and read by a member: the delete must be gone for every caller who saw it.
      if (member) {
        ensureStatus(await ctx.share(conv.id, { shared: true }), [200, 204], "share toggle by the owner");
        ensureStatus(
          await ctx.getConversation(conv.id, { key: member }),
          200,
          "a member's read of the shared conversation",
        );
      }
      // Its creation time, read while it exists, keeps the lists' `since` narrow after the delete.
      const createdAt = (await ctx.conversation(conv.id)).created_at;
      ensureStatus(await ctx.deleteConversation(conv.id), 204, "delete");
      await goneEverywhere(ctx, conv.id, createdAt);
      if (member) {
        ensureStatus(
          await ctx.getConversation(conv.id, { key: member }),
          404,
          "a member's fetch of the deleted conversation",
        );
        ensureStatus(
          await ctx.transcript(conv.id, { key: member }),
          404,
          "a member's transcript of the deleted conversation",
        );
        if (await stillListed(ctx, conv.id, createdAt, { key: member }))
          fail(`a member's list still shows the deleted conversation ${conv.id}`);
      }
    },
  }),
  check({
    id: "CONSIST-ROUTED-SEND",
    level: "MUST",
    section: "Endpoints/Model-routed send",
    title:
      "The model-routed send answers as send-message does: X-Conversation-Id for a new conversation, readable on the agent's routes",
    needs: [],
    async run(ctx) {
      const turn = await ctx.turn({ routed: true, model: ctx.inputs.agent, prompt: prompts.hello });
      ensureTurnOk(turn, "routed turn without conversation_id");
      const id = turn.conversationId;
      if (!id) fail("the model-routed send of a new conversation carries no X-Conversation-Id");
      const conversation = await sameOnEveryRoute(ctx, id);
      if (conversation.is_owner !== true) fail("the routed conversation is not owned by the caller");
      // `model` selects the agent: a routed conversation of another agent is that agent's, in its list and
      // not in --agent's.
      for (const agent of agentsBesides(ctx)) {
        const routed = await ctx.turn({ routed: true, model: agent, agent, prompt: prompts.hello });
        ensureTurnOk(routed, `routed turn to agent ${agent}`);
        const made = routed.conversationId;
        if (!made) fail(`the model-routed send to agent ${agent} carries no X-Conversation-Id`);
        const read = await ctx.conversation(made, { agent });
        const since = justBefore(String(read.created_at));
        // With `since` (the run's own within a page on a busy workspace) and without (the list as a client
        // opens it first): an unfiltered page that is full may have pushed it out, which is noted, not judged.
        for (const query of [{ limit: "200", since }, { limit: "200" }] as Array<Record<string, string>>)
          for (const [on, expected] of [
            [agent, true],
            [ctx.inputs.agent, false],
          ] as const) {
            const res = await ctx.listConversations(query, { agent: on });
            const what = `conversation list of agent ${on}${"since" in query ? " since it began" : ""}`;
            ensureStatus(res, 200, what);
            const entries =
              isRecord(res.body) && Array.isArray(res.body.conversations)
                ? res.body.conversations.filter(isRecord)
                : [];
            const present = entries.some((c) => c.id === made);
            if (expected && !present && entries.length >= LIST_LIMIT_MAX) {
              ctx.note(
                `${what}: a full page without the routed conversation (others' activity may have pushed it out)`,
              );
              continue;
            }
            if (present !== expected)
              fail(
                expected
                  ? `the conversation the routed send made on agent ${agent} is not in that agent's list (${what})`
                  : `the conversation the routed send made on agent ${agent} is listed on agent ${on} (${what})`,
              );
          }
      }
    },
  }),
  check({
    id: "CONSIST-ROUTED-SAME-RULES",
    level: "MUST",
    section: "Endpoints/Model-routed send",
    title:
      "The model-routed send reads the body as send-message does: a named conversation resumes (stored, counted, updated_at moved), system applies, stream_tool_calls adds tool blocks",
    needs: [],
    async run(ctx) {
      const routed = { routed: true, model: ctx.inputs.agent };
      const conv = await settledConversation(ctx);
      const before = await fetched(ctx, conv.id);
      // Past any clock resolution a deployment stores, so the routed turn's activity shows in updated_at.
      await sleep(20);
      const routedPrompt = `Say hello through the routed send ${ctx.nonce()}.`;
      const resumed = await ctx.turn({ ...routed, conversationId: conv.id, prompt: routedPrompt });
      ensureTurnOk(resumed, "routed turn naming the caller's conversation");
      if (resumed.conversationId !== undefined && resumed.conversationId !== conv.id)
        fail(
          `the routed turn naming ${conv.id} answered X-Conversation-Id ${JSON.stringify(resumed.conversationId)}`,
        );
      const after = await fetched(ctx, conv.id);
      if (
        typeof after.turn_count !== "number" ||
        typeof before.turn_count !== "number" ||
        after.turn_count <= before.turn_count
      )
        fail(
          `a routed turn naming ${conv.id} did not resume it: turn_count ${JSON.stringify(before.turn_count)} before, ${JSON.stringify(after.turn_count)} after`,
        );
      if (millis(after, "updated_at") <= millis(before, "updated_at"))
        fail(
          `a routed turn left updated_at at ${String(after.updated_at)}: a turn is activity on either route`,
        );
      const transcript = await ctx.transcript(conv.id);
      ensureStatus(transcript, 200, "transcript after the routed turn");
      if (!userTexts(transcript.body).some((t) => t.includes(routedPrompt)))
        fail("the transcript does not hold the turn sent through the model-routed send");
      const token = ctx.nonce();
      const directed = await ctx.turn({ ...routed, prompt: prompts.hello, system: prompts.token(token) });
      ensureTurnOk(directed, "routed turn with system");
      if (!directed.text.includes(token))
        fail(`the routed turn's reply does not follow the system text (token ${token})`, directed.text);
      const tools = await ctx.turn({
        ...routed,
        prompt: prompts.writeFile(`acc-${ctx.nonce()}.txt`, ctx.nonce()),
        streamToolCalls: true,
      });
      ensureTurnOk(tools, "routed turn with stream_tool_calls");
      if (!tools.reading.blocks.some((b) => b.type === "tool_use"))
        fail("the routed turn with stream_tool_calls, asked to use its tools, streamed no tool_use block");
      // delivery "async" on the routed send is judged by ERR-501-ASYNC, which owns that rule on both routes.
    },
  }),
  check({
    id: "CONSIST-ROUTED-REFUSALS",
    level: "MUST",
    section: "Endpoints/Model-routed send",
    title:
      "The model-routed send refuses as send-message does: 403 for a Viewer key, 403 for a turn into another member's shared conversation",
    needs: ["viewerKey", "memberKey"],
    async run(ctx) {
      const routed = { routed: true, model: ctx.inputs.agent };
      const viewer = await ctx.turn({
        ...routed,
        key: ctx.inputs.viewerKey,
        conversationId: ctx.newConversationId(),
        prompt: prompts.hello,
      });
      ensureStatus(viewer.response, 403, "model-routed send with a Viewer key");
      const conv = await settledConversation(ctx);
      ensureStatus(await ctx.share(conv.id, { shared: true }), [200, 204], "share toggle by the owner");
      const member = await ctx.turn({
        ...routed,
        key: ctx.inputs.memberKey,
        conversationId: conv.id,
        prompt: prompts.hello,
      });
      ensureStatus(member.response, 403, "model-routed send into another member's shared conversation");
    },
  }),
  check({
    id: "CONSIST-DELETED-ID-NEW",
    level: "MUST",
    section: "States and transitions",
    title:
      "A deleted conversation's id, sent again, creates a new conversation with exactly that id and none of the deleted one's messages",
    needs: [],
    async run(ctx) {
      // A nonce in each first prompt: the titles sweep (conformance/sweeps/titles.ts) then tells which prompt
      // the new conversation's title came from.
      const conv = await settledConversation(ctx, `Say hello ${ctx.nonce()} in one short sentence.`);
      ensureStatus(await ctx.deleteConversation(conv.id), 204, "delete");
      const prompt = `Say hello again ${ctx.nonce()}.`;
      const turn = await ctx.turn({ conversationId: conv.id, prompt });
      ensureTurnOk(turn, "a turn naming the deleted conversation's id (an unknown id now)");
      const res = await ctx.transcript(conv.id);
      ensureStatus(res, 200, "transcript of the conversation created anew");
      const texts = userTexts(res.body);
      if (texts.some((t) => t.includes(conv.firstPrompt)))
        fail(
          "the conversation created anew with a deleted conversation's id shows the deleted conversation's messages",
          JSON.stringify(texts).slice(0, 300),
        );
      if (!texts.some((t) => t.includes(prompt)))
        fail(
          "the conversation created anew does not hold the turn just sent",
          JSON.stringify(texts).slice(0, 300),
        );
    },
  }),
  check({
    id: "MEANING-TRANSCRIPT-ORDER",
    level: "MUST",
    section: "Resources/Transcript (response of the messages route)",
    title:
      "The transcript's messages are in the order the turns ran: an earlier turn's user message comes first",
    needs: [],
    async run(ctx) {
      const round = await memoryRound(ctx);
      const res = await ctx.transcript(round.id);
      ensureStatus(res, 200, "transcript");
      const texts = userTexts(res.body);
      const first = texts.findIndex((t) => t.includes(round.nonce));
      const second = texts.findIndex((t) => t.includes(prompts.recall));
      if (first < 0 || second < 0)
        fail("the transcript does not hold both turns' user messages", JSON.stringify(texts).slice(0, 300));
      if (first > second)
        fail(
          `the second turn's user message comes before the first's (positions ${second} and ${first}): messages are not oldest first`,
        );
      const messages = isRecord(res.body) && Array.isArray(res.body.messages) ? res.body.messages : [];
      const firstRole = messages.find((m) => isRecord(m) && m.is_compact_summary !== true);
      if (isRecord(firstRole) && firstRole.role !== "user")
        fail(
          `the transcript starts with a ${JSON.stringify(firstRole.role)} message, not the first turn's user message`,
        );
    },
  }),
  check({
    id: "CONSIST-MODELS-EVERY-KEY",
    level: "MUST",
    section: "Endpoints/List models",
    title:
      "The models list puts the agent's default model first for every key of the workspace (member, Viewer)",
    needs: ["memberKey"],
    async run(ctx) {
      const firstOf = async (key: string | undefined, who: string) => {
        const res = await ctx.listModels({ key });
        ensureStatus(res, 200, `models list with ${who}`);
        const data = isRecord(res.body) && Array.isArray(res.body.data) ? res.body.data : [];
        const first = data[0];
        if (!isRecord(first) || typeof first.id !== "string")
          fail(`the models list with ${who} has no first entry with an id`, res.text.slice(0, 300));
        return first.id;
      };
      // The default is the agent's: it does not depend on who asks.
      const mine = await firstOf(undefined, "the run's key");
      const callers: Array<[string, string]> = [["a member's key", String(ctx.inputs.memberKey)]];
      if (ctx.inputs.viewerKey) callers.push(["a Viewer key", ctx.inputs.viewerKey]);
      for (const [who, key] of callers) {
        const theirs = await firstOf(key, who);
        if (theirs !== mine)
          fail(`the models list starts with ${theirs} for ${who} and with ${mine} for the run's key`);
      }
    },
  }),
  check({
    id: "MEANING-TRANSCRIPT-AUTHOR",
    level: "MUST",
    section: "Resources/Transcript (response of the messages route)",
    title:
      "author_user_id names who sent a user message: two members' messages carry different ids, one member's the same id",
    needs: ["memberKey"],
    async run(ctx) {
      const authorsOf = async (id: string, key?: string) => {
        const res = await ctx.transcript(id, { key });
        ensureStatus(res, 200, "transcript");
        return turnMessages(res.body).map((m) => m.author_user_id);
      };
      const mine = await settledConversation(ctx);
      const mineAgain = await settledConversation(ctx);
      const theirs = await settledConversation(ctx, prompts.hello, ctx.inputs.memberKey);
      const [a] = await authorsOf(mine.id);
      const [b] = await authorsOf(mineAgain.id);
      const [c] = await authorsOf(theirs.id, ctx.inputs.memberKey);
      if (typeof a !== "string" || typeof b !== "string" || typeof c !== "string")
        fail(`a user message lacks author_user_id: ${JSON.stringify([a, b, c])}`);
      if (a !== b) fail(`one caller's user messages carry two author_user_id values: ${a} and ${b}`);
      if (a === c) fail(`two members' user messages carry the same author_user_id ${a}`);
    },
  }),
  check({
    id: "CONSIST-KEY-HEADER-CASE",
    level: "MUST",
    section: "Authentication",
    title:
      "The key header is read whatever the case of its name (x-api-key, X-API-KEY) on every route, both sends included: HTTP header names are case-insensitive",
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      for (const keyHeader of ["x-api-key", "X-API-KEY", "X-Api-Key"]) {
        const res = await ctx.call("listModels", {
          method: "GET",
          url: `${ctx.agentUrl()}/v1/models`,
          key: ctx.inputs.key,
          keyHeader,
        });
        ensureStatus(res, 200, `models list with the key in a header spelled ${keyHeader}`);
      }
      // Every route reads the same header: a gateway or a route of its own may compare names verbatim.
      for (const keyHeader of ["x-api-key", "X-API-KEY"]) {
        const options = { keyHeader };
        const reads: Array<[string, () => Promise<{ status: number; text: string }>]> = [
          ["list conversations", () => ctx.listConversations({}, options)],
          ["single fetch", () => ctx.getConversation(conv.id, options)],
          ["transcript", () => ctx.transcript(conv.id, options)],
          ["last compaction", () => ctx.lastCompaction(conv.id, options)],
          ["share toggle", () => ctx.share(conv.id, { shared: false }, options)],
        ];
        for (const [route, call] of reads)
          ensureStatus(await call(), [200, 204], `${route} with the key in a header spelled ${keyHeader}`);
        for (const routed of [false, true]) {
          const turn = await ctx.turn({
            conversationId: conv.id,
            prompt: prompts.hello,
            keyHeader,
            routed,
            model: routed ? ctx.inputs.agent : undefined,
          });
          ensureTurnOk(
            turn,
            `${routed ? "model-routed send" : "send-message"} with the key in a header spelled ${keyHeader}`,
          );
        }
      }
    },
  }),
  check({
    id: "CONSIST-ID-CHARACTERS",
    level: "MUST",
    section: "Endpoints/Send a message",
    title:
      "A conversation id with spaces, non-ASCII letters and punctuation, over 64 characters long, is created and read back verbatim on every route",
    needs: [],
    async run(ctx) {
      // Any string, says the API; kept to characters every URL and header survive percent-encoded
      // (no "/", which proxies may decode, and no control characters).
      // ... and long: past the 64 characters a fixed-width column would hold.
      const id = `${ctx.newConversationId()} größe + ünïcode @:,;= ${"long-".repeat(14)}`;
      const turn = await ctx.turn({ conversationId: id, prompt: prompts.hello });
      ensureTurnOk(turn, "turn with a conversation id holding spaces and non-ASCII letters");
      const conversation = await sameOnEveryRoute(ctx, id);
      if (conversation.id !== id)
        fail(
          `the conversation reads back with id ${JSON.stringify(conversation.id)}, sent ${JSON.stringify(id)}`,
        );
    },
  }),
  check({
    id: "CONSIST-CONTENT-JOIN",
    level: "MUST",
    section: "Endpoints/Send a message",
    title:
      "A user message sent as text blocks is stored as those blocks joined with blank lines, non-ASCII text verbatim (the transcript's user text)",
    needs: [],
    async run(ctx) {
      // Non-ASCII letters, an emoji (outside the BMP) and a CJK word: the text must be stored as sent.
      const first = `Block one ${ctx.nonce()}: größe ünïcode 日本語 🙂.`;
      const second = prompts.hello;
      const id = ctx.newConversationId();
      const turn = await ctx.turn({
        conversationId: id,
        prompt: [
          { type: "text", text: first },
          { type: "text", text: second },
        ],
      });
      ensureTurnOk(turn, "turn with a two-block user message");
      const res = await ctx.transcript(id);
      ensureStatus(res, 200, "transcript");
      const texts = userTexts(res.body);
      const expected = `${first}\n\n${second}`;
      if (!texts.includes(expected))
        fail(
          `no user message of the transcript reads as the two blocks joined with a blank line: ${JSON.stringify(texts).slice(0, 400)}`,
        );
    },
  }),
  check({
    id: "CONSIST-SHARE-IDEMPOTENT",
    level: "MUST",
    section: "Endpoints/Toggle sharing",
    title:
      "The share toggle sets the value it is sent: {shared: true} twice leaves it shared, {shared: false} twice private",
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      for (const shared of [true, true, false, false]) {
        const res = await ctx.share(conv.id, { shared });
        if (res.status < 200 || res.status > 299)
          fail(`{"shared": ${shared}} gave ${res.status}`, res.text.slice(0, 300));
        const now = (await fetched(ctx, conv.id)).shared;
        if (now !== shared)
          fail(`after {"shared": ${shared}} the conversation's shared is ${JSON.stringify(now)}`);
      }
    },
  }),
  check({
    id: "CONSIST-SINCE-FORMS",
    level: "MUST",
    section: "Endpoints/List conversations",
    title:
      "since is read in every ISO 8601 form of one instant (Z or an offset; no, three or six fraction digits)",
    needs: [],
    async run(ctx) {
      const older = await settledConversation(ctx);
      const olderEnd = millis(await fetched(ctx, older.id), "updated_at");
      // A whole second strictly after the older conversation's last activity and before the newer one
      // starts, so the forms without milliseconds name the same instant.
      const boundary = Math.floor(olderEnd / 1000) * 1000 + 1000;
      // The boundary is on the deployment's clock, which may be hours off this machine's: the wait is the
      // distance from the latest instant the deployment has shown to the boundary (its clock has moved on
      // since), never this machine's idea of the boundary, so any skew costs at most that second. When the
      // newer conversation still lands before the boundary, the rest is waited out once more.
      let serverSeen = olderEnd;
      let newerId = "";
      let newerStart = 0;
      for (let attempt = 1; ; attempt++) {
        await sleep(Math.max(0, boundary - serverSeen) + 100);
        const newer = await ctx.turn({ conversationId: ctx.newConversationId(), prompt: prompts.hello });
        ensureTurnOk(newer, "newer conversation's turn");
        newerId = String(newer.conversationId ?? "");
        newerStart = millis(await fetched(ctx, newerId), "created_at");
        if (newerStart > boundary || attempt >= 2) break;
        serverSeen = newerStart;
      }
      if (newerStart <= boundary)
        skip(
          `the deployment's created_at of a conversation started after ${new Date(boundary).toISOString()} by this machine's clock (twice, the second time after waiting out the rest its first timestamp showed) is ${new Date(newerStart).toISOString()}: its clock never showed a whole second between the two conversations`,
        );
      const olderNow = millis(await fetched(ctx, older.id), "updated_at");
      if (olderNow >= boundary)
        skip(
          `the earlier conversation's updated_at moved to ${new Date(olderNow).toISOString()} with no turn on it after ${new Date(olderEnd).toISOString()}: the deployment counts something other than a turn as activity, so no since falls between the two`,
        );
      const utc = new Date(boundary).toISOString();
      const plusTwo = new Date(boundary + 2 * 3_600_000).toISOString().replace("Z", "+02:00");
      const forms = [
        utc,
        utc.replace(".000Z", "Z"),
        // Six fraction digits, as Python's isoformat writes them.
        utc.replace(".000Z", ".000000Z"),
        utc.replace("Z", "+00:00"),
        plusTwo,
      ];
      for (const since of forms) {
        const res = await ctx.listConversations({ since, limit: "200" });
        ensureStatus(res, 200, `list since=${since}`);
        const list =
          isRecord(res.body) && Array.isArray(res.body.conversations) ? res.body.conversations : [];
        ensureNotCrowdedOut(list, [newerId], `since=${since}`);
        const ids = list.map((c) => (isRecord(c) ? c.id : undefined));
        if (!ids.includes(newerId)) fail(`since=${since} leaves out a conversation created after it`);
        if (ids.includes(older.id))
          fail(`since=${since} lists a conversation whose last activity was before it`);
      }
    },
  }),
  check({
    id: "MEANING-TIMESTAMPS-MOVE",
    level: "MUST",
    section: CONVERSATION,
    title:
      "A turn moves updated_at forward and leaves created_at alone; updated_at is never before created_at",
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      const before = await fetched(ctx, conv.id);
      // Past any clock resolution a deployment stores (the API's timestamps carry milliseconds).
      await sleep(20);
      ensureTurnOk(await ctx.turn({ conversationId: conv.id, prompt: prompts.hello }), "second turn");
      const after = await fetched(ctx, conv.id);
      if (after.created_at !== before.created_at)
        fail(`a turn changed created_at from ${before.created_at} to ${after.created_at}`);
      if (millis(after, "updated_at") <= millis(before, "updated_at"))
        fail(
          `a turn left updated_at at ${after.updated_at} (it was ${before.updated_at} before the turn): a turn is activity`,
        );
      if (millis(after, "updated_at") < millis(after, "created_at"))
        fail(`updated_at ${after.updated_at} is before created_at ${after.created_at}`);
    },
  }),
  check({
    id: "MEANING-LIST-NEWEST-ACTIVITY",
    level: "MUST",
    section: "Endpoints/List conversations",
    title:
      "The list is ordered by newest activity: a conversation with a later turn comes before one whose last turn was earlier",
    needs: [],
    async run(ctx) {
      // The check assumes only that a turn is activity: A is created, then B, then A has another turn.
      const a = await settledConversation(ctx);
      const b = await settledConversation(ctx);
      await sleep(20);
      ensureTurnOk(await ctx.turn({ conversationId: a.id, prompt: prompts.hello }), "later turn on A");
      await ctx.waitForSession(a.id);
      const aBegan = String((await ctx.conversation(a.id)).created_at);
      const res = await ctx.listConversations({ limit: "200", since: justBefore(aBegan) });
      ensureStatus(res, 200, "list conversations");
      const list = isRecord(res.body) && Array.isArray(res.body.conversations) ? res.body.conversations : [];
      ensureNotCrowdedOut(list, [a.id, b.id], "the list since A began");
      const ids = list.map((c) => (isRecord(c) ? c.id : undefined));
      const posA = ids.indexOf(a.id);
      const posB = ids.indexOf(b.id);
      if (posA < 0 || posB < 0) fail(`the list (limit 200) leaves out ${posA < 0 ? a.id : b.id}`);
      if (posA > posB)
        fail(
          `${a.id} had a turn after ${b.id}'s last turn, yet the list puts it after (positions ${posA} and ${posB})`,
        );
    },
  }),
  check({
    id: "MEANING-USAGE-COUNTS",
    level: "MUST",
    section: "Events",
    title:
      "A turn that produced output reports output_tokens > 0 and some input; total_cost_usd is the turn's cost in US dollars (not cents)",
    needs: [],
    async run(ctx) {
      // The grammar's representative turns (no turn of its own): a hello, a thinking turn, a tool turn.
      const { streams } = await grammarStreams(ctx);
      const text = streams[0].turn;
      ensureTurnOk(text);
      if (!carriesOutput(text.reading.blocks)) skip("the agent produced no output when asked to say hello");
      for (const { label, turn } of streams) {
        const usage = turn.reading?.usage;
        if (turn.reading?.end !== "message_stop" || !usage) {
          if (turn === text) fail("message_delta carries no usage");
          continue;
        }
        const count = (field: string) => (typeof usage[field] === "number" ? (usage[field] as number) : 0);
        if (carriesOutput(turn.reading.blocks)) {
          if (count("output_tokens") <= 0)
            fail(
              `${label}: the turn produced output but usage says output_tokens ${JSON.stringify(usage.output_tokens)}`,
            );
          const input =
            count("input_tokens") + count("cache_read_input_tokens") + count("cache_creation_input_tokens");
          if (input <= 0)
            fail(
              `${label}: the turn read a prompt but usage counts no input tokens: ${JSON.stringify(usage)}`,
            );
        }
        const cost = usage.total_cost_usd;
        const ceiling = costCeiling(usage);
        if (typeof cost === "number" && (cost < 0 || cost > ceiling + 1e-6))
          fail(
            `${label}: total_cost_usd ${cost} is not the turn's cost in US dollars: the dearest list prices charge at most ${ceiling.toPrecision(3)} for ${JSON.stringify(usage)} (cents, or a sum over more than this turn?)`,
          );
      }
    },
  }),
];
