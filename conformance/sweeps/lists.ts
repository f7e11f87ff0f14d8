/**
 * Every list page the named checks read (Endpoints/List conversations; Limits), under whichever key and
 * filters it was asked with: at most `limit` conversations (50 without one), newest activity first, only the
 * asked `channel`, nothing older than `since`; never one of the run's conversations of another agent, never
 * one made through the API under a `channel_id` or `notebook_path` filter, never another user's private one.
 */
import type { ConversationRead, RunState } from "../context.ts";
import { listRules } from "../model/lists.ts";
import { expectRule } from "../model/mismatch.ts";
import { Findings, type LogFacts, logFacts, type SweepFinding, sharedDuring } from "./finding.ts";
import { distinctKeys } from "./keys.ts";

type Page = Extract<ConversationRead, { kind: "list" }>;

const CHANNELS = new Set(["INTERACTIVE", "NOTEBOOK", "SLACK", "EMAIL"]);
const DEFAULT_LIMIT = 50;

/** The agent a list URL names. */
function agentOf(url: URL): string {
  return decodeURIComponent(url.pathname.split("/api/agents/")[1]?.split("/")[0] ?? "");
}

export function judgeListsRead(
  log: ConversationRead[],
  run: RunState,
  { firstDelete, toggles, firstCreatedAt }: LogFacts = logFacts(log),
): SweepFinding[] {
  // Deleted: anything may follow under the id, so the run no longer knows who may list it.
  const touched = (id: string) => firstDelete.has(id);
  // The routed send picks its agent by `model`: which agent such a conversation is on, the run records not.
  const routed = new Set(run.turnsRead.filter((t) => t.routed).map((t) => t.conversationId));
  const keys = distinctKeys(run);
  const found = new Findings();
  for (const page of log.filter((e): e is Page => e.kind === "list")) {
    const url = new URL(page.url);
    const q = url.searchParams;
    const rawLimit = q.get("limit");
    const limit = rawLimit === null ? DEFAULT_LIMIT : /^\d+$/.test(rawLimit) ? Number(rawLimit) : undefined;
    const channel = q.get("channel") ?? undefined;
    const since = q.get("since") === null ? Number.NaN : Date.parse(q.get("since") as string);
    const sourceFilter = ["channel_id", "notebook_path"].find((f) => q.has(f));
    const agent = agentOf(url);
    const listed = page.conversations;
    try {
      if (limit !== undefined && limit >= 1 && limit <= 200)
        expectRule(listRules.limit, listed.length <= limit, `at most ${limit}`, listed.length);
      const times = listed.map((c) => Date.parse(String(c.updated_at)));
      for (let i = 1; i < times.length; i++)
        expectRule(
          listRules.order,
          !(times[i] > times[i - 1]),
          "updated_at never increasing down the list",
          listed.map((c) => c.updated_at),
        );
      for (const c of listed) {
        if (channel !== undefined && CHANNELS.has(channel))
          expectRule(
            listRules.channel,
            c.channel === channel,
            channel,
            `${String(c.id)}: ${String(c.channel)}`,
          );
        if (!Number.isNaN(since))
          expectRule(
            listRules.since,
            Date.parse(String(c.updated_at)) >= since,
            `updated_at at or after since=${q.get("since")}`,
            `${String(c.id)} with updated_at ${String(c.updated_at)}`,
          );
        const id = typeof c.id === "string" ? c.id : undefined;
        const first = id === undefined ? undefined : firstCreatedAt.get(id);
        const remade = first !== undefined && first !== c.created_at;
        const made = id === undefined || touched(id) || remade ? undefined : run.created.get(id);
        if (made === undefined || id === undefined) continue;
        if (!routed.has(id))
          expectRule(
            listRules.visibleOnly,
            made.agent === agent,
            `${id} (of agent ${made.agent}) not in agent ${agent}'s list`,
            "listed",
          );
        if (
          keys &&
          page.key !== undefined &&
          keys.has(page.key) &&
          keys.has(made.key) &&
          page.key !== made.key &&
          sharedDuring(toggles.get(id), page.started, page.ended)?.shared === false
        )
          expectRule(
            listRules.visibleOnly,
            false,
            `${id} (private to the key that made it: no toggle it accepted shared it) not in another user's list`,
            "listed",
          );
        if (sourceFilter !== undefined)
          expectRule(
            listRules.sourceFilters,
            false,
            `${id} left out of the ${sourceFilter} list (it was made through the API, without one)`,
            "listed",
          );
      }
      if (limit !== undefined && limit >= 1 && limit <= 200)
        judgeComplete(page, { limit, channel, since, agent, routed }, log, run, firstDelete, firstCreatedAt);
    } catch (error) {
      found.add(
        error,
        `GET ${url.pathname}${url.search} by ${page.madeBy}`,
        JSON.stringify(listed.slice(0, 20), null, 2),
      );
    }
  }
  return found.list();
}

