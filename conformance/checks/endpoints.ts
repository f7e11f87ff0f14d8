/** Endpoints: the response shape and rules of every read and management route. */
import { isRecord } from "../context.ts";
import { normalisedUrl } from "../inputs.ts";
import { excerpt, fail, skip } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import {
  agentsBesides,
  check,
  ensureClientError,
  ensureHistoryKnown,
  ensureNotCrowdedOut,
  ensureStatus,
  ensureTurnOk,
  everyAgent,
  firstBlockNotHeld,
  ISO_MS_UTC,
  justBefore,
  memoryRound,
  modelsInfo,
  prompts,
  settledConversation,
  sharedConversation,
  streamedTextBlocks,
  turnRanAs,
} from "./common.ts";
import { grammarStreams } from "./events.ts";

/** The `channel` enum (Resources/Conversation; List conversations, `channel`). */
const CHANNELS = ["INTERACTIVE", "NOTEBOOK", "SLACK", "EMAIL"] as const;

export const endpointChecks: CheckDef[] = [
  /** {data: [model entries], has_more}; every entry typed "model". */
  check({
    id: "MODELS-SHAPE",
    level: "MUST",
    section: "Endpoints/List models",
    title:
      'The models list is {data: [{type: "model", id, display_name}], has_more}, each model once, on every agent kind',
    needs: [],
    async run(ctx) {
      const agents = everyAgent(ctx);
      for (const agent of agents) {
        const of = agent === ctx.inputs.agent ? "" : ` of agent ${agent}`;
        const res = await ctx.listModels({ agent });
        ensureStatus(res, 200, `models list${of}`);
        if (!isRecord(res.body) || !Array.isArray(res.body.data))
          fail(`no data array${of}`, res.text.slice(0, 300));
        if (typeof res.body.has_more !== "boolean") fail(`has_more${of} is not a boolean`);
        if (res.body.data.length === 0) fail(`the models list${of} is empty`);
        const seen = new Set<unknown>();
        for (const entry of res.body.data) {
          if (!isRecord(entry) || entry.type !== "model")
            fail(`an entry${of} is not of type "model"`, JSON.stringify(entry));
          if (typeof entry.id !== "string" || typeof entry.display_name !== "string")
            fail(`an entry${of} lacks id or display_name`);
          // A list of the agent's models names each once: an id twice is one model listed as two.
          if (seen.has(entry.id))
            fail(`the models list${of} holds ${JSON.stringify(entry.id)} twice`, res.text.slice(0, 300));
          seen.add(entry.id);
        }
      }
    },
  }),
  /** The list holds the caller's conversations, newest activity first. */
  check({
    id: "LIST-SHAPE-ORDER",
    level: "MUST",
    section: "Endpoints/List conversations",
    title:
      "The conversation list is {conversations: [...]}, holds the caller's conversation, newest activity first, on every agent kind",
    needs: [],
    async run(ctx) {
      const conv = await sharedConversation(ctx);
      // A second, newer conversation: it must come before the older one.
      const newer = await ctx.turn({ conversationId: ctx.newConversationId(), prompt: prompts.hello });
      ensureTurnOk(newer);
      // `since` keeps the check's own conversations within the first 200 on a busy deployment; a second
      // early, as the API does not say whether it is inclusive.
      const since = justBefore(String((await ctx.conversation(conv.id)).created_at));
      const res = await ctx.listConversations({ limit: "200", since });
      ensureStatus(res, 200, "conversation list");
      if (!isRecord(res.body) || !Array.isArray(res.body.conversations))
        fail("no conversations array", res.text.slice(0, 300));
      const list = res.body.conversations.filter(isRecord);
      const ids = list.map((c) => c.id);
      ensureNotCrowdedOut(list, [conv.id, newer.conversationId], "the list since the conversation began");
      const older = ids.indexOf(conv.id);
      const newest = ids.indexOf(newer.conversationId);
      if (older === -1) fail("the caller's conversation is not listed");
      if (newest === -1) fail("the newest conversation is not listed");
      if (newest > older) fail("an older conversation is listed before a newer one");
      // The order is the list's on every agent: two conversations one after the other on each other agent.
      for (const agent of agentsBesides(ctx)) {
        const made: string[] = [];
        for (const label of ["older", "newer"]) {
          const turn = await ctx.turn({
            agent,
            conversationId: ctx.newConversationId(),
            prompt: prompts.hello,
          });
          ensureTurnOk(turn, `the ${label} conversation's turn on agent ${agent}`);
          if (turn.conversationId) made.push(turn.conversationId);
        }
        const first = await ctx.conversation(made[0], { agent });
        const theirs = await ctx.listConversations(
          { limit: "200", since: justBefore(String(first.created_at)) },
          { agent },
        );
        ensureStatus(theirs, 200, `conversation list of agent ${agent}`);
        const entries =
          isRecord(theirs.body) && Array.isArray(theirs.body.conversations)
            ? theirs.body.conversations.filter(isRecord)
            : [];
        ensureNotCrowdedOut(entries, made, `the list of agent ${agent} since its conversations began`);
        const at = made.map((id) => entries.findIndex((c) => c.id === id));
        if (at.some((i) => i === -1))
          fail(`the list of agent ${agent} leaves out a conversation just made on it`);
        if (at[1] > at[0]) fail(`on agent ${agent}, an older conversation is listed before a newer one`);
      }
      // "Newest activity" need not be updated_at (a share toggle may bump it without being activity).
      for (let i = 1; i < list.length; i++) {
        if (String(list[i - 1].updated_at) < String(list[i].updated_at)) {
          ctx.note("the list is not in updated_at order (activity may be measured otherwise)");
          break;
        }
      }
    },
  }),
  /** limit bounds the list; default 50; 1 and 200 accepted. */
  check({
    id: "LIMIT-LIST-RANGE",
    level: "MUST",
    section: "Limits",
    title: "List limit accepts 1 to 200 and bounds the result (default 50)",
    needs: [],
    async run(ctx) {
      await sharedConversation(ctx);
      for (const [limit, max] of [
        ["1", 1],
        ["200", 200],
        [undefined, 50],
      ] as const) {
        const res = await ctx.listConversations(limit ? { limit } : {});
        ensureStatus(res, 200, `list with limit ${limit ?? "(default)"}`);
        const list =
          isRecord(res.body) && Array.isArray(res.body.conversations) ? res.body.conversations : undefined;
        if (!list) fail("no conversations array", res.text.slice(0, 200));
        if (list.length > max) fail(`limit ${limit ?? "(default)"} returned ${list.length} conversations`);
        if (list.length === 0)
          fail(`limit ${limit ?? "(default)"} returned none although the caller has conversations`);
      }
    },
  }),
  /** Out-of-range limits: behaviour not shown by the API. */
  check({
    id: "LIMIT-LIST-OUT-OF-RANGE",
    level: "INFO",
    section: "Limits",
    title: "List limit 0 or 201 gets a 4xx (behaviour not shown)",
    needs: [],
    async run(ctx) {
      ensureClientError(await ctx.listConversations({ limit: "0" }), "limit 0");
      ensureClientError(await ctx.listConversations({ limit: "201" }), "limit 201");
    },
  }),
  /** The channel filter returns only that channel, up to `limit` of them. */
  check({
    id: "LIST-CHANNEL-FILTER",
    level: "MUST",
    section: "Endpoints/List conversations",
    title:
      "The channel filter returns only conversations of that channel, the ones shared with the caller included, up to limit of them on every channel",
    needs: [],
    async run(ctx) {
      const conv = await sharedConversation(ctx);
      const own = await ctx.conversation(conv.id);
      const other = CHANNELS.find((c) => c !== own.channel) ?? "EMAIL";
      for (const channel of [own.channel, other]) {
        const res = await ctx.listConversations({
          channel,
          limit: "200",
          since: justBefore(String(own.created_at)),
        });
        ensureStatus(res, 200, `list with channel ${channel}`);
        const list =
          isRecord(res.body) && Array.isArray(res.body.conversations)
            ? res.body.conversations.filter(isRecord)
            : [];
        if (list.some((c) => c.channel !== channel))
          fail(`channel=${channel} returned conversations of another channel`);
        const listed = list.some((c) => c.id === conv.id);
        if (channel === own.channel) ensureNotCrowdedOut(list, [conv.id], `channel=${channel}`);
        if (channel === own.channel && !listed)
          fail(`channel=${channel} does not list a conversation of that channel`);
        if (channel !== own.channel && listed) fail(`channel=${channel} lists a ${own.channel} conversation`);
      }
      // `limit` bounds what the filter keeps (up to `limit` conversations of that channel), on every channel:
      // a channel the caller has conversations of gives a full page of them at a small limit too.
      for (const channel of CHANNELS) {
        const res = await ctx.listConversations({ channel, limit: "200" });
        ensureStatus(res, 200, `list with channel ${channel}`);
        const all = isRecord(res.body) && Array.isArray(res.body.conversations) ? res.body.conversations : [];
        for (const limit of [1, 2].filter((n) => n <= all.length)) {
          const page = await ctx.listConversations({ channel, limit: String(limit) });
          ensureStatus(page, 200, `list with channel ${channel} and limit ${limit}`);
          const got =
            isRecord(page.body) && Array.isArray(page.body.conversations)
              ? page.body.conversations.filter(isRecord)
              : [];
          if (got.length !== limit || got.some((c) => c.channel !== channel))
            fail(
              `channel=${channel}&limit=${limit} lists ${got.length} conversation(s) (channels ${JSON.stringify(got.map((c) => c.channel))}), although channel=${channel} alone lists ${all.length}: the limit is applied before the filter`,
            );
        }
      }
      // The filter narrows what the caller may see, not whose it is: a member's list of that channel holds a
      // conversation shared with the workspace.
      if (ctx.inputs.memberKey) {
        const shared = await settledConversation(ctx);
        ensureStatus(await ctx.share(shared.id, { shared: true }), [200, 204], "share toggle by the owner");
        const since = justBefore(String((await ctx.conversation(shared.id)).created_at));
        const res = await ctx.listConversations(
          { channel: String(own.channel), limit: "200", since },
          { key: ctx.inputs.memberKey },
        );
        ensureStatus(res, 200, `a member's list with channel ${own.channel}`);
        const list =
          isRecord(res.body) && Array.isArray(res.body.conversations)
            ? res.body.conversations.filter(isRecord)
            : [];
        ensureNotCrowdedOut(list, [shared.id], `a member's list with channel=${own.channel}`);
        if (!list.some((c) => c.id === shared.id))
          fail(
            `a member's list with channel=${own.channel} leaves out ${shared.id}, a ${own.channel} conversation shared with the workspace`,
          );
      }
    },
  }),
  /** Visibility: another member's shared conversation is listed, their private one is not. */
  check({
    id: "LIST-VISIBILITY",
    level: "MUST",
    section: "Endpoints/List conversations",
    title: "The list holds another member's shared conversations and never their private ones",
    needs: ["memberKey"],
    async run(ctx) {
      const key = ctx.inputs.memberKey;
      const privateId = ctx.newConversationId();
      const sharedId = ctx.newConversationId();
      ensureTurnOk(await ctx.turn({ conversationId: privateId, prompt: prompts.hello, key }), "private turn");
      ensureTurnOk(await ctx.turn({ conversationId: sharedId, prompt: prompts.hello, key }), "turn to share");
      ensureStatus(
        await ctx.share(sharedId, { shared: true }, { key }),
        [200, 204],
        "share toggle by the owner",
      );
      const since = justBefore(String((await ctx.conversation(privateId, { key })).created_at));
      const res = await ctx.listConversations({ limit: "200", since });
      ensureStatus(res, 200, "conversation list");
      const conversations =
        isRecord(res.body) && Array.isArray(res.body.conversations) ? res.body.conversations : [];
      const ids = conversations.filter(isRecord).map((c) => c.id);
      ensureNotCrowdedOut(conversations, [sharedId], "the list since the member's conversations began");
      if (!ids.includes(sharedId))
        fail("another member's conversation shared with the workspace is not listed");
      if (ids.includes(privateId)) fail("another member's private conversation is listed");
    },
  }),
  /** The single fetch: {conversation}, the fields of the API, timestamps in UTC with milliseconds. */
  check({
    id: "GET-SHAPE",
    level: "MUST",
    section: "Endpoints/Get a conversation",
    title:
      "Get a conversation answers {conversation} with the API's fields; timestamps are UTC ISO 8601 with ms",
    needs: [],
    async run(ctx) {
      const conv = await sharedConversation(ctx);
      const c = await ctx.conversation(conv.id);
      if (c.id !== conv.id) fail(`id is ${c.id}`);
      for (const field of ["created_at", "updated_at"] as const) {
        if (!ISO_MS_UTC.test(String(c[field])))
          fail(`${field} ${JSON.stringify(c[field])} is not ISO 8601 UTC with milliseconds`);
      }
      // What turn_count counts is judged by GET-TURN-COUNT.
      if (typeof c.turn_count !== "number")
        fail(`turn_count ${JSON.stringify(c.turn_count)} is not a number`);
    },
  }),
  /** The title comes from the first prompt and never changes. */
  check({
    id: "GET-TITLE-STABLE",
    level: "MUST",
    section: "Resources/Conversation",
    title: "title is derived from the first prompt and never changed by later turns",
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      const first = await ctx.conversation(conv.id);
      if (first.title.trim() === "") fail("the title is empty");
      ensureTurnOk(
        await ctx.turn({ conversationId: conv.id, prompt: "A completely different second prompt." }),
        "second turn",
      );
      const second = await ctx.conversation(conv.id);
      if (second.title !== first.title)
        fail(`the title changed from ${JSON.stringify(first.title)} to ${JSON.stringify(second.title)}`);
    },
  }),
  /**
   * turn_count counts turns: the API gives it no more than a type, but its name says what it counts, and a
   * deployment owner reading a report expects that to hold, so this is MUST (a turn is one send-message call).
   */
  check({
    id: "GET-TURN-COUNT",
    level: "MUST",
    section: "Resources/Conversation",
    title: "turn_count is 2 after two turns",
    needs: [],
    async run(ctx) {
      const round = await memoryRound(ctx);
      ensureHistoryKnown(ctx, round.id, "the two-turn conversation");
      const c = await ctx.conversation(round.id);
      if (c.turn_count !== 2) fail(`turn_count is ${c.turn_count}`);
    },
  }),
  /** The transcript: conversation, messages in the messages-API shape, events. */
  check({
    id: "TRANSCRIPT-SHAPE",
    level: "MUST",
    section: "Endpoints/Get a transcript",
    title:
      "The transcript is {conversation, messages, events}; user messages carry author fields; text blocks",
    needs: [],
    async run(ctx) {
      const conv = await sharedConversation(ctx);
      const res = await ctx.transcript(conv.id);
      ensureStatus(res, 200, "transcript");
      const body = res.body;
      if (
        !isRecord(body) ||
        !isRecord(body.conversation) ||
        !Array.isArray(body.messages) ||
        !Array.isArray(body.events)
      ) {
        fail("not {conversation, messages, events}", res.text.slice(0, 300));
      }
      const messages = body.messages.filter(isRecord);
      const user = messages.find((m) => m.role === "user");
      const assistant = messages.find((m) => m.role === "assistant");
      if (!user || !assistant)
        fail("the transcript lacks a user or an assistant message after a completed turn");
      if (typeof user.author_user_id !== "string" || typeof user.author_name !== "string") {
        fail("the user message lacks author_user_id or author_name");
      }
      for (const m of messages) {
        if (
          !Array.isArray(m.content) ||
          m.content.some((b) => !isRecord(b) || b.type !== "text" || typeof b.text !== "string")
        ) {
          fail(
            "a message's content is not an array of {type: text, text} blocks",
            JSON.stringify(m).slice(0, 300),
          );
        }
      }
      const userText = (user.content as Array<{ text: string }>).map((b) => b.text).join("\n");
      if (!userText.includes(conv.firstPrompt))
        fail("the user message does not hold the prompt sent", userText);
      // Every streamed text block, whole and in order, however the transcript joins or splits them.
      const assistantText = messages
        .filter((m) => m.role === "assistant")
        .flatMap((m) => (m.content as Array<{ text: string }>).map((b) => b.text))
        .join("\n\n");
      const missing = firstBlockNotHeld(assistantText, streamedTextBlocks(conv.turn));
      if (missing !== undefined)
        fail(
          `the assistant messages do not hold the streamed text block ${JSON.stringify(excerpt(missing, 80))}`,
          assistantText.slice(0, 300),
        );
      // The same on turns of the other block kinds (Events rule 1): a thinking turn's, a tool turn's transcript
      // holds its reply as text blocks, and its thinking, a block of its own in the stream, is no reply text.
      const { streams } = await grammarStreams(ctx);
      for (const { label, turn } of streams) {
        if (!turn.conversationId || turn.reading?.end !== "message_stop" || label === "text turn") continue;
        const other = await ctx.transcript(turn.conversationId);
        ensureStatus(other, 200, `the transcript of the ${label}`);
        const held = isRecord(other.body) && Array.isArray(other.body.messages) ? other.body.messages : [];
        const replies = held.filter((m) => isRecord(m) && m.role === "assistant");
        const blocks = replies.flatMap((m) => (isRecord(m) && Array.isArray(m.content) ? m.content : []));
        const bad = blocks.find((b) => !isRecord(b) || b.type !== "text" || typeof b.text !== "string");
        if (bad !== undefined)
          fail(`an assistant message of the ${label} holds a block that is not text`, JSON.stringify(bad));
        const text = blocks.map((b) => String((b as { text: string }).text)).join("\n\n");
        const streamed = streamedTextBlocks(turn);
        const lost = firstBlockNotHeld(text, streamed);
        if (lost !== undefined)
          fail(
            `the assistant messages of the ${label} do not hold its streamed text block ${JSON.stringify(excerpt(lost, 80))}`,
            text.slice(0, 300),
          );
        for (const block of turn.reading.blocks.filter((b) => b.type === "thinking")) {
          const thought = block.deltas
            .map((d) => (typeof d.thinking === "string" ? d.thinking : ""))
            .join("");
          if (
            thought.trim().length >= 16 &&
            text.includes(thought.trim()) &&
            !streamed.some((t) => t.includes(thought.trim()))
          )
            fail(
              `the assistant messages of the ${label} hold its thinking as reply text: thinking is a block of its own, not the reply`,
              text.slice(0, 300),
            );
        }
      }
    },
  }),
  /** {compacted: boolean, summary: string}. */
  check({
    id: "COMPACTION-SHAPE",
    level: "MUST",
    section: "Endpoints/Get last compaction",
    title: "Last compaction answers {compacted: boolean, summary: string}",
    needs: [],
    async run(ctx) {
      const conv = await sharedConversation(ctx);
      const res = await ctx.lastCompaction(conv.id);
      ensureStatus(res, 200, "last compaction");
      if (
        !isRecord(res.body) ||
        typeof res.body.compacted !== "boolean" ||
        typeof res.body.summary !== "string"
      ) {
        fail("not {compacted: boolean, summary: string}", res.text.slice(0, 300));
      }
    },
  }),
  /** A compaction shows: last-compaction says so, the transcript flags its summary message. */
  check({
    id: "COMPACTION-FLAGGED",
    level: "MUST",
    section: "Endpoints/Get last compaction",
    title:
      "After a compaction, last-compaction answers compacted true and the transcript has a user message with is_compact_summary true",
    needs: [],
    async run(ctx) {
      const id = ctx.newConversationId();
      // Long turns push the context past a compaction budget; the filler asks nothing of the agent.
      const filler = "This sentence is filler for a long-context test and needs no answer. "
        .repeat(420)
        .trim();
      let compacted = false;
      const sent: string[] = [];
      for (let round = 0; round < 3 && !compacted; round++) {
        const prompt = `${prompts.remember(ctx.nonce())}\n\n${filler}`;
        sent.push(prompt);
        const turn = await ctx.turn({ conversationId: id, prompt });
        ensureTurnOk(turn, `long turn ${round + 1}`);
        await ctx.waitForSession(id);
        const res = await ctx.lastCompaction(id);
        ensureStatus(res, 200, "last compaction");
        compacted = isRecord(res.body) && res.body.compacted === true;
        if (
          compacted &&
          !(isRecord(res.body) && typeof res.body.summary === "string" && res.body.summary !== "")
        )
          fail("compacted is true but the summary is empty", res.text.slice(0, 300));
      }
      const transcript = await ctx.transcript(id);
      ensureStatus(transcript, 200, "transcript");
      const messages =
        isRecord(transcript.body) && Array.isArray(transcript.body.messages)
          ? transcript.body.messages.filter(isRecord)
          : [];
      const textOf = (m: Record<string, unknown>) =>
        Array.isArray(m.content)
          ? m.content.map((b) => (isRecord(b) && typeof b.text === "string" ? b.text : "")).join("")
          : "";
      // A user message the caller never sent can only be a compaction summary, which must say so. Stored
      // text may differ from the sent text in whitespace.
      const normal = (text: string) => text.replace(/\s+/g, " ").trim();
      const sentNormal = sent.map(normal);
      const unflagged = messages.find(
        (m) => m.role === "user" && m.is_compact_summary !== true && !sentNormal.includes(normal(textOf(m))),
      );
      if (unflagged)
        fail(
          "a user message the caller never sent is not flagged is_compact_summary",
          textOf(unflagged).slice(0, 300),
        );
      if (!compacted) {
        // The transcript shows a compaction the route does not report: the route is wrong, not silent.
        const summary = messages.find((m) => m.role === "user" && m.is_compact_summary === true);
        if (summary)
          fail(
            "the transcript holds a compaction summary (is_compact_summary true) but last-compaction says compacted is not true",
            textOf(summary).slice(0, 300),
          );
        skip("three turns of ~30,000 characters did not make the deployment compact");
      }
      if (!messages.some((m) => m.role === "user" && m.is_compact_summary === true))
        fail("no user message has is_compact_summary true after a compaction", transcript.text.slice(0, 500));
    },
  }),
  /** The share body is exactly {shared: boolean}; other bodies are refused. */
  check({
    id: "SHARE-BODY-STRICT",
    level: "SHOULD",
    section: "Endpoints/Toggle sharing",
    title: "A share body other than exactly {shared: <boolean>} gets a 4xx and changes nothing",
    needs: [],
    async run(ctx) {
      // Shared first, then the bodies that are not the toggle: none of them may take it back (one that names
      // no boolean names no value; the sweeps hold every later read to the owner's last real toggle).
      const conv = await settledConversation(ctx);
      ensureStatus(await ctx.share(conv.id, { shared: true }), [200, 204], "share toggle by the owner");
      for (const body of [{ shared: "false" }, {}, { shared: false, extra: 1 }]) {
        ensureClientError(await ctx.share(conv.id, body), `share body ${JSON.stringify(body)}`);
        if ((await ctx.conversation(conv.id)).shared !== true)
          fail(`the share body ${JSON.stringify(body)} changed the shared conversation`);
      }
    },
  }),
  /** Fork with a taken conversation_id: 409. */
  check({
    id: "ERR-409-FORK-TAKEN",
    level: "MUST",
    section: "Errors",
    title:
      "Fork with a conversation_id that is already taken gives 409, also by a conversation of another agent; a deleted conversation's id is free again",
    needs: [],
    async run(ctx) {
      const conv = await sharedConversation(ctx);
      ensureStatus(
        await ctx.fork(conv.id, { conversation_id: conv.id }),
        409,
        "fork onto the parent's own id",
      );
      // An id belongs to one agent (Conversation id resolution: on another agent's path it is "a different
      // agent's"), so one in use on any other agent is taken too.
      for (const agent of agentsBesides(ctx)) {
        const other = await settledConversation(ctx, prompts.hello, undefined, agent);
        ensureStatus(
          await ctx.fork(conv.id, { conversation_id: other.id }),
          409,
          `fork onto the id of a conversation of agent ${agent}`,
        );
      }
      // Deleted, the conversation is removed (States and transitions): its id is no longer taken.
      const gone = await settledConversation(ctx);
      ensureStatus(await ctx.deleteConversation(gone.id), [200, 204], "delete");
      const res = await ctx.fork(conv.id, { conversation_id: gone.id });
      ensureStatus(res, [200, 201], "fork onto the id of a conversation deleted before");
      ctx.track(gone.id, ctx.inputs.key);
    },
  }),
  /** Fork with a chosen child id. */
  check({
    id: "FORK-CUSTOM-ID",
    level: "MUST",
    section: "Endpoints/Fork a conversation",
    title:
      "Fork with conversation_id creates the child with exactly that id (spaces and non-ASCII letters included); the result has the API's fields",
    needs: [],
    async run(ctx) {
      const conv = await sharedConversation(ctx);
      // Any string, as for a conversation created by a turn: spaces and non-ASCII letters included.
      const childId = `${ctx.newConversationId()} kïnd ünïcode +@`;
      const res = await ctx.fork(conv.id, { conversation_id: childId });
      ensureStatus(res, [200, 201], "fork");
      ctx.track(childId, ctx.inputs.key);
      if (!isRecord(res.body)) fail("no JSON body");
      if (res.body.conversation_id !== childId)
        fail(`conversation_id is ${JSON.stringify(res.body.conversation_id)}`);
      if (res.body.parent_conversation_id !== conv.id) fail("parent_conversation_id is not the parent");
      if (typeof res.body.forked_at_turn !== "number") fail("forked_at_turn is not an integer");
      if (typeof res.body.agent_session_id !== "string") fail("agent_session_id is not a string");
      const child = await ctx.getConversation(childId);
      ensureStatus(child, 200, "fetch of the child by the id chosen for it");
      const readBack =
        isRecord(child.body) && isRecord(child.body.conversation) ? child.body.conversation.id : undefined;
      if (readBack !== childId)
        fail(`the child reads back with id ${JSON.stringify(readBack)}, chosen ${JSON.stringify(childId)}`);
    },
  }),
  /** at_turn beyond the conversation's length is clamped, not refused. */
  check({
    id: "FORK-AT-TURN-CLAMPED",
    level: "MUST",
    section: "Endpoints/Fork a conversation",
    title: "Fork at_turn beyond the conversation's length is clamped (not an error)",
    needs: [],
    async run(ctx) {
      const conv = await sharedConversation(ctx);
      const res = await ctx.fork(conv.id, { at_turn: 999 });
      ensureStatus(res, [200, 201], "fork with at_turn 999");
      if (
        isRecord(res.body) &&
        typeof res.body.forked_at_turn === "number" &&
        res.body.forked_at_turn >= 999
      ) {
        fail(`forked_at_turn is ${res.body.forked_at_turn}, not clamped to the conversation's length`);
      }
    },
  }),
  /** A model given at fork time is the child's default. */
  check({
    id: "FORK-MODEL-RECORDED",
    level: "MUST",
    section: "Endpoints/Fork a conversation",
    title:
      "Fork with model records it as the child's default for its future turns (its first and its second), which a turn's own model overrides",
    needs: [],
    async run(ctx) {
      const models = await modelsInfo(ctx);
      if (!models.otherId)
        skip("the agent offers a single model; a fork's model cannot be told from the default");
      const conv = await sharedConversation(ctx);
      const res = await ctx.fork(conv.id, { model: models.otherId });
      ensureStatus(res, [200, 201], "fork with model");
      if (!isRecord(res.body) || typeof res.body.conversation_id !== "string") fail("no conversation_id");
      // A default "for its future turns": each of them, the second as much as the first.
      for (const which of ["first", "second"]) {
        const turn = await ctx.turn({ conversationId: res.body.conversation_id, prompt: prompts.whichModel });
        ensureTurnOk(turn, `child's ${which} turn`);
        if (!turnRanAs(turn, models.otherId))
          fail(`the child's ${which} turn did not run on ${models.otherId}`, turn.text);
      }
      // A default, not a pin: a turn whose body names a model runs on that one (Send a message, `model`).
      const named = await ctx.turn({
        conversationId: res.body.conversation_id,
        prompt: prompts.whichModel,
        model: models.defaultId,
      });
      ensureTurnOk(named, "the child's turn naming a model in its body");
      if (!turnRanAs(named, models.defaultId))
        fail(
          `the child's turn whose body names ${models.defaultId} ran on the fork's recorded ${models.otherId}: the body's model comes first`,
          named.text,
        );
    },
  }),
  /** Invoking a deployed flow with its key and input variables. */
  check({
    id: "FLOW-INVOKE",
    level: "MUST",
    section: "Endpoints/Invoke a deployed flow",
    title:
      "POST {flow_url}/apps/{app_id} with X-API-Key (its name in any case) and {input_vars} answers 2xx JSON",
    needs: ["flowUrl", "flowId", "flowKey", "flowInput"],
    async run(ctx) {
      const inputVars: Record<string, string> = {};
      for (const pair of ctx.inputs.flowInput ?? []) {
        const at = pair.indexOf("=");
        if (at > 0) inputVars[pair.slice(0, at)] = pair.slice(at + 1);
      }
      // The API writes the header X-API-Key; header names are case-insensitive, so any spelling is read.
      for (const keyHeader of ["X-API-Key", "x-api-key"]) {
        const res = await ctx.call("invokeFlow", {
          method: "POST",
          url: `${normalisedUrl(ctx.inputs.flowUrl ?? "")}/apps/${encodeURIComponent(ctx.inputs.flowId ?? "")}`,
          key: ctx.inputs.flowKey,
          keyHeader,
          json: { input_vars: inputVars },
        });
        ensureStatus(res, [200, 201], `flow invocation with the key in a header spelled ${keyHeader}`);
        if (res.body === undefined) fail("the flow answered a body that is not JSON", res.text.slice(0, 300));
      }
      // `Content-Type: application/json` with its charset parameter is that media type (RFC 8259 names UTF-8
      // its encoding): a client that writes it is sending what the API asks for.
      const withCharset = await ctx.call("invokeFlow", {
        method: "POST",
        url: `${normalisedUrl(ctx.inputs.flowUrl ?? "")}/apps/${encodeURIComponent(ctx.inputs.flowId ?? "")}`,
        key: ctx.inputs.flowKey,
        keyHeader: "X-API-Key",
        rawBody: JSON.stringify({ input_vars: inputVars }),
        headers: { "content-type": "application/json; charset=utf-8" },
      });
      ensureStatus(
        withCharset,
        [200, 201],
        "flow invocation with Content-Type: application/json; charset=utf-8",
      );
    },
  }),
  /**
   * Flow without a key, or with one no deployment issued: 401 (Authentication 1 and 4: every request carries
   * the header, the flow's spelled `X-API-Key`; a missing or unrecognized key gives 401).
   */
  check({
    id: "FLOW-NO-KEY",
    level: "MUST",
    section: "Authentication",
    title: "A flow invocation without X-API-Key, or with an unknown key, gets 401",
    needs: ["flowUrl", "flowId"],
    async run(ctx) {
      const url = `${normalisedUrl(ctx.inputs.flowUrl ?? "")}/apps/${encodeURIComponent(ctx.inputs.flowId ?? "")}`;
      // The flow's own input variables, so a refusal can only be the key's doing.
      const input_vars = Object.fromEntries(
        (ctx.inputs.flowInput ?? [])
          .filter((pair) => pair.indexOf("=") > 0)
          .map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]),
      );
      const none = await ctx.call("invokeFlow", { method: "POST", url, json: { input_vars } });
      ensureStatus(none, 401, "flow invocation without key");
      const unknown = await ctx.call("invokeFlow", {
        method: "POST",
        url,
        key: `acc-${ctx.nonce()}-no-such-flow-key`,
        keyHeader: "X-API-Key",
        json: { input_vars },
      });
      ensureStatus(unknown, 401, "flow invocation with a key no deployment issued");
    },
  }),
];

/** A timestamp one minute earlier (for `since` filters that may be exclusive); unparsable ones unchanged. */
