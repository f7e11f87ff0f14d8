/**
 * Every list query the API can produce is a bounded index walk (issue 14), asserted on SQLite's own query
 * plan rather than on timings: for each combination of filters, the plan of the exact SQL the store runs
 * must search a list index with every filter as an equality (so no row is read only to be dropped) and
 * must neither scan the conversations table nor sort into a temporary B-tree (a sort reads every match
 * before returning the first). The same combinations are checked for results against a plain filter and
 * sort of every stored record, and a database written by schema 1 must upgrade in place.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync, type SQLInputValue } from "node:sqlite";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { listConversationsQuery } from "./list-query.ts";
import { openSqliteStore } from "./sqlite/index.ts";
import { migrate, SCHEMA_VERSION } from "./sqlite/migrations.ts";
import { combinations, expected, filterOf, MEMBERS, mixedRecords, OPTIONAL } from "./testing.ts";
import type { ListFilter, Store } from "./types.ts";

let dir: string;
let file: string;
let store: Store;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "store-plan-"));
  file = join(dir, "agent-api.sqlite");
  store = openSqliteStore(file);
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Two visibility arms for the filtered channel, or for each of the four channels. */
function armsOf(parts: Array<(typeof OPTIONAL)[number]>): number {
  return parts.some((p) => p.key === "channel") ? 2 : 8;
}

function describeParts(parts: Array<(typeof OPTIONAL)[number]>): string {
  return parts.length === 0 ? "no filter" : parts.map((p) => p.key).join(" + ");
}

/**
 * What is wrong with a plan for a query constraining `columns` (besides workspace, agent and visibility):
 * a scan of the conversations table (or a full walk of one of its indexes), a temporary sort, or a search
 * of conversations that leaves one of the constrained columns to be checked row by row.
 */
function planProblems(
  db: DatabaseSync,
  sql: string,
  params: SQLInputValue[],
  columns: string[],
  arms: number,
): string[] {
  const details = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map(
    (row) => row.detail,
  );
  const problems: string[] = [];
  let searches = 0;
  for (const detail of details) {
    if (/\bTEMP B-TREE\b/.test(detail)) problems.push(`sorts: ${detail}`);
    if (/^SCAN conversations\b/.test(detail)) problems.push(`scans: ${detail}`);
    const search = /^SEARCH conversations USING (?:COVERING )?INDEX (\S+) \((.*)\)$/.exec(detail);
    if (!search) continue;
    searches++;
    const used = search[2].split(" AND ");
    const wanted = ["workspace_id=?", "agent=?", "channel=?", "audience=?", ...columns.map((c) => `${c}=?`)];
    for (const term of wanted) {
      const [column] = term.split("=");
      const hit = used.some((u) => u === term || (column === "updated_at" && u.startsWith("updated_at>")));
      if (!hit) problems.push(`${search[1]} does not seek on ${column}: ${detail}`);
    }
  }
  if (searches !== arms) problems.push(`${searches} index searches of conversations for ${arms} arms`);
  return problems;
}

/** The list query of schema 1 (before issue 14), kept to show the plan check rejects it. */
function schemaOneQuery(filter: ListFilter): { sql: string; params: SQLInputValue[] } {
  const where = [
    "workspace_id = ?",
    "agent = ?",
    "hidden = 0",
    "(owner_member_id = ? OR shared = 1 OR owner_member_id IS NULL)",
  ];
  const params: SQLInputValue[] = [filter.workspaceId, filter.agent, filter.viewerMemberId];
  if (filter.channel !== undefined) {
    where.push("channel = ?");
    params.push(filter.channel);
  }
  return {
    sql: `SELECT * FROM conversations WHERE ${where.join(" AND ")} ORDER BY updated_at DESC, created_at DESC, id DESC LIMIT ?`,
    params: [...params, filter.limit],
  };
}

