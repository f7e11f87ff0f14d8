/**
 * Files shared between instances end to end: two reference servers (the demo, scripted engine) with their own
 * data directories on one PostgreSQL database, over real HTTP. A conversation's next turn on the other server
 * reads the file its first turn wrote, and a file it removes there is gone when the conversation comes back.
 * With each server's files on its own disk only (no shared file store), the second turn finds nothing.
 * Runs on the test run's cluster (scripts/postgres-cluster.ts); skipped without one.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, postgresSkipReason } from "../store/testing.ts";
import {
  ADMIN_KEY,
  PHRASES,
  removeDir,
  type SandboxServer,
  startSandboxServer,
} from "../test/sandbox-server.ts";
import { conversationDirName } from "./safe-paths.ts";

const skip = postgresSkipReason();
const titled = (title: string) => (skip === undefined ? title : `${title} (skipped: ${skip})`);

describe.skipIf(skip !== undefined)(
  titled("two servers on one PostgreSQL share conversations' files"),
  () => {
    let database: { url: string; drop(): Promise<void> };
    const servers: SandboxServer[] = [];

    beforeAll(async () => {
      database = await createTestDatabase();
      // One after the other: the first migrates and seeds the demo.
      for (let i = 0; i < 2; i++) servers.push(await startSandboxServer({ store: database.url }));
    }, 60_000);
    afterAll(async () => {
      for (const server of servers) await server.close().catch(() => undefined);
      for (const server of servers) await removeDir(server.dataDir);
      await database?.drop();
    });

    it("a turn on the other server reads what the first wrote, and does not see what it removed", async () => {
      const [a, b] = servers;
      const id = "shared-over-http";
      const wrote = await a.turn("demo-agent", PHRASES.write("memo.txt", "kiwi-on-a"), {
        conversation_id: id,
      });
      expect(wrote.eventNames.at(-1)).toBe("message_stop");
      const read = await b.turn("demo-agent", PHRASES.read("memo.txt"), { conversation_id: id });
      expect(read.eventNames.at(-1)).toBe("message_stop");
      expect(read.text).toContain("kiwi-on-a");

      const removed = await b.turn("demo-agent", PHRASES.run("rm memo.txt && echo removed"), {
        conversation_id: id,
      });
      expect(removed.text).toContain("removed");
      // A ran the first turn and its copy is warm: it must notice the file is gone.
      const listed = await a.turn("demo-agent", PHRASES.run("ls -A; echo listed"), { conversation_id: id });
      expect(listed.text).toContain("listed");
      expect(listed.text).not.toContain("memo.txt");
    });

    it("a delete on one server removes the other's local copy of the conversation", async () => {
      const [a, b] = servers;
      const id = "deleted-elsewhere";
      await a.turn("demo-agent", PHRASES.write("memo.txt", "kept-on-a"), { conversation_id: id });
      const copyOnA = join(a.dataDir, "sandboxes", "conversations", conversationDirName(id));
      expect(existsSync(join(copyOnA, "memo.txt"))).toBe(true);
      const deleted = await fetch(`${b.url}/api/agents/demo-agent/conversations/${id}`, {
        method: "DELETE",
        headers: { "x-api-key": ADMIN_KEY },
      });
      expect(deleted.status).toBe(204);
      const deadline = Date.now() + 10_000;
      while (existsSync(copyOnA) && Date.now() < deadline) await sleep(50);
      expect(existsSync(copyOnA)).toBe(false);
    });

    it("a turn whose lease another instance took while it ran ends with the lease-lost code, not a sandbox failure", async () => {
      const [a] = servers;
      const id = "lease-taken-mid-turn";
      const admin = new pg.Client({ connectionString: database.url });
      await admin.connect();
      try {
        const reply = a.turn("demo-agent", PHRASES.run("touch started.txt; sleep 3; echo saved > late.txt"), {
          conversation_id: id,
        });
        const started = join(a.dataDir, "sandboxes", "conversations", conversationDirName(id), "started.txt");
        const deadline = Date.now() + 30_000;
        while (!existsSync(started) && Date.now() < deadline) await sleep(50);
        // Another holder's token, as when the lease ran out and another instance took it.
        await admin.query("UPDATE turn_leases SET token = token + 1000000 WHERE conversation_id = $1", [id]);
        expect((await reply).eventNames.at(-1)).toBe("error");
        expect(await a.turnFailure(id)).toBe("AGENT_API_TURN_LEASE_LOST");
      } finally {
        await admin.end();
      }
    });
  },
);
