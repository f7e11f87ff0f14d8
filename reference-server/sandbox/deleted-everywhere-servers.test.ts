/**
 * Nothing of a deleted conversation survives on any instance: two reference servers (the demo) on one
 * PostgreSQL database, each with its own data directory, over real HTTP.
 *
 * - The attack of issue 30: workspace `demo` leaves an uncommitted file in a repository conversation's work tree
 *   on server B; B goes down; the conversation is deleted on A; B starts again and workspace `other` sends the
 *   same conversation id to B. The old copy must be gone at start, the turn must not see the file, and nothing
 *   of it may reach the shared store (A's turn of the new conversation does not see it either).
 * - B's listener is cut (its backend terminated) just before a delete on A: B's copy still goes.
 *
 * Runs on the test run's cluster (scripts/postgres-cluster.ts); skipped without one.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OTHER_ADMIN_KEY } from "../demo/workspace.ts";
import { createTestDatabase, postgresSkipReason } from "../store/testing.ts";
import {
  ADMIN_KEY,
  PHRASES,
  removeDir,
  type SandboxServer,
  sendTurn,
  sleep,
  startSandboxServer,
} from "../test/sandbox-server.ts";
import { conversationDirName } from "./safe-paths.ts";

const skip = postgresSkipReason();
const titled = (title: string) => (skip === undefined ? title : `${title} (skipped: ${skip})`);

/** Waits (polling the file system, bounded) until `path` is gone; whether it went. */
async function goneWithin(path: string, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (existsSync(path) && Date.now() < deadline) await sleep(50);
  return !existsSync(path);
}

describe.skipIf(skip !== undefined)(titled("a deleted conversation survives on no instance"), () => {
  let database: { url: string; drop(): Promise<void> };
  let a: SandboxServer;
  let b: SandboxServer;
  const dataDirs: string[] = [];

  const workTree = (server: SandboxServer, id: string) =>
    join(server.dataDir, "sandboxes", "conversations", conversationDirName(id));

  async function deleteOn(server: SandboxServer, agent: string, id: string): Promise<void> {
    const deleted = await fetch(`${server.url}/api/agents/${agent}/conversations/${id}`, {
      method: "DELETE",
      headers: { "x-api-key": ADMIN_KEY },
    });
    expect(deleted.status).toBe(204);
  }

  beforeAll(async () => {
    database = await createTestDatabase();
    // One after the other: the first migrates and seeds the demo.
    a = await startSandboxServer({ store: database.url });
    b = await startSandboxServer({ store: database.url });
    dataDirs.push(a.dataDir, b.dataDir);
  }, 60_000);
  afterAll(async () => {
    await a?.close().catch(() => undefined);
    await b?.close().catch(() => undefined);
    for (const dir of dataDirs) await removeDir(dir);
    await database?.drop();
  });

  it("another workspace taking the id on an instance that was down meanwhile finds none of it", async () => {
    const id = "taken-after-delete";
    const wrote = await b.turn("acme-widgets", PHRASES.write("secret.txt", "only-for-demo"), {
      conversation_id: id,
    });
    expect(wrote.eventNames.at(-1)).toBe("message_stop");
    // A read-only repository turn: the file stays in B's work tree, uncommitted.
    expect(existsSync(join(workTree(b, id), "secret.txt"))).toBe(true);

    await b.close();
    await deleteOn(a, "acme-widgets", id);
    b = await startSandboxServer({ store: database.url, dataDir: b.dataDir });
    // Reconciled with the database at start.
    expect(existsSync(workTree(b, id))).toBe(false);

    const probe = PHRASES.run("ls -A; test -e secret.txt && echo FOUND-IT; echo listed");
    const taken = await sendTurn(
      b.url,
      "other-agent",
      probe,
      { conversation_id: id, stream_tool_calls: true },
      OTHER_ADMIN_KEY,
    );
    expect(taken.text).toContain("listed");
    expect(taken.text).not.toContain("only-for-demo");
    // Neither the file nor the old clone (the new conversation is a storage agent's).
    expect(taken.text).not.toMatch(/FOUND-IT|secret\.txt|README/);
    // Nothing spread: the new conversation's files as the other instance restores them.
    const elsewhere = await sendTurn(
      a.url,
      "other-agent",
      probe,
      { conversation_id: id, stream_tool_calls: true },
      OTHER_ADMIN_KEY,
    );
    expect(elsewhere.text).toContain("listed");
    expect(elsewhere.text).not.toContain("only-for-demo");
    expect(elsewhere.text).not.toMatch(/FOUND-IT|secret\.txt|README/);
  });

  it("an instance whose listener was cut when the delete happened drops its copy once it listens again", async () => {
    const id = "deleted-while-deaf";
    await b.turn("demo-agent", PHRASES.write("memo.txt", "kept-on-b"), { conversation_id: id });
    expect(existsSync(join(workTree(b, id), "memo.txt"))).toBe(true);
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      // Every instance's listener (each server's LISTEN connection), cut by the database.
      const cut = await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
      );
      expect(cut.rowCount).toBeGreaterThanOrEqual(2);
    } finally {
      await admin.end();
    }
    await deleteOn(a, "demo-agent", id);
    expect(await goneWithin(workTree(b, id), 20_000)).toBe(true);
  });
});
