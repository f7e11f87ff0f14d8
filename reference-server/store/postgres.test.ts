/**
 * What is PostgreSQL's own in the store (the behaviour shared with SQLite is store.test.ts): every list query
 * the API can produce is a bounded walk of the right list index, read from PostgreSQL's own plans
 * (EXPLAIN ANALYZE: no sort, no table scan, no more rows read than the limit and a look-ahead per arm), with
 * the results the API's rules select; migrations that several instances may run at once; a close that leaves
 * no connection behind. Runs on the test run's cluster (scripts/postgres-cluster.ts); skipped without one.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listConversationsQuery, POSTGRES_DIALECT } from "./list-query.ts";
import { openPostgresStore } from "./postgres/index.ts";
import { POSTGRES_SCHEMA_VERSION } from "./postgres/migrations.ts";
import {
  combinations,
  conversationRecord,
  createTestDatabase,
  expected,
  filterOf,
  MEMBERS,
  mixedRecords,
  OPTIONAL,
  type OpenedStore,
  POSTGRES_ENGINE,
  postgresSkipReason,
  textTurn,
} from "./testing.ts";
import { type ConversationRecord, type ListFilter, TurnLeaseLostError } from "./types.ts";

const skip = postgresSkipReason();
/** A describe's title, with why it is skipped where there is no PostgreSQL. */
const titled = (title: string) => (skip === undefined ? title : `${title} (skipped: ${skip})`);

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Relation Name"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** The list index that holds exactly the filter's optional columns (postgres/migrations.ts). */
function indexFor(filter: ListFilter): string {
  const columns = [
    filter.channelId === undefined ? [] : ["channel_id"],
    filter.notebookPath === undefined ? [] : ["notebook_path"],
    filter.automation === undefined ? [] : ["automation"],
  ].flat();
  return ["conversations_list", ...columns].join("_");
}