type Read = Extract<ConversationRead, { kind: "read" }>;
const JUDGED_PARAMS = new Set(["limit", "channel", "since"]);
const ZONED_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * The page holds every conversation of the run its key owns on its agent, read before the page began and
 * matching its filters, that is newer than the oldest the page shows (every one, when the page has room):
 * others' activity can push a conversation only below the page, never out from above its last entry, and a
 * conversation's `updated_at` only grows after the read the run took of it. Pages with filters the run
 * cannot evaluate (`channel_id`, `notebook_path`, `automation`, anything unknown) are not judged.
 */
function judgeComplete(
  page: Page,
  filters: { limit: number; channel?: string; since: number; agent: string; routed: Set<string | undefined> },
  log: ConversationRead[],
  run: RunState,
  firstDelete: Map<string, number>,
  firstCreatedAt: Map<string, unknown>,
): void {
  const url = new URL(page.url);
  if ([...url.searchParams.keys()].some((k) => !JUDGED_PARAMS.has(k)) || page.key === undefined) return;
  if (filters.channel !== undefined && !CHANNELS.has(filters.channel)) return;
  // Only a since whose instant every reader agrees on (a zone given): how a server reads other forms may differ.
  const since = url.searchParams.get("since");
  if (since !== null && !ZONED_INSTANT.test(since)) return;
  const listed = new Set(page.conversations.map((c) => c.id));
  const times = page.conversations.map((c) => Date.parse(String(c.updated_at)));
  if (times.some((t) => Number.isNaN(t))) return;
  const full = page.conversations.length >= filters.limit;
  const oldest = times.length === 0 ? Number.NEGATIVE_INFINITY : Math.min(...times);
  const latest = new Map<string, Read>();
  for (const e of log) {
    if (e.kind !== "read" || e.ended >= page.started || typeof e.conversation.id !== "string") continue;
    const before = latest.get(e.conversation.id);
    if (before === undefined || e.ended > before.ended) latest.set(e.conversation.id, e);
  }
  for (const [id, read] of latest) {
    const made = run.created.get(id);
    const c = read.conversation;
    if (made === undefined || made.key !== page.key || made.agent !== filters.agent) continue;
    if (filters.routed.has(id) || c.created_at !== firstCreatedAt.get(id)) continue;
    if ((firstDelete.get(id) ?? Number.POSITIVE_INFINITY) < page.ended) continue;
    if (filters.channel !== undefined && c.channel !== filters.channel) continue;
    const updated = Date.parse(String(c.updated_at));
    if (Number.isNaN(updated) || (!Number.isNaN(filters.since) && !(updated > filters.since))) continue;
    if (full && !(updated > oldest)) continue;
    expectRule(
      listRules.complete,
      listed.has(id),
      full
        ? `${id} listed: its updated_at ${String(c.updated_at)} (${read.request}, read before the list) is newer than the oldest the page shows`
        : `${id} listed: the page has room (${page.conversations.length} of limit ${filters.limit}) and ${read.request} read it before the list`,
      "left out",
    );
  }
}
