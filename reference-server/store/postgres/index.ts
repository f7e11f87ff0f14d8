/**
 * The Store over PostgreSQL (node-postgres, a pool of connections), for deployments of several instances on
 * one database. Each method is one statement or one transaction. Writes that must not interleave with
 * another instance's (a turn's commit, a fork's copy, a delete) first lock their conversation's row, so
 * concurrent writers of one conversation wait for each other rather than read stale sequence numbers.
 *
 * One module per table or concern: conversations, transcripts (messages, events, compactions and a turn's
 * commit), pending turns, sessions, and what the instances share for their coordination (SharedStoreParts):
 * leases, scheduled recordings, interrupts, files. The rows shared with SQLite are mapped in
 * ../conversation-row.ts and ../transcript-rows.ts.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { DEFAULT_POOL_CONNECTIONS_PER_WORKSPACE, WorkspaceSharedPool } from "../pool-shares.ts";
import type { SharedStore } from "../types.ts";
import { postgresConversations } from "./conversations.ts";
import { createPostgresFileStore } from "./files.ts";
import { postgresTurnInterrupts } from "./interrupts.ts";
import { postgresTurnLeases } from "./leases.ts";
import { migratePostgres } from "./migrations.ts";
import { postgresPendingTurns } from "./pending-turns.ts";
import { postgresScheduledRecordings } from "./recordings.ts";
import { postgresSessions } from "./sessions.ts";
import { postgresStoredBytes } from "./stored-bytes.ts";
import { postgresTranscripts } from "./transcripts.ts";

export interface PostgresStoreOptions {
  /** Connections in the pool (default 10). */
  maxConnections?: number;
  /** Connections of the pool one workspace's requests may hold at once (../pool-shares.ts; default 6). */
  connectionsPerWorkspace?: number;
  /** Shown in pg_stat_activity, so an operator (and a test) can tell this server's connections. */
  applicationName?: string;
}

export async function openPostgresStore(
  url: string,
  options: PostgresStoreOptions = {},
): Promise<SharedStore> {
  const pool = new WorkspaceSharedPool(
    {
      connectionString: url,
      max: options.maxConnections ?? 10,
      application_name: options.applicationName ?? "agent-api",
    },
    options.connectionsPerWorkspace ?? DEFAULT_POOL_CONNECTIONS_PER_WORKSPACE,
  );
  // An idle connection the server drops (a restart of PostgreSQL) must not take the process down; the pool
  // replaces it on the next query.
  pool.on("error", () => undefined);
  // Lease renewals have connections of their own: behind a pool saturated by reads (any tenant's flood) a
  // renewal would wait past the lease, and another instance would run the conversation's next turn beside
  // the running one. Two suffice: a renewal is one short UPDATE per running turn every third of a lease.
  const renewals = new pg.Pool({
    connectionString: url,
    max: 2,
    application_name: `${options.applicationName ?? "agent-api"} leases`,
  });
  renewals.on("error", () => undefined);
  try {
    const client = await pool.connect();
    try {
      await migratePostgres(client);
    } finally {
      client.release();
    }
  } catch (error) {
    await pool.end();
    await renewals.end();
    throw error;
  }

  let closed = false;
  /** Tells this store's own interrupts apart from other instances' on the shared channel. */
  const instanceId = randomUUID();

  const sessions = postgresSessions(pool);

  return {
    sharing: "shared",
    ...postgresConversations(pool),
    ...postgresTranscripts(pool, sessions),
    ...postgresPendingTurns(pool),
    ...sessions.methods,
    turnLeases: postgresTurnLeases(pool, renewals),
    scheduledRecordings: postgresScheduledRecordings(pool, sessions),
    turnInterrupts: postgresTurnInterrupts(pool, url, instanceId, options.applicationName ?? "agent-api"),
    fileStore: createPostgresFileStore(pool),
    storedBytes: postgresStoredBytes(pool),

    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
      await renewals.end();
    },
  };
}