describe("list query plans", () => {
  it("every combination of filters seeks a list index on every filter in each arm, with no scan and no sort", async () => {
    for (const record of mixedRecords(400)) await store.insertConversation(record);
    const db = new DatabaseSync(file, { readOnly: true });
    try {
      const failures: string[] = [];
      for (const parts of combinations()) {
        for (const limit of [1, 200]) {
          const { sql, params } = listConversationsQuery(filterOf(parts, "alice", limit));
          const columns = parts.map((p) => p.column);
          for (const problem of planProblems(db, sql, params, columns, armsOf(parts)))
            failures.push(`${describeParts(parts)}, limit ${limit}: ${problem}`);
        }
      }
      expect(failures).toEqual([]);
    } finally {
      db.close();
    }
  });

  it("every combination reads no more than `limit` rows plus a look-ahead per arm", async () => {
    const records = mixedRecords(3000);
    for (const record of records) await store.insertConversation(record);
    const db = new DatabaseSync(file, { readOnly: true });
    let visited = 0;
    db.function("visited", () => {
      visited++;
      return 1;
    });
    try {
      const failures: string[] = [];
      for (const parts of combinations()) {
        const filter = filterOf(parts, "alice", 5);
        const { sql, params } = listConversationsQuery(filter);
        // A term no index can serve runs once per row each walk reaches, which is what is counted.
        const counted = sql
          .replaceAll("audience = ?", "audience = ? AND visited()")
          .replaceAll("audience IS NULL", "audience IS NULL AND visited()");
        expect(counted).not.toBe(sql);
        visited = 0;
        const rows = db.prepare(counted).all(...params).length;
        const matching = expected(records, { ...filter, limit: records.length }).length;
        if (rows !== Math.min(5, matching) || visited > rows + armsOf(parts))
          failures.push(`${describeParts(parts)}: ${rows} rows of ${matching} matching, ${visited} read`);
      }
      expect(failures).toEqual([]);
    } finally {
      db.close();
    }
  });

  it("the plan check rejects schema 1's list query, which has neither a scan nor a sort", async () => {
    await store.close();
    rmSync(file, { force: true });
    const db = new DatabaseSync(file);
    try {
      migrate(db, 1);
      // Schema 1 walks its activity index in order, so a check for SCAN or TEMP B-TREE alone passes it;
      // but it tests channel and visibility row by row, and `channel=SLACK` on an agent with no Slack
      // conversations reads every conversation of the agent (the 47 ms of issue 14).
      const channel = schemaOneQuery(filterOf([OPTIONAL[0]], "alice", 50));
      expect(planProblems(db, channel.sql, channel.params, [], 1)).toEqual([
        expect.stringContaining("does not seek on channel"),
        expect.stringContaining("does not seek on audience"),
      ]);
      const unfiltered = schemaOneQuery(filterOf([], "alice", 50));
      expect(planProblems(db, unfiltered.sql, unfiltered.params, [], 1)).toEqual([
        expect.stringContaining("does not seek on channel"),
        expect.stringContaining("does not seek on audience"),
      ]);
    } finally {
      db.close();
    }
    store = openSqliteStore(file);
  });

  it("every combination returns what the API's rules select, newest activity first, for each viewer", async () => {
    const records = mixedRecords(400);
    for (const record of records) await store.insertConversation(record);
    // Sharing and unsharing after creation moves a conversation between the two visibility arms.
    await store.updateConversation("c0014", { shared: false });
    await store.updateConversation("c0004", { shared: true });
    for (const record of records) {
      if (record.id === "c0014") record.shared = false;
      if (record.id === "c0004") record.shared = true;
    }
    for (const parts of combinations()) {
      for (const viewer of [...MEMBERS, "nobody"]) {
        for (const limit of [1, 7, 200]) {
          const filter = filterOf(parts, viewer, limit);
          const got = (await store.listConversations(filter)).map((c) => c.id);
          expect(got, `${describeParts(parts)} as ${viewer}, limit ${limit}`).toEqual(
            expected(records, filter),
          );
        }
      }
    }
  });
});

describe("upgrading a schema 1 database", () => {
  it("adds the list indexes on open, drops the old ones, and keeps every row", async () => {
    await store.close();
    rmSync(file, { force: true });
    const records = mixedRecords(120);
    const old = new DatabaseSync(file);
    migrate(old, 1);
    const insert = old.prepare(
      `INSERT INTO conversations (id, workspace_id, agent, owner_member_id, channel, channel_id, notebook_path,
         automation, title, shared, hidden, created_at, updated_at, turn_count)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    for (const r of records) {
      insert.run(
        r.id,
        r.workspaceId,
        r.agent,
        r.ownerMemberId,
        r.channel,
        r.channelId,
        r.notebookPath,
        r.automation,
        r.title,
        r.shared ? 1 : 0,
        r.hidden ? 1 : 0,
        r.createdAt,
        r.updatedAt,
        r.turnCount,
      );
    }
    old.exec(
      `INSERT INTO messages (conversation_id, seq, turn_index, role, text, created_at)
       VALUES ('c0001', 0, 0, 'user', 'kept', '2026-01-01T00:00:00.000Z')`,
    );
    await old.close();

    store = openSqliteStore(file);
    // Rows written before generations existed are each given one of their own.
    const generations = new Set<number>();
    for (const r of records) {
      const got = await store.getConversation(r.id);
      expect(got).toEqual({ ...r, generation: got?.generation });
      generations.add(got?.generation ?? 0);
    }
    expect(generations.size).toBe(records.length);
    expect(generations.has(0)).toBe(false);
    expect((await store.listMessages("c0001")).map((m) => m.text)).toEqual(["kept"]);
    const filter = filterOf([OPTIONAL[0]], "bob", 200);
    expect((await store.listConversations(filter)).map((c) => c.id)).toEqual(expected(records, filter));

    const db = new DatabaseSync(file, { readOnly: true });
    try {
      expect(db.prepare("PRAGMA user_version").get()).toEqual({ user_version: SCHEMA_VERSION });
      const indexes = (
        db
          .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'conversations'")
          .all() as Array<{ name: string }>
      ).map((row) => row.name);
      expect(indexes.filter((name) => name.startsWith("conversations_list"))).toHaveLength(8);
      expect(indexes).not.toContain("conversations_by_agent_activity");
      const { sql, params } = listConversationsQuery(filter);
      expect(planProblems(db, sql, params, [], 2)).toEqual([]);
    } finally {
      db.close();
    }
  });
});