describe.skipIf(skip !== undefined)(titled("PostgreSQL store"), () => {
  let opened: OpenedStore;
  let admin: pg.Client;
  let records: ConversationRecord[];

  beforeAll(async () => {
    opened = await POSTGRES_ENGINE.open();
    records = mixedRecords(4000);
    for (const record of records) await opened.store.insertConversation(record);
    // Sharing and unsharing after creation moves a conversation between the two visibility arms.
    await opened.store.updateConversation("c0014", { shared: false });
    await opened.store.updateConversation("c0004", { shared: true });
    for (const record of records) {
      if (record.id === "c0014") record.shared = false;
      if (record.id === "c0004") record.shared = true;
    }
    admin = new pg.Client({ connectionString: opened.location });
    await admin.connect();
    await admin.query("ANALYZE conversations");
  }, 120_000);

  afterAll(async () => {
    await admin?.end();
    await opened?.destroy();
  });

  it("every list query walks the list index of its filters in order: no sort, no table scan, about `limit` rows read", async () => {
    for (const parts of combinations()) {
      for (const limit of [1, 7]) {
        const filter = filterOf(parts, "alice", limit);
        const { sql, params } = listConversationsQuery(filter, POSTGRES_DIALECT);
        const { rows } = await admin.query<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`,
          params,
        );
        const plan = nodes(rows[0]["QUERY PLAN"][0].Plan);
        const label = `${parts.map((p) => p.key).join("+") || "no filter"}, limit ${limit}`;
        const types = plan.map((node) => node["Node Type"]);
        expect(types, label).not.toContain("Sort");
        expect(types, label).not.toContain("Seq Scan");
        expect(types, label).not.toContain("Bitmap Heap Scan");
        const scans = plan.filter((node) => node["Relation Name"] === "conversations");
        const arms = filter.channel === undefined ? 8 : 2;
        expect(scans, label).toHaveLength(arms);
        for (const scan of scans) {
          expect(scan["Node Type"], label).toBe("Index Scan");
          expect(scan["Index Name"], label).toBe(indexFor(filter));
        }
        // Each arm reads what the merge takes from it plus one row of look-ahead.
        const read = scans.reduce(
          (sum, scan) => sum + (scan["Actual Rows"] ?? 0) * (scan["Actual Loops"] ?? 1),
          0,
        );
        expect(read, label).toBeLessThanOrEqual(limit + arms);
      }
    }
  });

  it("every combination returns what the API's rules select, newest activity first, for each viewer", async () => {
    for (const parts of combinations()) {
      for (const viewer of [...MEMBERS, "nobody"]) {
        for (const limit of [1, 7, 200]) {
          const filter = filterOf(parts, viewer, limit);
          const got = (await opened.store.listConversations(filter)).map((c) => c.id);
          expect(got, `${parts.map((p) => p.key).join("+")} as ${viewer}, limit ${limit}`).toEqual(
            expected(records, filter),
          );
        }
      }
    }
  });

  it("the filters' example values match rows, so the plans above walk real data", () => {
    for (const part of OPTIONAL) {
      const filter = filterOf([part], "alice", 5);
      expect(expected(records, filter).length, part.key).toBeGreaterThan(0);
    }
  });
});

describe.skipIf(skip !== undefined)(titled("PostgreSQL migrations and connections"), () => {
  it("instances starting at once on an empty database migrate it once, and all of them open", async () => {
    const database = await createTestDatabase();
    try {
      const stores = await Promise.all(Array.from({ length: 4 }, () => openPostgresStore(database.url)));
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        const { rows } = await client.query("SELECT version FROM agent_api_schema");
        expect(rows).toEqual([{ version: POSTGRES_SCHEMA_VERSION }]);
      } finally {
        await client.end();
      }
      await Promise.all(stores.map((store) => store.close()));
      // A restart finds the schema current and opens without migrating again.
      const again = await openPostgresStore(database.url);
      await again.close();
    } finally {
      await database.drop();
    }
  });

  it("refuses a database a newer version wrote instead of guessing", async () => {
    const database = await createTestDatabase();
    try {
      const store = await openPostgresStore(database.url);
      await store.close();
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      await client.query("UPDATE agent_api_schema SET version = version + 1");
      await client.end();
      await expect(openPostgresStore(database.url)).rejects.toThrow(/newer version/);
    } finally {
      await database.drop();
    }
  });

  it("close() returns once every connection of the store is closed", async () => {
    const database = await createTestDatabase();
    const name = `agent-api-close-${process.pid}`;
    try {
      const store = await openPostgresStore(database.url, { applicationName: name });
      // Several at once, so the pool holds more than one connection.
      await Promise.all(Array.from({ length: 5 }, (_, i) => store.getConversation(`c${i}`)));
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      const count = async () =>
        (
          await client.query<{ n: number }>(
            "SELECT count(*)::integer AS n FROM pg_stat_activity WHERE application_name = $1",
            [name],
          )
        ).rows[0].n;
      try {
        expect(await count()).toBeGreaterThan(1);
        await store.close();
        // The server notices a closed socket at once, but its activity view may lag a moment.
        const until = Date.now() + 5_000;
        while ((await count()) > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
        expect(await count()).toBe(0);
      } finally {
        await client.end();
      }
    } finally {
      await database.drop();
    }
  });
});

describe.skipIf(skip !== undefined)(
  titled("PostgreSQL turn leases (two stores on one database: two instances)"),
  () => {
    const lease = { ms: 300 };

    it("one holder at a time; a lease not renewed frees itself, and the next holder gets a larger token", async () => {
      const database = await createTestDatabase();
      const [a, b] = await Promise.all([openPostgresStore(database.url), openPostgresStore(database.url)]);
      try {
        const first = await a.turnLeases.tryAcquire("c1", "a", lease.ms);
        expect(first).toBeTypeOf("number");
        expect(await b.turnLeases.tryAcquire("c1", "b", lease.ms)).toBeUndefined();
        // Another conversation is not held.
        expect(await b.turnLeases.tryAcquire("c2", "b", lease.ms)).toBeTypeOf("number");
        // A renewal keeps it past its first term.
        await new Promise((resolve) => setTimeout(resolve, lease.ms / 2));
        expect(await a.turnLeases.renew("c1", first as number, lease.ms)).toBe(true);
        await new Promise((resolve) => setTimeout(resolve, lease.ms / 2 + 50));
        expect(await b.turnLeases.tryAcquire("c1", "b", lease.ms)).toBeUndefined();
        // Its holder stops renewing (it died): free once the lease ran out.
        await new Promise((resolve) => setTimeout(resolve, lease.ms + 50));
        const second = await b.turnLeases.tryAcquire("c1", "b", lease.ms);
        expect(second).toBeGreaterThan(first as number);
        // The first holder learns it lost the lease, and its release does not free the new holder's.
        expect(await a.turnLeases.renew("c1", first as number, lease.ms)).toBe(false);
        await a.turnLeases.release("c1", first as number);
        expect(await a.turnLeases.tryAcquire("c1", "a", 60_000)).toBeUndefined();
        await b.turnLeases.release("c1", second as number);
        expect(await a.turnLeases.tryAcquire("c1", "a", 60_000)).toBeGreaterThan(second as number);
      } finally {
        await Promise.all([a.close(), b.close()]);
        await database.drop();
      }
    });

    it("an interrupt reaches the other instances, not the one that published it", async () => {
      const database = await createTestDatabase();
      const [a, b] = await Promise.all([openPostgresStore(database.url), openPostgresStore(database.url)]);
      const heard: Record<"a" | "b", string[]> = { a: [], b: [] };
      const unsubscribe = await Promise.all(
        (["a", "b"] as const).map((name) =>
          (name === "a" ? a : b).turnInterrupts?.subscribe((id, reason) =>
            heard[name].push(`${id} ${reason}`),
          ),
        ),
      );
      const until = async (done: () => boolean) => {
        const deadline = Date.now() + 10_000;
        while (!done() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      };
      try {
        await a.turnInterrupts.publish("c1", "AGENT_API_CONVERSATION_DELETED");
        await until(() => heard.b.length === 1);
        // b's notification is committed after a's: once a hears it, a's own would have come before.
        await b.turnInterrupts.publish("c2", "AGENT_API_SERVER_STOPPING");
        await until(() => heard.a.length === 1);
        expect(heard).toEqual({
          a: ["c2 AGENT_API_SERVER_STOPPING"],
          b: ["c1 AGENT_API_CONVERSATION_DELETED"],
        });
      } finally {
        for (const off of unsubscribe) await off?.();
        await Promise.all([a.close(), b.close()]);
        await database.drop();
      }
    });

    it("a commit fenced by a lost lease is refused and writes nothing; the holder's commit goes through", async () => {
      const database = await createTestDatabase();
      const [a, b] = await Promise.all([openPostgresStore(database.url), openPostgresStore(database.url)]);
      try {
        await a.insertConversation(conversationRecord());
        const stale = (await a.turnLeases.tryAcquire("c1", "a", 50)) as number;
        await new Promise((resolve) => setTimeout(resolve, 100));
        const current = (await b.turnLeases.tryAcquire("c1", "b", 60_000)) as number;
        // The paused holder wakes up and tries to write its turn.
        await expect(a.commitTurn({ ...textTurn("c1", 0), fence: stale })).rejects.toThrow(
          TurnLeaseLostError,
        );
        expect(await b.listMessages("c1")).toEqual([]);
        expect((await b.getConversation("c1"))?.turnCount).toBe(0);
        await b.commitTurn({ ...textTurn("c1", 0), fence: current });
        expect(await a.listMessages("c1")).toHaveLength(2);
      } finally {
        await Promise.all([a.close(), b.close()]);
        await database.drop();
      }
    });
  },
);

describe.skipIf(skip !== undefined)(
  titled("PostgreSQL scheduled recordings (two stores on one database)"),
  () => {
    it("a recording is recorded once it is due, by any instance, exactly once; a newer one replaces it; cancel forgets it", async () => {
      const database = await createTestDatabase();
      const [a, b] = await Promise.all([openPostgresStore(database.url), openPostgresStore(database.url)]);
      try {
        for (const id of ["c1", "c2"]) await a.insertConversation(conversationRecord({ id }));
        const session = (id: string, conversationId: string) => ({
          id,
          conversationId,
          context: { messages: [{ role: "user", content: "hi" }], tokens: 1 },
          createdAt: "t",
          updatedAt: "t",
          turnIndex: 0,
        });
        await a.scheduledRecordings.schedule(session("s-old", "c1"), 300);
        await a.scheduledRecordings.schedule(session("s1", "c1"), 300);
        await a.scheduledRecordings.schedule(session("s2", "c2"), 300);
        await a.scheduledRecordings.cancel("c2");
        expect((await b.scheduledRecordings.get("c1"))?.id).toBe("s1");
        // Not due yet: nothing recorded.
        expect(await b.scheduledRecordings.recordDue()).toBe(0);
        expect((await b.getConversation("c1"))?.agentSessionId).toBeNull();
        await new Promise((resolve) => setTimeout(resolve, 350));
        // Both instances try at once: one records it.
        const counts = await Promise.all([
          a.scheduledRecordings.recordDue(),
          b.scheduledRecordings.recordDue(),
        ]);
        expect(counts.reduce((sum = 0, n = 0) => sum + n, 0)).toBe(1);
        expect((await a.getConversation("c1"))?.agentSessionId).toBe("s1");
        expect((await a.getSession("s1"))?.context).toEqual({
          messages: [{ role: "user", content: "hi" }],
          tokens: 1,
        });
        expect(await a.hasSession("s-old")).toBe(false);
        expect((await a.getConversation("c2"))?.agentSessionId).toBeNull();
        expect(await a.scheduledRecordings.get("c1")).toBeUndefined();
        // The conversation deleted while its recording waited: nothing lands.
        await a.scheduledRecordings.schedule(session("s3", "c2"), 0);
        await a.deleteConversation("c2");
        expect(await b.scheduledRecordings.recordDue()).toBe(1);
        expect(await a.hasSession("s3")).toBe(false);
      } finally {
        await Promise.all([a.close(), b.close()]);
        await database.drop();
      }
    });
  },
);
