/** Test fixtures of the store: a conversation record with every field at a plain default, and the engines. */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { newConversation } from "./new-conversation.ts";
import { openPostgresStore } from "./postgres/index.ts";
import { openSqliteStore } from "./sqlite/index.ts";
import type { Channel, ConversationRecord, ListFilter, ServerStore, TurnWrite } from "./types.ts";

/** A private interactive conversation `c1` of alice on demo-agent, with `overrides` on top. */
export function conversationRecord(overrides: Partial<ConversationRecord> = {}): ConversationRecord {
  return newConversation({
    id: "c1",
    workspaceId: "demo",
    agent: "demo-agent",
    ownerMemberId: "alice",
    title: "Hello",
    createdAt: "2026-01-01T00:00:00.000Z",
    ...overrides,
  });
}

/** A turn of one question and its answer, written at minute turnIndex + 1 of 2026. */
export function textTurn(
  conversationId: string,
  turnIndex: number,
  overrides: Partial<TurnWrite> = {},
): TurnWrite {
  return {
    conversationId,
    turnIndex,
    messages: [
      {
        role: "user",
        text: `question ${turnIndex}`,
        authorMemberId: "alice",
        authorName: "Alice",
        isCompactSummary: false,
      },
      {
        role: "assistant",
        text: `answer ${turnIndex}`,
        authorMemberId: null,
        authorName: null,
        isCompactSummary: false,
      },
    ],
    events: [{ kind: "text", text: `answer ${turnIndex}` }],
    compaction: null,
    at: `2026-01-01T00:0${turnIndex + 1}:00.000Z`,
    ...overrides,
  };
}

export const MEMBERS = ["alice", "bob", "carol"] as const;
const LIST_CHANNELS: Channel[] = ["INTERACTIVE", "NOTEBOOK", "SLACK", "EMAIL"];

/**
 * A deterministic mix covering each visibility rule (own private, own shared, others' private and shared,
 * channel-owned), hidden runs, a second agent and workspace, and every filter value being present or absent.
 */
export function mixedRecords(count: number): ConversationRecord[] {
  const records: ConversationRecord[] = [];
  for (let i = 0; i < count; i++) {
    const channel = LIST_CHANNELS[i % 4];
    const channelOwned = (channel === "SLACK" || channel === "EMAIL") && i % 3 !== 0;
    const created = Date.UTC(2026, 0, 1) + i * 60_000;
    // Activity out of creation order, with deliberate ties on updatedAt to exercise the tie-breakers.
    const updated = created + ((i * 7919) % 50) * 3_600_000 - (i % 11 === 0 ? 60_000 : 0);
    records.push({
      generation: 0,
      id: `c${String(i).padStart(4, "0")}`,
      workspaceId: i % 29 === 0 ? "other" : "demo",
      agent: i % 13 === 0 ? "notes-agent" : "demo-agent",
      ownerMemberId: channelOwned ? null : MEMBERS[i % 3],
      channel,
      channelId: channel === "SLACK" || channel === "EMAIL" || i % 10 === 1 ? `chan-${i % 3}` : null,
      notebookPath: channel === "NOTEBOOK" || i % 10 === 2 ? `nb/${i % 2}.ipynb` : null,
      automation: i % 5 === 0 ? `auto-${i % 2}` : null,
      title: `t${i}`,
      shared: i % 7 === 0,
      agentSessionId: null,
      parentConversationId: null,
      forkedAtTurnIndex: null,
      defaultModel: null,
      defaultAutomation: null,
      hidden: i % 17 === 0,
      createdAt: new Date(created).toISOString(),
      updatedAt: new Date(updated).toISOString(),
      turnCount: 0,
      turnModel: null,
      turnAutomation: null,
    });
  }
  return records;
}

/** The API's rules as plain code: what listConversations must return for a filter. */
export function expected(records: ConversationRecord[], filter: ListFilter): string[] {
  return records
    .filter(
      (r) =>
        r.workspaceId === filter.workspaceId &&
        r.agent === filter.agent &&
        !r.hidden &&
        (r.ownerMemberId === filter.viewerMemberId || r.shared || r.ownerMemberId === null) &&
        (filter.channel === undefined || r.channel === filter.channel) &&
        (filter.channelId === undefined || r.channelId === filter.channelId) &&
        (filter.notebookPath === undefined || r.notebookPath === filter.notebookPath) &&
        (filter.automation === undefined || r.automation === filter.automation) &&
        (filter.since === undefined || Date.parse(r.updatedAt) >= Date.parse(filter.since)),
    )
    .sort(
      (a, b) =>
        b.updatedAt.localeCompare(a.updatedAt) ||
        b.createdAt.localeCompare(a.createdAt) ||
        (a.id < b.id ? 1 : a.id > b.id ? -1 : 0),
    )
    .slice(0, filter.limit)
    .map((r) => r.id);
}

