/**
 * Lists (Endpoints/List conversations; Limits): what a caller sees, newest activity first, bounded by
 * `limit`. Other clients of the same key may add conversations at any time, so completeness is judged only
 * down to the oldest conversation the page shows: a conversation of the run pushed out by newer ones is no
 * fault (paging beyond `limit` is not shown).
 */
import { expectRule } from "./mismatch.ts";
import { defineRules } from "./rules.ts";
import type { Actor, AgentKind, ModelState } from "./state.ts";
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
    text: "The `channel` filter lists only conversations of that channel",
  },
});

export interface Listed {
  id: string;
  updated_at?: unknown;
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
  const shown = new Set(listed.map((c) => c.id));
  for (const c of state.conversations) {
    if (!shown.has(c.id)) continue;
    const live = state.live(c.id);
    const ok = live !== undefined && live.agent === agent && visibility(actor, live) !== "none";
    expectRule(listRules.visibleOnly, ok, `${c.id} not listed for ${actor} on ${agent}`, `${c.id} listed`);
  }
  if (channel !== undefined) return;
  const oldest = listed.length < limit ? Number.NEGATIVE_INFINITY : Math.min(...times);
  for (const c of state.conversations) {
    if (!c.live || c.agent !== agent || visibility(actor, c) === "none" || c.updatedAt === undefined)
      continue;
    // Strictly newer than the page's oldest: a tie at the cut may fall either side.
    if (listed.length >= limit && !(Date.parse(c.updatedAt) > oldest)) continue;
    expectRule(
      listRules.complete,
      shown.has(c.id),
      `${c.id} listed`,
      `missing from ${listed.length} listed (limit ${limit})`,
    );
  }
}
