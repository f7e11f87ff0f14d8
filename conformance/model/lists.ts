/**
 * Lists (Endpoints/List conversations; Limits): what a caller sees, newest activity first, bounded by
 * `limit`. Other clients of the same key may add conversations at any time, so completeness is judged only
 * down to the oldest conversation the page shows: a conversation of the run pushed out by newer ones is no
 * fault (paging beyond `limit` is not shown).
 */
import { expectRule } from "./mismatch.ts";
import { defineRules } from "./rules.ts";
import { type Actor, type AgentKind, type ModelState, WORKSPACE_ACTORS } from "./state.ts";
import { visibility } from "./visibility.ts";

const LIST = "Endpoints/List conversations";

export const listRules = defineRules("lists", {
  visibleOnly: {
    section: "Resources/Conversation",
    check: "LIST-VISIBILITY",
    text: "A list holds only conversations the caller may see: never another user's private one, never a deleted one, never another agent's",
  },
  complete: {
    section: "Resources/Conversation",
    check: "LIST-VISIBILITY",
    text: "A list holds every conversation the caller may see that is newer than the oldest it shows (all of them when fewer than `limit`)",
  },
  order: { section: LIST, check: "LIST-SHAPE-ORDER", text: "Ordered newest activity first" },
  limit: {
    section: "Limits",
    check: "LIMIT-LIST-RANGE",
    text: "`limit` 1 to 200 bounds the list (default 50)",
  },
  channel: {
    section: LIST,
    check: "LIST-CHANNEL-FILTER",
    text: "The `channel` filter lists the visible conversations of that channel (the caller's and those shared with it), and no other",
  },
  sourceFilters: {
    section: LIST,
    check: "LIST-CHANNEL-ID-FILTER",
    text: "`channel_id`, `notebook_path` and `automation` list only conversations of that channel, notebook or automation: never one made through the API without it, under every reader key, whatever other filter is given",
  },
  channelVisible: {
    section: "Resources/Conversation",
    check: "LIST-CHANNEL-OWNED-VISIBLE",
    text: "A conversation owned by a channel is visible to every reader key: in its lists without a filter, as every conversation newer than the oldest a list shows",
  },
  channelOwned: {
    section: "Resources/Conversation",
    check: "LIST-CHANNEL-OWNED-VISIBLE",
    text: "A conversation owned by a channel (listed to a reader key, neither its own nor shared) is in every reader key's list of that channel_id, with the channel stored for it",
  },
  since: {
    section: LIST,
    check: "LIST-SINCE-FILTER",
    text: "`since` lists only conversations with activity since then, and every visible one created after it, whatever other filter is given",
  },
});

/** The filters naming a source the inputs give; `owned`: channel-owned ids every reader's list must hold. */
export interface SourceFilters {
  channelId?: boolean;
  notebookPath?: boolean;
  automation?: boolean;
  owned?: ReadonlySet<string>;
  /**
   * The channel-owned conversations a channel_id list showed (Resources/Conversation: visible to every reader
   * key), as that list showed them: owed in the reader's other lists too, where their activity and channel fit
   * the filters, like the model's own.
   */
  channelOwned?: readonly Listed[];
}

const FILTER_NAMES: Array<["channelId" | "notebookPath" | "automation", string]> = [
  ["channelId", "channel_id"],
  ["notebookPath", "notebook_path"],
  ["automation", "automation"],
];

export interface Listed {
  id: string;
  updated_at?: unknown;
  created_at?: unknown;
  channel?: unknown;
}