/** Each optional part of a list query, with the column it constrains and a value that matches some rows. */
export const OPTIONAL = [
  { key: "channel", column: "channel", value: "SLACK" },
  { key: "channelId", column: "channel_id", value: "chan-1" },
  { key: "notebookPath", column: "notebook_path", value: "nb/1.ipynb" },
  { key: "automation", column: "automation", value: "auto-0" },
  { key: "since", column: "updated_at", value: "2026-01-02T00:00:00+00:00" },
] as const;

/** All 2^5 subsets of the optional parts: every filter alone and in every combination. */
export function combinations(): Array<Array<(typeof OPTIONAL)[number]>> {
  return Array.from({ length: 1 << OPTIONAL.length }, (_, mask) =>
    OPTIONAL.filter((_, bit) => mask & (1 << bit)),
  );
}

export function filterOf(parts: Array<(typeof OPTIONAL)[number]>, viewer: string, limit: number): ListFilter {
  const filter: ListFilter = { workspaceId: "demo", agent: "demo-agent", viewerMemberId: viewer, limit };
  for (const part of parts) Object.assign(filter, { [part.key]: part.value });
  return filter;
}

/**
 * The engines the store's behavioural tests run on. PostgreSQL needs the test run's cluster
 * (scripts/postgres-cluster.ts, started by Vitest's global set-up); without it its tests skip with the reason.
 */
export interface StoreEngine {
  name: "sqlite" | "postgres";
  /** Why this engine's tests skip here, or undefined. */
  skip: string | undefined;
  /** A fresh, empty store of its own. */
  open(): Promise<OpenedStore>;
}

export interface OpenedStore {
  store: ServerStore;
  /** Closes the store and opens the same data again (a restart). */
  reopen(): Promise<ServerStore>;
  /** Closes the store (if open) and removes its data. */
  destroy(): Promise<void>;
  /** Where the data lives: the SQLite file, or the PostgreSQL database's URL. */
  location: string;
}

export const SQLITE_ENGINE: StoreEngine = {
  name: "sqlite",
  skip: undefined,
  async open() {
    const dir = mkdtempSync(join(tmpdir(), "store-test-"));
    const file = join(dir, "agent-api.sqlite");
    const opened: OpenedStore = {
      store: openSqliteStore(file),
      location: file,
      async reopen() {
        await opened.store.close();
        opened.store = openSqliteStore(file);
        return opened.store;
      },
      async destroy() {
        await opened.store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
    return opened;
  },
};

/** The test run's PostgreSQL server (the cluster's `postgres` database), or undefined. */
export function testPostgresUrl(): string | undefined {
  return process.env.AGENT_API_TEST_POSTGRES_URL;
}

export function postgresSkipReason(): string | undefined {
  if (testPostgresUrl()) return undefined;
  return process.env.AGENT_API_TEST_POSTGRES_SKIP ?? "no PostgreSQL cluster for this run";
}

/** A new, empty database on the test run's cluster; `drop` removes it (closing whatever still uses it). */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const admin = testPostgresUrl();
  if (!admin) throw new Error(postgresSkipReason());
  const name = `agent_api_test_${randomUUID().replaceAll("-", "")}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const dropper = new pg.Client({ connectionString: admin });
      await dropper.connect();
      try {
        await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await dropper.end();
      }
    },
  };
}

export const POSTGRES_ENGINE: StoreEngine = {
  name: "postgres",
  get skip() {
    return postgresSkipReason();
  },
  async open() {
    const database = await createTestDatabase();
    let closed = false;
    const opened: OpenedStore = {
      store: await openPostgresStore(database.url),
      location: database.url,
      async reopen() {
        await opened.store.close();
        opened.store = await openPostgresStore(database.url);
        return opened.store;
      },
      async destroy() {
        if (!closed) await opened.store.close();
        closed = true;
        await database.drop();
      },
    };
    return opened;
  },
};

export const STORE_ENGINES: StoreEngine[] = [SQLITE_ENGINE, POSTGRES_ENGINE];
