/**
 * List conversations: every query filter of the API narrows the list, the default limit, timestamps of
 * listed conversations, and conversations owned by a channel. Filters are judged by what they must leave
 * out (a conversation the run made that cannot match), so a deployment that ignores one is caught.
 */
import { type CallOptions, type CheckContext, sleep } from "../context.ts";
import { fail, skip } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import {
  check,
  ensureNotCrowdedOut,
  ensureStatus,
  ensureTurnOk,
  ISO_MS_UTC,
  justBefore,
  prompts,
  settledConversation,
  sharedConversation,
} from "./common.ts";

const SECTION = "Endpoints/List conversations";

/** A listed conversation, as far as these checks read it. */
interface Listed {
  id: unknown;
  channel?: unknown;
  shared?: unknown;
  is_owner?: unknown;
  created_at?: unknown;
  updated_at?: unknown;
}

/** The `conversations` of a 200 list answer; fails the check otherwise. */
async function listed(
  ctx: CheckContext,
  query: Record<string, string>,
  options?: CallOptions,
): Promise<Listed[]> {
  const res = await ctx.listConversations(query, options);
  const what = `list ${new URLSearchParams(query).toString() || "(no query)"}`;
  ensureStatus(res, 200, what);
  const body = res.body as { conversations?: unknown } | undefined;
  if (!body || !Array.isArray(body.conversations)) fail(`${what}: no conversations array`, res.text);
  return body.conversations.filter((c): c is Listed => typeof c === "object" && c !== null);
}

const ids = (list: Listed[]) => new Set(list.map((c) => c.id));

/**
 * A filter that must leave out the run's own interactive conversation (made through the API, so it has no
 * chat channel, notebook or automation) and must find what the user said exists.
 */
function filterCheck(
  id: string,
  param: "channel_id" | "notebook_path",
  input: "channelId" | "notebookPath",
  flag: string,
): CheckDef {
  return check({
    id,
    level: "MUST",
    section: SECTION,
    title: `The ${param} filter lists the conversations of that ${param === "channel_id" ? "channel" : "notebook"} and leaves out the others`,
    needs: [input],
    async run(ctx) {
      const value = String(ctx.inputs[input]);
      const own = await sharedConversation(ctx);
      // No `since`: the conversation the user named may be old. The run's own is among the newest, so a
      // deployment ignoring the filter shows it within 200.
      const list = await listed(ctx, { [param]: value, limit: "200" });
      if (list.length === 0)
        fail(
          `${param}=${value} lists nothing, although ${flag} names one with a conversation visible to --key`,
        );
      if (ids(list).has(own.id))
        fail(`${param}=${value} lists a conversation started through the API (${own.id}), which has none`);
      // Filters combine (List conversations: all optional, together): beside `since`, the filter still
      // leaves out the run's own conversation, active since then.
      const since = justBefore(String((await ctx.conversation(own.id)).created_at));
      const both = await listed(ctx, { [param]: value, since, limit: "200" });
      if (ids(both).has(own.id))
        fail(
          `${param}=${value}&since=${since} lists a conversation started through the API (${own.id}): with since beside it, the ${param} filter was dropped`,
        );
      // A filter on the value, not on what starts with it: the value cut short by one character names no
      // conversation listed for the whole value.
      if (value.length > 1) {
        const cut = value.slice(0, -1);
        const wrong = (await listed(ctx, { [param]: cut, limit: "200" })).filter((c) => ids(list).has(c.id));
        if (wrong.length > 0)
          fail(
            `${param}=${cut} lists ${String(wrong[0].id)}, a conversation of ${param} ${value}: the filter matched a prefix, not the value`,
          );
      }
    },
  });
}

