/** States and transitions: every move of the API's table, and the silent failure modes around sessions. */
import { type ApiResponse, type CheckContext, isRecord, sleep, type Turn } from "../context.ts";
import { fail, skip } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import {
  ANSWERED_SILENCE,
  agentsBesides,
  carriesOutput,
  check,
  ensureAnswered,
  ensureIncludes,
  ensureNotCrowdedOut,
  ensureStatus,
  ensureTurnOk,
  memoryRound,
  prompts,
  settledConversation,
  sharedConversation,
} from "./common.ts";
import { grammarStreams } from "./events.ts";
import { hasToolBlocks, toolCalls } from "./replies.ts";

const SECTION = "States and transitions";

/** A conversation whose session was recorded, then a resumed turn with no output, then a recall. */
interface EmptyTurnRound {
  id: string;
  nonce: string;
  emptyTurn: Turn;
  cleared: boolean;
  /** Last compaction and the transcript, read right after the empty turn (before the recall). */
  compaction: ApiResponse;
  transcript: ApiResponse;
  recall: Turn;
}

function emptyTurnRound(ctx: CheckContext): Promise<EmptyTurnRound> {
  return ctx.fixture("empty-turn-round", async (c) => {
    const id = c.newConversationId();
    const nonce = c.nonce();
    const remember = await c.turn({ conversationId: id, prompt: prompts.remember(nonce) });
    ensureTurnOk(remember, "remember turn");
    ensureAnswered(remember, "the remember turn");
    if ((await c.waitForSession(id)) === null)
      fail("agent_session_id was never recorded after the first turn");
    const emptyTurn = await c.turn({ conversationId: id, prompt: prompts.noOutput });
    ensureTurnOk(emptyTurn, "no-output turn", { mayBeSilent: true });
    if (carriesOutput(emptyTurn.reading.blocks)) skip(ANSWERED_SILENCE);
    const cleared = await c.waitForSessionCleared(id);
    const compaction = await c.lastCompaction(id);
    const transcript = await c.transcript(id);
    const recall = await c.turn({ conversationId: id, prompt: prompts.recall });
    ensureTurnOk(recall, "recall turn after the empty turn");
    return { id, nonce, emptyTurn, cleared, compaction, transcript, recall };
  });
}

/** One remember turn, then a follow-up sent at once, before agent_session_id is recorded. */
function raceRound(ctx: CheckContext): Promise<{ nonce: string; followUp: Turn }> {
  return ctx.fixture("race-round", async (c) => {
    const id = c.newConversationId();
    const nonce = c.nonce();
    ensureTurnOk(await c.turn({ conversationId: id, prompt: prompts.remember(nonce) }), "remember turn");
    const before = await c.conversation(id);
    if (before.agent_session_id !== null) {
      skip(
        "agent_session_id was already recorded when the follow-up was sent, so the race could not be provoked",
      );
    }
    const followUp = await c.turn({ conversationId: id, prompt: prompts.recall });
    return { nonce, followUp };
  });
}

/** Forks `parentId` and returns the fork result body; fails unless 200 with a child id. */
async function forkOk(
  ctx: CheckContext,
  parentId: string,
  body: Record<string, unknown>,
  key?: string,
  agent?: string,
) {
  const res = await ctx.fork(parentId, body, { key, agent });
  ensureStatus(res, [200, 201], "fork");
  if (!isRecord(res.body) || typeof res.body.conversation_id !== "string")
    fail("the fork result has no conversation_id");
  return res.body as {
    conversation_id: string;
    parent_conversation_id: string;
    forked_at_turn: number;
    agent_session_id: string;
  };
}

