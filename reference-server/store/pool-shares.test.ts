/**
 * Each workspace's share of the PostgreSQL pool, on a real database: one workspace's reads wait on a table
 * lock another session holds (as a slow or flooding tenant's would), far more of them than the pool has
 * connections; another workspace's read still gets a connection at once. With one pool for all, the flood
 * took every connection and the other workspace's read waited behind it for as long as the lock was held.
 * Runs on the test run's cluster (scripts/postgres-cluster.ts); skipped without one.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newConversation } from "./new-conversation.ts";
import { asWorkspace, WorkspaceSharedPool } from "./pool-shares.ts";
import { openPostgresStore } from "./postgres/index.ts";
import { createTestDatabase, postgresSkipReason } from "./testing.ts";
import type { Store } from "./types.ts";

const skip = postgresSkipReason();
const titled = (title: string) => (skip === undefined ? title : `${title} (skipped: ${skip})`);

describe.skipIf(skip !== undefined)(titled("the pool's connections per workspace"), () => {
  let database: { url: string; drop(): Promise<void> };
  let store: Store;

  beforeAll(async () => {
    database = await createTestDatabase();
    store = await openPostgresStore(database.url, { maxConnections: 4, connectionsPerWorkspace: 2 });
    for (const [id, workspaceId] of [
      ["noisy-conversation", "noisy"],
      ["quiet-conversation", "quiet"],
    ])
      await store.insertConversation(
        newConversation({
          id,
          workspaceId,
          agent: "agent",
          ownerMemberId: "m",
          automation: null,
          title: id,
          hidden: false,
          createdAt: new Date().toISOString(),
        }),
      );
  });
  afterAll(async () => {
    await store?.close();
    await database?.drop();
  });

  it("one workspace's flood of reads holds at most its share; another workspace's read goes through at once", async () => {
    const blocker = new pg.Client({ connectionString: database.url });
    await blocker.connect();
    let flood: Promise<unknown>[] = [];
    try {
      await blocker.query("BEGIN");
      // The noisy workspace's transcript reads wait on this; the quiet one's conversation read does not.
      await blocker.query("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE");
      flood = Array.from({ length: 40 }, () =>
        asWorkspace("noisy", () => store.listMessages("noisy-conversation")),
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      const started = Date.now();
      const quiet = await Promise.race([
        asWorkspace("quiet", () => store.getConversation("quiet-conversation")),
        new Promise<"still waiting">((resolve) => setTimeout(() => resolve("still waiting"), 5_000)),
      ]);
      expect(quiet, "the quiet workspace's read waited behind the flood").not.toBe("still waiting");
      expect((quiet as { id: string }).id).toBe("quiet-conversation");
      expect(Date.now() - started).toBeLessThan(5_000);
      // Work of no workspace (start-up, sweeps) is not held to a share either.
      expect((await store.getConversation("noisy-conversation"))?.workspaceId).toBe("noisy");
    } finally {
      await blocker.query("ROLLBACK").catch(() => undefined);
      await blocker.end();
    }
    // The flood's reads all finish once the lock goes (its line drains through its own share).
    const pages = await Promise.all(flood);
    expect(pages).toHaveLength(40);
  });

  it("a workspace's slots are given back however its queries end, failures included", async () => {
    const pool = new WorkspaceSharedPool({ connectionString: database.url, max: 3 }, 1);
    try {
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) =>
          asWorkspace("w", () => pool.query(i % 2 === 0 ? "SELECT 1" : "SELECT nonsense_column")),
        ),
      );
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(5);
      const client = await asWorkspace("w", () => pool.connect());
      expect(pool.live().held.get("w")).toBe(1);
      client.release();
      expect(pool.live().held.size).toBe(0);
      expect(pool.live().waiting.size).toBe(0);
    } finally {
      await pool.end();
    }
  });
});
