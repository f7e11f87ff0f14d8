/**
 * A turn that loses its lease is told so, and so is its transcript: two server instances on one real
 * PostgreSQL database; while the first runs a turn, its lease is taken (another grant's token in its row, as
 * when the lease ran out and another instance took it). The first instance's client gets the lease-lost error
 * event, and the second instance, whose next turn on the conversation records the unstored turn, records it as
 * a lost lease, not as "the server stopped" (what the old server wrote, though no server stopped).
 * Runs on the test run's cluster (scripts/postgres-cluster.ts); skipped without one.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, postgresSkipReason } from "../store/testing.ts";
import {
  getTranscript,
  removeDir,
  type SandboxServer,
  sendTurn,
  startSandboxServer,
} from "../test/sandbox-server.ts";

const skip = postgresSkipReason();
const titled = (title: string) => (skip === undefined ? title : `${title} (skipped: ${skip})`);
const LEASE_MS = 900;

describe.skipIf(skip !== undefined)(titled("a lost lease, told truthfully (two instances)"), () => {
  let database: { url: string; drop(): Promise<void> };
  let a: SandboxServer;
  let b: SandboxServer;

  beforeAll(async () => {
    database = await createTestDatabase();
    a = await startSandboxServer({ store: database.url, turnLeaseMs: LEASE_MS });
    b = await startSandboxServer({ store: database.url, turnLeaseMs: LEASE_MS });
  }, 60_000);
  afterAll(async () => {
    await a?.close();
    await b?.close();
    for (const server of [a, b]) if (server) await removeDir(server.dataDir);
    await database?.drop();
  });

  it("the lost turn's client is told its lease was lost, and the other instance records the turn as a lost lease", async () => {
    const id = `lease-lost-${Date.now()}`;
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      const running = sendTurn(a.url, "demo-agent", "Use your tools to run the shell command: sleep 6", {
        conversation_id: id,
      });
      // Once the first instance holds the lease, another grant takes it (it lasts a little, then frees itself).
      for (let i = 0; i < 200; i++) {
        const { rowCount } = await admin.query("SELECT 1 FROM turn_leases WHERE conversation_id = $1", [id]);
        if (rowCount) break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      await admin.query(
        `UPDATE turn_leases SET token = token + 1000000, holder = 'another instance',
           expires_at = clock_timestamp() + interval '300 milliseconds' WHERE conversation_id = $1`,
        [id],
      );
      const lost = await running;
      expect(lost.status).toBe(200);
      expect(lost.error).toMatch(/lease/);

      // The second instance's next turn takes the conversation and records the unstored turn first.
      const next = await sendTurn(b.url, "demo-agent", "Say hello after the lost turn.", {
        conversation_id: id,
      });
      expect(next.status).toBe(200);
      expect(next.error).toBeUndefined();
      const transcript = await getTranscript(b.url, "demo-agent", id);
      const errors = transcript.events.filter((event) => event.type === "error");
      expect(errors).toHaveLength(1);
      expect(errors[0].code).toBe("AGENT_API_TURN_LEASE_LOST");
      expect(String(errors[0].message)).toMatch(/lost its lease/);
      expect(String(errors[0].message)).not.toMatch(/server stopped/);
      expect(transcript.messages.filter((m) => m.role === "user").map((m) => m.content[0]?.text)).toEqual([
        "Use your tools to run the shell command: sleep 6",
        "Say hello after the lost turn.",
      ]);
    } finally {
      await admin.end();
    }
  }, 60_000);
});