export const listChecks: CheckDef[] = [
  /** since: a conversation whose activity ended before `since` is left out, a later one is listed. */
  check({
    id: "LIST-SINCE-FILTER",
    level: "MUST",
    section: SECTION,
    title: "since leaves out conversations with no activity since then and lists later ones",
    needs: [],
    async run(ctx) {
      const older = await settledConversation(ctx);
      const olderEnd = Date.parse(String((await ctx.conversation(older.id)).updated_at));
      // Two server timestamps at least a few ms apart, so `since` can fall strictly between them: then
      // whether since is inclusive, or compares created_at or updated_at, does not matter.
      await sleep(20);
      const newer = await ctx.turn({ conversationId: ctx.newConversationId(), prompt: prompts.hello });
      ensureTurnOk(newer, "newer conversation's turn");
      const newerId = String(newer.conversationId ?? "");
      const newerStart = Date.parse(String((await ctx.conversation(newerId)).created_at));
      if (Number.isNaN(olderEnd) || Number.isNaN(newerStart)) fail("a timestamp is not ISO 8601");
      if (newerStart - olderEnd < 2)
        skip(
          `the deployment's created_at of the later conversation (${new Date(newerStart).toISOString()}) is within 2 ms of the earlier one's updated_at (${new Date(olderEnd).toISOString()}), although it was created at least 20 ms later: no since falls between them`,
        );
      const since = new Date(Math.floor((olderEnd + newerStart) / 2)).toISOString();
      const entries = await listed(ctx, { since, limit: "200" });
      ensureNotCrowdedOut(entries, [newerId], `since=${since}`);
      const list = ids(entries);
      if (!list.has(newerId)) fail(`since=${since} does not list a conversation created after it`);
      // Filters combine: with the conversations' own channel beside it, since still leaves the older out.
      const channel = (await ctx.conversation(newerId)).channel;
      if (typeof channel === "string") {
        const both = await listed(ctx, { since, channel, limit: "200" });
        ensureNotCrowdedOut(both, [newerId], `since=${since}&channel=${channel}`);
        const bothIds = ids(both);
        if (!bothIds.has(newerId))
          fail(
            `since=${since}&channel=${channel} does not list a ${channel} conversation created after since`,
          );
        if (bothIds.has(older.id) && !list.has(older.id))
          fail(
            `since=${since}&channel=${channel} lists a conversation whose last activity was before since (since alone leaves it out)`,
          );
      }
      // A since later than any activity lists none of it (two days ahead: past any clock skew of the kind a
      // deployment may have).
      const future = new Date(Date.now() + 2 * 24 * 3_600_000).toISOString();
      const none = ids(await listed(ctx, { since: future, limit: "200" }));
      if (none.has(newerId) || none.has(older.id))
        fail(`since=${future}, two days ahead, lists a conversation of this run: since was not applied`);
      if (list.has(older.id)) {
        const now = Date.parse(String((await ctx.conversation(older.id)).updated_at));
        if (now >= Date.parse(since))
          skip(
            `the earlier conversation's updated_at moved past since (to ${new Date(now).toISOString()}) with no turn on it: the deployment counts something other than a turn as activity, so listing it is no fault`,
          );
        fail(`since=${since} lists a conversation whose last activity was before it`);
      }
    },
  }),
  filterCheck("LIST-CHANNEL-ID-FILTER", "channel_id", "channelId", "--channel-id"),
  filterCheck("LIST-NOTEBOOK-PATH-FILTER", "notebook_path", "notebookPath", "--notebook-path"),
  /** automation: a conversation whose turns ran without one is left out. */
  check({
    id: "LIST-AUTOMATION-FILTER",
    level: "MUST",
    section: SECTION,
    title: "The automation filter leaves out conversations that ran without that automation",
    needs: ["automation"],
    async run(ctx) {
      const automation = String(ctx.inputs.automation);
      const plain = await sharedConversation(ctx);
      const withIt = await ctx.turn({
        conversationId: ctx.newConversationId(),
        prompt: prompts.hello,
        metadata: { automation },
      });
      ensureTurnOk(withIt, "turn with the automation");
      const list = ids(await listed(ctx, { automation, limit: "200" }));
      if (list.has(plain.id))
        fail(`automation=${automation} lists a conversation that never ran with an automation`);
      // The API does not say that a turn sent with metadata.automation makes the conversation the
      // automation's (its own runs surely are), so its absence is only noted.
      if (!list.has(withIt.conversationId)) {
        ctx.note(`automation=${automation} does not list a conversation started with metadata.automation`);
        return;
      }
      // The deployment's choice, learned: a turn sent with the automation makes the conversation its. Then the
      // same holds for another member's turn, in their own filtered list.
      const member = ctx.inputs.memberKey;
      if (!member) return;
      const theirs = await ctx.turn({
        key: member,
        conversationId: ctx.newConversationId(),
        prompt: prompts.hello,
        metadata: { automation },
      });
      ensureTurnOk(theirs, "the member's turn with the automation");
      const listedToThem = ids(await listed(ctx, { automation, limit: "200" }, { key: member }));
      if (!listedToThem.has(theirs.conversationId))
        fail(
          `automation=${automation} lists the run key's conversation started with metadata.automation, but not the member's own, in the member's list`,
        );
    },
  }),
  /**
   * The default limit is 50: with more than 50 conversations visible, the list without limit is as long
   * as with limit=50. Forks (no model call) make up the number when the deployment has fewer.
   */
  check({
    id: "LIMIT-LIST-DEFAULT-50",
    level: "MUST",
    section: "Limits",
    title: "Without limit the list holds as many conversations as with limit=50 (more than 50 visible)",
    needs: [],
    async run(ctx) {
      // A margin over 50, so conversations other checks delete meanwhile cannot bring it down to 50.
      const wanted = 60;
      const visible = (await listed(ctx, { limit: "200" })).length;
      if (visible < wanted) {
        const parent = await sharedConversation(ctx);
        const missing = wanted - visible;
        for (let made = 0; made < missing; made += 6) {
          const batch = Array.from({ length: Math.min(6, missing - made) }, () => ctx.fork(parent.id, {}));
          for (const res of await Promise.all(batch)) ensureStatus(res, [200, 201], "fork to fill the list");
        }
      }
      const fifty = (await listed(ctx, { limit: "50" })).length;
      const byDefault = (await listed(ctx, {})).length;
      if (byDefault !== fifty)
        fail(
          `without limit the list holds ${byDefault} conversations, with limit=50 it holds ${fifty}: the default is not 50`,
        );
      if (fifty !== 50) ctx.note(`limit=50 returned ${fifty} of at least ${wanted} visible conversations`);
    },
  }),
  /** Listed conversations carry timestamps in UTC with milliseconds, like the single fetch. */
  check({
    id: "LIST-TIMESTAMPS",
    level: "MUST",
    section: "Conventions",
    title: "Listed conversations' created_at and updated_at are ISO 8601 in UTC with milliseconds",
    needs: [],
    async run(ctx) {
      await sharedConversation(ctx);
      const list = await listed(ctx, { limit: "20" });
      if (list.length === 0) fail("the list is empty although the caller has a conversation");
      for (const c of list) {
        for (const field of ["created_at", "updated_at"] as const) {
          if (!ISO_MS_UTC.test(String(c[field])))
            fail(
              `${field} ${JSON.stringify(c[field])} of ${String(c.id)} is not ISO 8601 UTC with milliseconds`,
            );
        }
      }
    },
  }),
  /**
   * Conversations owned by a channel are visible to every caller. One the key sees that it neither owns nor
   * sees shared can only be such a conversation (the API's three visibility rules), so another member
   * must see it too.
   */
  check({
    id: "LIST-CHANNEL-OWNED-VISIBLE",
    level: "MUST",
    section: "Resources/Conversation",
    title:
      "A conversation owned by a channel (listed, not owned, not shared) is visible to another member too, who may fork it (the caller may read it)",
    needs: ["memberKey"],
    async run(ctx) {
      const key = ctx.inputs.memberKey;
      const query: Record<string, string> = ctx.inputs.channelId
        ? { channel_id: ctx.inputs.channelId, limit: "200" }
        : { limit: "200" };
      const channelOwned = (await listed(ctx, query))
        .filter((c) => c.is_owner === false && c.shared === false)
        .slice(0, 3);
      if (channelOwned.length === 0)
        skip(
          "no conversation owned by a channel (listed, is_owner false, shared false) is visible to --key; give --channel-id of a chat channel with one",
          "input",
        );
      // The member's own conversations may crowd an unfiltered list, so its list is read only filtered.
      const memberList = ctx.inputs.channelId ? ids(await listed(ctx, query, { key })) : undefined;
      for (const c of channelOwned) {
        const id = String(c.id);
        ensureStatus(await ctx.getConversation(id, { key }), 200, `another member's fetch of ${id}`);
        if (memberList && !memberList.has(c.id))
          fail(`another member's list with channel_id=${ctx.inputs.channelId} does not hold ${id}`);
      }
      // A fork asks only that the caller may read the conversation (States and transitions): a channel's is
      // read by every member, so it is forked like any other, into a private child of the caller's.
      const fork = await ctx.fork(String(channelOwned[0].id), {}, { key });
      ensureStatus(
        fork,
        [200, 201],
        `another member's fork of ${String(channelOwned[0].id)}, owned by a channel`,
      );
    },
  }),
];
