/**
 * The list query of both engines: one arm per visibility rule group and channel, merged in activity order
 * and cut at the LIMIT, so about `limit` index entries are read whatever the store's size.
 */
import { conversationColumns } from "./conversation-row.ts";
import { CHANNELS, type ListFilter } from "./types.ts";

/** What differs between the engines' SQL for the same query. */
export interface ListQueryDialect {
  /** The placeholder of the n-th parameter (1-based): `?` for SQLite, `$n` for PostgreSQL. */
  parameter(n: number): string;
  /** The literal the `hidden` column holds for a listed conversation (it must match the indexes' predicate). */
  notHidden: string;
  /**
   * Whether each arm carries its own ORDER BY ... LIMIT: PostgreSQL then plans each arm as a walk of at most
   * `limit` entries of its index and merges their heads in order (Merge Append). SQLite merges the arms itself,
   * and a limit per arm would make it sort each arm again.
   */
  limitPerArm: boolean;
  /** The test of the `audience` column for conversations every member sees (the migrations say why two forms). */
  everyone: string;
}

export const SQLITE_DIALECT: ListQueryDialect = {
  parameter: () => "?",
  notHidden: "0",
  limitPerArm: false,
  everyone: "audience IS NULL",
};
export const POSTGRES_DIALECT: ListQueryDialect = {
  parameter: (n) => `$${n}`,
  notHidden: "false",
  limitPerArm: true,
  everyone: "audience = chr(1)",
};

const ACTIVITY_ORDER = "ORDER BY updated_at DESC, created_at DESC, id DESC";
const listedColumns = Object.values(conversationColumns).join(", ");

/** `since` may be any ISO 8601 form (offsets, no ms); stored times are `toISOString()`, so normalise to compare lexically. */
function normaliseSince(since: string): string {
  const ms = Date.parse(since);
  return Number.isNaN(ms) ? since : new Date(ms).toISOString();
}

/**
 * The list query for a filter, exported so the query-plan tests check exactly what the stores run.
 *
 * One arm per visibility rule group and channel (the migrations' list indexes): the caller's private
 * conversations (`audience = caller`) and the shared or channel-owned ones (ListQueryDialect.everyone), for the
 * filtered channel or else for each of the four. Each arm is an equality walk of the list index for this
 * set of filters, already in activity order; a compound ORDER BY makes SQLite merge the walks row by row
 * (MERGE (UNION ALL)) and stop at the LIMIT; PostgreSQL merges the arms' heads the same way (Merge Append,
 * with ListQueryDialect.limitPerArm). Giving each arm its own ORDER BY ... LIMIT makes SQLite sort each arm's rows
 * again before merging (USE TEMP B-TREE FOR ORDER BY).
 */
export function listConversationsQuery(
  filter: ListFilter,
  dialect: ListQueryDialect = SQLITE_DIALECT,
): { sql: string; params: Array<string | number> } {
  const params: Array<string | number> = [];
  const bind = (value: string | number) => {
    params.push(value);
    return dialect.parameter(params.length);
  };
  const optional: Array<[string, string]> = [];
  const equalities = [
    ["channel_id", filter.channelId],
    ["notebook_path", filter.notebookPath],
    ["automation", filter.automation],
  ] as const;
  for (const [column, value] of equalities) if (value !== undefined) optional.push([`${column} =`, value]);
  if (filter.since !== undefined) optional.push(["updated_at >=", normaliseSince(filter.since)]);
  const arms: string[] = [];
  for (const channel of filter.channel === undefined ? CHANNELS : [filter.channel]) {
    for (const viewer of [filter.viewerMemberId, null]) {
      const where = [
        `workspace_id = ${bind(filter.workspaceId)}`,
        `agent = ${bind(filter.agent)}`,
        `hidden = ${dialect.notHidden}`,
        `channel = ${bind(channel)}`,
        ...optional.map(([test, value]) => `${test} ${bind(value)}`),
        viewer === null ? dialect.everyone : `audience = ${bind(viewer)}`,
      ];
      arms.push(`SELECT ${listedColumns} FROM conversations WHERE ${where.join(" AND ")}`);
    }
  }
  const limit = bind(Math.max(0, Math.trunc(filter.limit)));
  if (!dialect.limitPerArm)
    return { sql: `${arms.join(" UNION ALL ")} ${ACTIVITY_ORDER} LIMIT ${limit}`, params };
  const limited = arms.map((arm) => `(${arm} ${ACTIVITY_ORDER} LIMIT ${limit})`).join(" UNION ALL ");
  return {
    sql: `SELECT ${listedColumns} FROM (${limited}) AS listed ${ACTIVITY_ORDER} LIMIT ${limit}`,
    params,
  };
}
