/**
 * Leases nothing else can starve: two instances (two PostgreSQL stores on one real database, each with its
 * LeasedLocks) and a read flood that saturates the first instance's pool while it holds a conversation's
 * lock. The flood's reads wait on a table lock another session holds, so every pooled connection is busy for
 * as long as the test wants; the holder's renewals must still go through, so the second instance never gets
 * the lease. And a holder whose lease is taken anyway learns so at once (its release's signal), not at commit.
 * Runs on the test run's cluster (scripts/postgres-cluster.ts); skipped without one.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgresStore } from "../store/postgres/index.ts";
import { createTestDatabase, postgresSkipReason } from "../store/testing.ts";
import type { SharedStore } from "../store/types.ts";
import { LeasedLocks } from "./leased-locks.ts";

const skip = postgresSkipReason();
const titled = (title: string) => (skip === undefined ? title : `${title} (skipped: ${skip})`);
const LEASE_MS = 400;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(skip !== undefined)(titled("turn leases under a read flood (two instances)"), () => {
  let database: { url: string; drop(): Promise<void> };
  let a: SharedStore;
  let b: SharedStore;

  beforeAll(async () => {
    database = await createTestDatabase();
    a = await openPostgresStore(database.url, { maxConnections: 4 });
    b = await openPostgresStore(database.url);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await database?.drop();
  });

  it("a holder whose pool is saturated by reads keeps its lease: the other instance never gets it", async () => {
    const locksA = new LeasedLocks(a.turnLeases, { leaseMs: LEASE_MS });
    const locksB = new LeasedLocks(b.turnLeases, { leaseMs: LEASE_MS });
    const release = await locksA.acquire("busy");
    const blocker = new pg.Client({ connectionString: database.url });
    await blocker.connect();
    let flood: Promise<unknown>[] = [];
    try {
      await blocker.query("BEGIN");
      await blocker.query("LOCK TABLE conversations IN ACCESS EXCLUSIVE MODE");
      // Far more reads than connections: every one of A's pooled connections waits on the lock.
      flood = Array.from({ length: 40 }, (_, i) => a.getConversation(`flood-${i}`).catch(() => undefined));
      for (let elapsed = 0; elapsed < LEASE_MS * 4; elapsed += LEASE_MS / 2) {
        await sleep(LEASE_MS / 2);
        const taken = await locksB.tryAcquire("busy");
        taken?.();
        expect(taken, `the other instance took the lease after ${elapsed + LEASE_MS / 2} ms`).toBeUndefined();
      }
      expect(release.lost?.aborted).toBe(false);
    } finally {
      await blocker.query("ROLLBACK").catch(() => undefined);
      await blocker.end();
      await Promise.all(flood);
      release();
    }
  });

  it("a holder whose lease another instance took is told at its next renewal", async () => {
    const locksA = new LeasedLocks(a.turnLeases, { leaseMs: LEASE_MS });
    const release = await locksA.acquire("taken");
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      // Another holder's token, as when the lease ran out and another instance took it.
      await admin.query("UPDATE turn_leases SET token = token + 1000000 WHERE conversation_id = 'taken'");
      const lost = release.lost as AbortSignal;
      await new Promise<void>((resolve) => {
        if (lost.aborted) resolve();
        else lost.addEventListener("abort", () => resolve(), { once: true });
      });
      expect(lost.aborted).toBe(true);
    } finally {
      await admin.end();
      release();
    }
  });
});