/** Judges one list page; returns the listed conversations the model knows, for field-by-field comparison. */
export function judgeList(
  state: ModelState,
  actor: Actor,
  agent: AgentKind,
  listed: Listed[],
  limit: number,
  channel: string | undefined,
  since?: string,
  source: SourceFilters = {},
): void {
  expectRule(listRules.limit, listed.length <= limit, `at most ${limit}`, listed.length);
  const times = listed.map((c) => Date.parse(String(c.updated_at)));
  for (let i = 1; i < times.length; i++) {
    expectRule(
      listRules.order,
      !(times[i] > times[i - 1]),
      "updated_at never increasing down the list",
      listed.map((c) => c.updated_at),
    );
  }
  if (channel !== undefined) {
    for (const c of listed) expectRule(listRules.channel, c.channel === channel, channel, c.channel);
  }
  const sinceMs = since === undefined ? undefined : Date.parse(since);
  if (sinceMs !== undefined) {
    // Whether `since` compares created_at or the last activity, a listed conversation's updated_at (never
    // before either) is not before it.
    for (const c of listed)
      expectRule(
        listRules.since,
        Date.parse(String(c.updated_at)) >= sinceMs,
        `updated_at at or after since=${since}`,
        `${c.id} with updated_at ${String(c.updated_at)}`,
      );
  }
  const shown = new Set(listed.map((c) => c.id));
  if (source.channelId || source.notebookPath || source.automation) {
    // The model's conversations were all made through the API, with no chat channel or notebook; only those
    // that ran a turn with the automation may belong to it.
    for (const c of state.conversations) {
      if (!shown.has(c.id)) continue;
      const mayBelong =
        c.fromChannel === true || (!source.channelId && !source.notebookPath && c.ranAutomation === true);
      expectRule(
        listRules.sourceFilters,
        mayBelong,
        `${c.id} left out (${FILTER_NAMES.filter(([k]) => source[k])
          .map(([, name]) => name)
          .join(", ")}: it was made through the API without one)`,
        `${c.id} listed`,
      );
    }
    if (source.owned && listed.length < limit)
      for (const id of source.owned)
        expectRule(listRules.channelOwned, shown.has(id), `${id} listed (owned by the channel)`, "missing");
  }
  for (const c of state.conversations) {
    if (!shown.has(c.id)) continue;
    const live = state.live(c.id);
    const ok = live !== undefined && live.agent === agent && visibility(actor, live) !== "none";
    expectRule(listRules.visibleOnly, ok, `${c.id} not listed for ${actor} on ${agent}`, `${c.id} listed`);
  }
  const oldest = listed.length < limit ? Number.NEGATIVE_INFINITY : Math.min(...times);
  if (source.channelOwned && WORKSPACE_ACTORS.has(actor) && !source.notebookPath && !source.automation) {
    for (const c of source.channelOwned) {
      const updated = Date.parse(String(c.updated_at));
      // Their activity may only have moved later since that list (a chat goes on): never earlier.
      if (channel !== undefined && c.channel !== channel) continue;
      // Whether since compares created_at or the last activity is not shown: owed only if created after it.
      if (sinceMs !== undefined && !(Date.parse(String(c.created_at)) > sinceMs + 1)) continue;
      if (listed.length >= limit && !(updated > oldest)) continue;
      // The channel_id alone: judged above. Combined with `channel` or `since`, the filters narrow together.
      if (source.channelId && source.owned) continue;
      expectRule(
        sinceMs !== undefined
          ? listRules.since
          : channel !== undefined
            ? listRules.channel
            : listRules.channelVisible,
        shown.has(c.id),
        `${c.id} listed (owned by a channel, visible to every reader key; updated_at ${String(c.updated_at)})`,
        `missing from ${listed.length} listed (limit ${limit})`,
      );
    }
  }
  for (const c of state.conversations) {
    if (!c.live || c.agent !== agent || visibility(actor, c) === "none" || c.updatedAt === undefined)
      continue;
    // Under a channel_id, notebook_path or automation filter, none of the model's is owed.
    if (source.channelId || source.notebookPath || source.automation) continue;
    // Under a channel filter, only conversations the model saw in that channel are owed.
    if (channel !== undefined && c.channel !== channel) continue;
    // Under since, only those created after it (by a margin a clock's rounding cannot cross) are owed.
    if (sinceMs !== undefined && !(c.createdAt !== undefined && Date.parse(c.createdAt) > sinceMs + 1))
      continue;
    // Strictly newer than the page's oldest: a tie at the cut may fall either side.
    if (listed.length >= limit && !(Date.parse(c.updatedAt) > oldest)) continue;
    expectRule(
      sinceMs !== undefined
        ? listRules.since
        : channel !== undefined
          ? listRules.channel
          : listRules.complete,
      shown.has(c.id),
      `${c.id} listed`,
      `missing from ${listed.length} listed (limit ${limit})`,
    );
  }
}