export const stateChecks: CheckDef[] = [
  /** The race the API warns about: a follow-up sent before the session is recorded has no memory and no error. */
  check({
    id: "STATE-RACE-NO-MEMORY",
    level: "MUST",
    section: SECTION,
    title:
      "A message sent before agent_session_id is recorded is answered normally (no error status, no error event)",
    needs: [],
    async run(ctx) {
      const race = await raceRound(ctx);
      ensureTurnOk(race.followUp, "follow-up sent before the session was recorded");
    },
  }),
  /** The memory side of the race: the API lists it as a silent failure mode, not as a rule to keep. */
  check({
    id: "STATE-RACE-MEMORY-LOST",
    level: "INFO",
    section: SECTION,
    title:
      "A message sent before agent_session_id is recorded resumes with no memory (the API's silent failure mode)",
    needs: [],
    async run(ctx) {
      const race = await raceRound(ctx);
      ensureTurnOk(race.followUp, "follow-up sent before the session was recorded");
      // Over a real network the pointer may be recorded between our read and the server's handling of the
      // follow-up; a deployment may also hold the follow-up until it is: both are friendlier than the API.
      if (race.followUp.text.includes(race.nonce))
        fail(
          "the agent remembered the code word although no session was recorded when it was sent",
          race.followUp.text,
        );
    },
  }),
  /** The API's race: the pointer is recorded after the stream closes, so it is null right then. */
  check({
    id: "STATE-SESSION-NULL-AT-CLOSE",
    level: "INFO",
    section: SECTION,
    title:
      "agent_session_id is still null right after a new conversation's first stream closes (recorded later)",
    needs: [],
    async run(ctx) {
      const id = ctx.newConversationId();
      const first = await ctx.turn({ conversationId: id, prompt: prompts.hello });
      ensureTurnOk(first, "first turn");
      const right = await ctx.conversation(id);
      if (right.agent_session_id !== null)
        fail(
          "agent_session_id was set when the stream closed: this deployment has no race (friendlier than the API describes)",
        );
      if ((await ctx.waitForSession(id)) === null) {
        ensureAnswered(first, "the first turn");
        fail("agent_session_id was never recorded");
      }
    },
  }),
  /** After a turn with output the session pointer is recorded (a few seconds later at most). */
  check({
    id: "STATE-SESSION-RECORDED",
    level: "MUST",
    section: SECTION,
    title: "After a turn with output, agent_session_id becomes non-null (within --session-wait-ms)",
    needs: [],
    async run(ctx) {
      const conv = await sharedConversation(ctx);
      if (conv.sessionId === null)
        fail(`agent_session_id was still null after ${ctx.inputs.sessionWaitMs} ms`);
    },
  }),
  /** A new conversation starts private and owned by its creator. */
  check({
    id: "STATE-CREATED-PRIVATE",
    level: "MUST",
    section: SECTION,
    title: "A conversation created by send-message is private, owned by the caller, not a fork",
    needs: [],
    async run(ctx) {
      const turn = await ctx.turn({ prompt: prompts.hello });
      ensureTurnOk(turn);
      if (!turn.conversationId) fail("no X-Conversation-Id header");
      const c = await ctx.conversation(turn.conversationId);
      if (c.shared !== false) fail(`shared is ${JSON.stringify(c.shared)}, expected false`);
      if (c.is_owner !== true) fail(`is_owner is ${JSON.stringify(c.is_owner)}, expected true`);
      if (c.parent_conversation_id !== null || c.forked_at_turn_index !== null)
        fail("a new conversation carries fork fields");
    },
  }),
  /** A resumed turn with no output clears the session pointer. */
  check({
    id: "STATE-EMPTY-TURN-CLEARS",
    level: "MUST",
    section: SECTION,
    title:
      "A turn that produced no output leaves agent_session_id null: a resumed one clears it, a conversation's first one never sets it",
    needs: [],
    async run(ctx) {
      const round = await emptyTurnRound(ctx);
      if (!round.cleared)
        fail(`agent_session_id was not null within ${ctx.inputs.sessionWaitMs} ms after the empty turn`);
      // A first turn with no output: nothing to record (States and transitions: the pointer becomes non-null
      // when "a turn produced output"; Client guidance: "a turn with no output legitimately has no session id").
      const { streams } = await grammarStreams(ctx);
      const first = streams.find((s) => s.label === "no-output turn")?.turn;
      if (
        !first?.reading ||
        first.response.status !== 200 ||
        carriesOutput(first.reading.blocks) ||
        !first.conversationId
      )
        return ctx.note("the first turn asked for no output answered: the first-turn case was not judged");
      const session = await ctx.waitForNoSession(first.conversationId);
      if (session !== null)
        fail(
          `the conversation whose only turn produced no output has agent_session_id ${JSON.stringify(session)}`,
        );
    },
  }),
  /** Last compaction tells an empty turn from a compaction step. */
  check({
    id: "COMPACTION-NOT-EMPTY-TURN",
    level: "MUST",
    section: "Endpoints/Get last compaction",
    title:
      "After a turn that produced no output, last compaction tells it from a compaction step: compacted only with a compaction summary in the transcript",
    needs: [],
    async run(ctx) {
      const round = await emptyTurnRound(ctx);
      ensureStatus(round.compaction, 200, "last compaction right after the empty turn");
      ensureStatus(round.transcript, 200, "transcript right after the empty turn");
      const compacted = isRecord(round.compaction.body) ? round.compaction.body.compacted : undefined;
      const messages =
        isRecord(round.transcript.body) && Array.isArray(round.transcript.body.messages)
          ? round.transcript.body.messages
          : [];
      const summaries = messages.filter((m) => isRecord(m) && m.is_compact_summary === true).length;
      if (compacted === true && summaries === 0)
        fail(
          "last compaction says compacted true after a turn that was merely empty: the transcript holds no compaction summary",
          round.compaction.text.slice(0, 300),
        );
    },
  }),
  /** ...and the next turn starts a clean session. */
  check({
    id: "STATE-EMPTY-TURN-CLEAN-SESSION",
    level: "MUST",
    section: SECTION,
    title: "The turn after an empty resumed turn starts a clean session (no memory of earlier turns)",
    needs: [],
    async run(ctx) {
      const round = await emptyTurnRound(ctx);
      // Judged whether or not agent_session_id was cleared (STATE-EMPTY-TURN-CLEARS judges that): the
      // recall shows the memory either way.
      if (round.recall.text.includes(round.nonce))
        fail(
          `the agent still remembered the code word after an empty turn${round.cleared ? "" : " (and agent_session_id was never cleared)"}`,
          round.recall.text,
        );
    },
  }),
  /** Files written by a turn are there when the conversation resumes. */
  check({
    id: "STATE-RESUME-KEEPS-FILES",
    level: "MUST",
    section: SECTION,
    title: "A resumed conversation still has the files its earlier turn wrote",
    needs: [],
    async run(ctx) {
      const id = ctx.newConversationId();
      const name = `acc-${ctx.nonce()}.txt`;
      const content = ctx.nonce();
      ensureTurnOk(
        await ctx.turn({ conversationId: id, prompt: prompts.writeFile(name, content) }),
        "write turn",
      );
      await ctx.waitForSession(id);
      // The content is in the conversation too, so a model could recite it from memory: the read tool's
      // result is the evidence that the file is still there, the reply only where no tool block streams.
      const read = await ctx.turn({
        conversationId: id,
        prompt: prompts.readFile(name),
        streamToolCalls: true,
      });
      ensureTurnOk(read, "read turn");
      const reads = toolCalls(read).filter((c) => c.input.includes(name));
      if (reads.length === 0) {
        ctx.note(
          hasToolBlocks(read)
            ? `no tool call named ${name}: judged from the reply text alone (weaker evidence)`
            : "no tool blocks were streamed although stream_tool_calls was true: judged from the reply text alone",
        );
        ensureIncludes(read.text, content, "reading the file back");
        return;
      }
      if (!reads.some((c) => c.result && !c.result.isError && c.result.content.includes(content)))
        fail(
          `no tool read of ${name} returned what the earlier turn wrote (${content})`,
          reads
            .map((c) => `${c.name} → ${c.result ? c.result.content.slice(0, 300) : "no tool_result"}`)
            .join("\n"),
        );
    },
  }),
  /** Share on: the flag is stored, and another member may read. */
  check({
    id: "STATE-SHARE-TRUE",
    level: "MUST",
    section: SECTION,
    title:
      'Toggling {"shared": true} as owner makes the conversation shared (members may read it), and only it (a shared child\'s parent stays private)',
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      ensureStatus(await ctx.share(conv.id, { shared: true }), [200, 204], "share toggle");
      if ((await ctx.conversation(conv.id)).shared !== true) fail("shared is not true after the toggle");
      const member = ctx.inputs.memberKey;
      if (member) {
        const read = await ctx.conversation(conv.id, { key: member });
        if (read.is_owner !== false) fail("is_owner is not false for another member");
      } else {
        ctx.note("the member read was not tried (no --member-key)");
      }
      // The toggle changes the conversation toggled: sharing a fork's child leaves its parent private.
      const parent = await settledConversation(ctx);
      const child = await forkOk(ctx, parent.id, {});
      ensureStatus(
        await ctx.share(child.conversation_id, { shared: true }),
        [200, 204],
        "share toggle of a child",
      );
      if ((await ctx.conversation(parent.id)).shared !== false)
        fail("sharing a fork's child made its parent shared too");
      if (member)
        ensureStatus(
          await ctx.getConversation(parent.id, { key: member }),
          404,
          "another member reads the private parent of a shared child",
        );
    },
  }),
  /** Share off: private again. */
  check({
    id: "STATE-SHARE-FALSE",
    level: "MUST",
    section: SECTION,
    title:
      'Toggling {"shared": false} as owner makes the conversation private again (in a member\'s list while shared, gone from their fetch and list after)',
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      ensureStatus(await ctx.share(conv.id, { shared: true }), [200, 204], "share on");
      const memberList = async () => {
        const list = await ctx.listConversations({ limit: "200" }, { key: ctx.inputs.memberKey });
        ensureStatus(list, 200, "member's list");
        return isRecord(list.body) && Array.isArray(list.body.conversations) ? list.body.conversations : [];
      };
      // Shared, it is in the member's list (visible to a caller: shared with the workspace) ...
      if (ctx.inputs.memberKey) {
        const shown = await memberList();
        ensureNotCrowdedOut(shown, [conv.id], "the member's list while shared");
        if (!shown.some((c) => isRecord(c) && c.id === conv.id))
          fail(`the member's list leaves out ${conv.id} while it is shared with the workspace`);
      }
      ensureStatus(await ctx.share(conv.id, { shared: false }), [200, 204], "share off");
      if ((await ctx.conversation(conv.id)).shared !== false) fail("shared is not false after the toggle");
      if (ctx.inputs.memberKey) {
        ensureStatus(
          await ctx.getConversation(conv.id, { key: ctx.inputs.memberKey }),
          404,
          "member read after unsharing",
        );
        // ... and private again, out of it.
        const listed = await memberList();
        if (listed.some((c) => isRecord(c) && c.id === conv.id))
          fail(`the member's list still shows ${conv.id} after it was made private again`);
      } else {
        ctx.note("the member read was not tried (no --member-key)");
      }
    },
  }),
  /** Members may fork a shared conversation; the child is theirs and private. */
  check({
    id: "STATE-SHARED-MEMBER-FORK",
    level: "MUST",
    section: SECTION,
    title:
      "A member may fork another member's shared conversation; the child is owned by them and private, their turns there are theirs, and the parent stays the owner's to keep shared or make private",
    needs: ["memberKey"],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      ensureStatus(await ctx.share(conv.id, { shared: true }), [200, 204], "share toggle");
      const member = ctx.inputs.memberKey;
      const result = await forkOk(ctx, conv.id, {}, member);
      const childId = result.conversation_id;
      const child = await ctx.conversation(childId, { key: member });
      if (child.is_owner !== true) fail("the child is not owned by the forking member");
      if (child.shared !== false) fail("the child is not private");
      ensureStatus(await ctx.getConversation(childId), 404, "the parent's owner reading the private child");
      // The child is the member's conversation (States and transitions: owned by the caller): a turn they send
      // there is resumed, and its transcript credits it to them (the sweeps judge the author against the
      // ids each key's user shows elsewhere in the run).
      const own = await ctx.turn({
        conversationId: childId,
        key: member,
        prompt: `Say hello from the fork ${ctx.nonce()}.`,
      });
      ensureTurnOk(own, "the member's turn in the child they forked");
      ensureStatus(
        await ctx.transcript(childId, { key: member }),
        200,
        "the member's transcript of the child",
      );
      // The parent is unchanged by the fork and still its owner's: the owner's own turn leaves it shared (only
      // the owner's toggle changes that), and the owner's {"shared": false} makes it private again, for the
      // member too, whatever they forked from it.
      const ownerTurn = await ctx.turn({
        conversationId: conv.id,
        prompt: `Say hello again ${ctx.nonce()}.`,
      });
      ensureTurnOk(ownerTurn, "the owner's turn into their shared conversation");
      if ((await ctx.conversation(conv.id, { key: member })).shared !== true)
        fail("after the owner's own turn, the member reads the parent as no longer shared");
      ensureStatus(await ctx.share(conv.id, { shared: false }), [200, 204], "share off by the owner");
      ensureStatus(
        await ctx.getConversation(conv.id, { key: member }),
        404,
        "the member's read of the parent made private again after they forked it",
      );
      if ((await ctx.conversation(childId, { key: member })).is_owner !== true)
        fail("the member no longer owns their child once the parent was made private");
    },
  }),
  /** Fork: child created, private, owned by caller; parent unchanged. */
  check({
    id: "STATE-FORK-CHILD",
    level: "MUST",
    section: SECTION,
    title:
      "Fork creates a private child owned by the caller, pointing at its parent; the parent is unchanged; a fork of the child points at the child",
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      const before = await ctx.conversation(conv.id);
      const result = await forkOk(ctx, conv.id, {});
      if (result.parent_conversation_id !== conv.id)
        fail(`parent_conversation_id is ${result.parent_conversation_id}`);
      const child = await ctx.conversation(result.conversation_id);
      if (child.parent_conversation_id !== conv.id)
        fail("the child's parent_conversation_id is not the parent");
      if (typeof child.forked_at_turn_index !== "number")
        fail("the child's forked_at_turn_index is not a number");
      if (child.shared !== false || child.is_owner !== true)
        fail("the child is not private and owned by the caller");
      const after = await ctx.conversation(conv.id);
      for (const field of ["turn_count", "shared", "parent_conversation_id", "title"] as const) {
        if (after[field] !== before[field]) fail(`forking changed the parent's ${field}`);
      }
      // A child is a conversation like any (States and transitions): forked in turn, its own child points at
      // it, the conversation forked, not at the root (Fork result, `parent_conversation_id`); the forks sweep
      // judges `forked_at_turn` against the child's own length.
      // Its last compaction and transcript are read too: the sweeps hold them to each other on every
      // conversation, a fork's child as much as one a send made.
      ensureStatus(await ctx.lastCompaction(result.conversation_id), 200, "the child's last compaction");
      ensureStatus(await ctx.transcript(result.conversation_id), 200, "the child's transcript");
      const grandchild = await forkOk(ctx, result.conversation_id, {});
      if (grandchild.parent_conversation_id !== result.conversation_id)
        fail(
          `the fork of the child ${result.conversation_id} answers parent_conversation_id ${JSON.stringify(grandchild.parent_conversation_id)}`,
        );
      const read = await ctx.conversation(grandchild.conversation_id);
      if (read.parent_conversation_id !== result.conversation_id)
        fail(
          `the fork of the child ${result.conversation_id} reads parent_conversation_id ${JSON.stringify(read.parent_conversation_id)}`,
        );
    },
  }),
  /** The child's first turn answers from the parent's context. */
  check({
    id: "STATE-FORK-CONTEXT",
    level: "MUST",
    section: SECTION,
    title: "A fork's first turn answers from the parent's context, on every agent kind",
    needs: [],
    async run(ctx) {
      const round = await memoryRound(ctx);
      if (round.sessionId === null)
        fail(
          "the parent's agent_session_id was never recorded within --session-wait-ms after a turn that answered",
        );
      const result = await forkOk(ctx, round.id, {});
      const turn = await ctx.turn({ conversationId: result.conversation_id, prompt: prompts.recall });
      ensureTurnOk(turn, "child's first turn");
      ensureIncludes(turn.text, round.nonce, "recall in the fork");
      // The rule names no agent kind: each other agent's fork answers from its parent too.
      for (const agent of agentsBesides(ctx)) {
        const id = ctx.newConversationId();
        const nonce = ctx.nonce();
        ensureTurnOk(
          await ctx.turn({ agent, conversationId: id, prompt: prompts.remember(nonce) }),
          `remember turn on agent ${agent}`,
        );
        const parentSession = await ctx.waitForSession(id, { agent });
        const child = await forkOk(ctx, id, {}, undefined, agent);
        const recall = await ctx.turn({
          agent,
          conversationId: child.conversation_id,
          prompt: prompts.recall,
        });
        ensureTurnOk(recall, `child's first turn on agent ${agent}`);
        ensureIncludes(recall.text, nonce, `recall in the fork on agent ${agent}`);
        // The parent is unchanged (States and transitions): once the child's session is recorded, the parent's
        // pointer is still the one its own turn left. Waited as long as the run's recordings take (three times
        // the longest seen, at least a second), since the child's is "recorded a few seconds after".
        if (parentSession === null) continue;
        await ctx.waitForSession(child.conversation_id, { agent });
        const seen = ctx.run.sessionRecordedMs ?? 1000;
        await sleep(Math.min(ctx.inputs.sessionWaitMs, Math.max(1000, 3 * seen)));
        const parent = await ctx.conversation(id, { agent });
        if (parent.agent_session_id !== parentSession)
          fail(
            `on agent ${agent}, the child's turn moved the parent's agent_session_id from ${parentSession} to ${JSON.stringify(parent.agent_session_id)}: a fork leaves its parent unchanged`,
          );
      }
    },
  }),
  /** at_turn cuts the copied history (whether turns count from 0 or 1 is not shown, so INFO). */
  check({
    id: "STATE-FORK-AT-TURN",
    level: "INFO",
    section: SECTION,
    title: "A fork at_turn 1 of a two-turn conversation answers from the first turn only",
    needs: [],
    async run(ctx) {
      const id = ctx.newConversationId();
      const [first, second] = [ctx.nonce(), ctx.nonce()];
      ensureTurnOk(await ctx.turn({ conversationId: id, prompt: prompts.remember(first) }), "first turn");
      await ctx.waitForSession(id);
      ensureTurnOk(await ctx.turn({ conversationId: id, prompt: prompts.remember(second) }), "second turn");
      await ctx.waitForSession(id);
      const result = await forkOk(ctx, id, { at_turn: 1 });
      const turn = await ctx.turn({ conversationId: result.conversation_id, prompt: prompts.recall });
      ensureTurnOk(turn, "child's first turn");
      ensureIncludes(turn.text, first, "recall in a fork at turn 1");
      if (turn.text.includes(second)) fail("the fork at turn 1 remembers the second turn", turn.text);
    },
  }),
  /** Delete by the owner: 204, then gone. */
  check({
    id: "STATE-DELETE",
    level: "MUST",
    section: SECTION,
    title:
      "Delete by the owner answers 204 No Content on every agent kind and removes the conversation (a second delete finds nothing, the list leaves it out), and only it: a child forked from it stays, naming it as its parent; a deleted child's parent stays",
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      // A fork is a JSON call: the child is a conversation of its own (States and transitions).
      const child = await forkOk(ctx, conv.id, {});
      const res = await ctx.deleteConversation(conv.id);
      ensureStatus(res, 204, "delete");
      if (res.text !== "") fail("204 with a body", res.text.slice(0, 200));
      ensureStatus(await ctx.getConversation(conv.id), 404, "fetch after delete");
      // Removed from the lists too, while its child lives on (the child is no reason to keep it).
      const list = await ctx.listConversations({ limit: "200" });
      ensureStatus(list, 200, "the list after the delete");
      const listed =
        isRecord(list.body) && Array.isArray(list.body.conversations) ? list.body.conversations : [];
      if (listed.some((c) => isRecord(c) && c.id === conv.id))
        fail(`the list still holds the deleted conversation ${conv.id}, whose fork's child lives on`);
      ensureStatus(await ctx.deleteConversation(conv.id), 404, "a second delete of the removed conversation");
      const kept = await ctx.getConversation(child.conversation_id);
      ensureStatus(kept, 200, "the child forked from the deleted conversation, read by its owner");
      // Only the conversation deleted changes: the child still says which conversation it was forked from.
      const kid =
        isRecord(kept.body) && isRecord(kept.body.conversation) ? kept.body.conversation : undefined;
      if (kid && kid.parent_conversation_id !== conv.id)
        fail(
          `after its parent was deleted, the child reads parent_conversation_id ${JSON.stringify(kid.parent_conversation_id)}, not ${conv.id}`,
        );
      // The other way round: deleting a child removes the child only, its parent stays as it was.
      const parent = await settledConversation(ctx);
      const before = await ctx.conversation(parent.id);
      const young = await forkOk(ctx, parent.id, {});
      ensureStatus(await ctx.deleteConversation(young.conversation_id), 204, "delete of a fork's child");
      const after = await ctx.getConversation(parent.id);
      ensureStatus(after, 200, "the parent of the deleted child, read by its owner");
      const still = isRecord(after.body) && isRecord(after.body.conversation) ? after.body.conversation : {};
      if (still.turn_count !== before.turn_count)
        fail(
          `deleting a fork's child changed its parent's turn_count from ${JSON.stringify(before.turn_count)} to ${JSON.stringify(still.turn_count)}`,
        );
      // The rule names no agent kind: a delete on each other agent answers the same 204 with no body.
      for (const agent of agentsBesides(ctx)) {
        const turn = await ctx.turn({
          agent,
          conversationId: ctx.newConversationId(),
          prompt: prompts.hello,
        });
        ensureTurnOk(turn, `a turn on agent ${agent}`);
        const id = turn.conversationId;
        if (!id) continue;
        const gone = await ctx.deleteConversation(id, { agent });
        ensureStatus(gone, 204, `delete on agent ${agent}`);
        if (gone.text !== "") fail(`204 with a body on agent ${agent}`, gone.text.slice(0, 200));
      }
    },
  }),
];
