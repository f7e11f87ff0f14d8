/**
 * Noisy neighbour, the disk and the PostgreSQL pool: as pools.noisy.ts, one workspace pushes a pool to its share
 * while the other workspace's requests and turns are timed against `agent-api serve --demo` in a child
 * process, and the other workspace's p99 added delay is bounded by ADDED_DELAY_BOUND_MS (a correctness bound).
 *
 * - disk: the demo workspace's Viewer forks a 24 MB conversation shared with it until its workspace's disk
 *   share (here 192 MiB) refuses it with 429, and goes on asking; the other workspace's forks and tool turns
 *   are timed meanwhile (the old server copied every fork in full with no share, filling the disk for all).
 * - PostgreSQL connections: against a server on the run's own PostgreSQL cluster, the demo workspace sends 64
 *   transcript reads that are slow (they wait on a lock of the transcripts' table another session holds, as
 *   expensive reads hold their connections); the other workspace's list requests are timed (with one pool for
 *   all, they waited behind the flood for as long as its reads took).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoKeys } from "../../reference-server/demo/workspace.ts";
import { createTestDatabase, postgresSkipReason } from "../../reference-server/store/testing.ts";
import {
  type ServeCommand,
  sendTurn,
  startServeCommand,
} from "../../reference-server/test/sandbox-server.ts";

const BIN = fileURLToPath(new URL("../../bin/agent-api", import.meta.url));
const MiB = 1024 * 1024;
const ADDED_DELAY_BOUND_MS = 3_000;
const DISK_SHARE = 192 * MiB;

function p99(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)];
}

function report(pool: string, quiet: number[], noisy: number[]): number {
  const added = p99(noisy) - p99(quiet);
  console.log(
    `${pool}: other workspace p99 ${p99(quiet).toFixed(0)} ms quiet, ${p99(noisy).toFixed(0)} ms under the noise (added ${added.toFixed(0)} ms, bound ${ADDED_DELAY_BOUND_MS} ms)`,
  );
  return added;
}

async function serve(dir: string, extra: string[]): Promise<ServeCommand> {
  return startServeCommand([
    BIN,
    "serve",
    "--demo",
    "--data",
    dir,
    "--port",
    "0",
    "--unsafe-no-isolation",
    "--requests-per-key",
    "4000",
    ...extra,
  ]);
}

function api(base: string, method: string, path: string, key: string, body?: unknown, signal?: AbortSignal) {
  return fetch(`${base}${path}`, {
    method,
    signal,
    headers: { "x-api-key": key, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

describe("noisy neighbour: the disk", () => {
  let dir: string;
  let server: ServeCommand;
  let big: string;
  let own: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "noisy-disk-"));
    server = await serve(dir, ["--disk-bytes-per-workspace", `${DISK_SHARE / MiB}M`]);
    // A 24 MB conversation (16 MiB of files, 8 MiB of prompts), shared with its workspace.
    const first = await sendTurn(
      server.url,
      "demo-agent",
      "Use your tools to run the shell command: head -c 16777216 /dev/urandom > big.bin && echo made",
    );
    big = first.conversationId;
    for (let i = 0; i < 4; i++)
      await sendTurn(server.url, "demo-agent", `Reply with OK. ${"x".repeat(2 * MiB)}`, {
        conversation_id: big,
      });
    expect(
      (
        await api(server.url, "POST", `/api/agents/demo-agent/conversations/${big}`, demoKeys.admin, {
          shared: true,
        })
      ).status,
    ).toBe(200);
    const mine = await sendTurn(
      server.url,
      "other-agent",
      "Use your tools to run the shell command: echo mine > mine.txt",
      {},
      demoKeys.otherAdmin,
    );
    own = mine.conversationId;
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** The other workspace: a fork of its own conversation, then an `echo` turn in the child; both timed. */
  async function otherForksAndTurns(count: number): Promise<number[]> {
    const times: number[] = [];
    for (let i = 0; i < count; i++) {
      const started = performance.now();
      const fork = await api(
        server.url,
        "POST",
        `/api/agents/other-agent/conversations/${own}/fork`,
        demoKeys.otherAdmin,
        {},
      );
      expect(fork.status).toBe(200);
      const { conversation_id } = (await fork.json()) as { conversation_id: string };
      const reply = await sendTurn(
        server.url,
        "other-agent",
        `Use your tools to run the shell command: cat mine.txt && echo other-${i}`,
        { conversation_id, stream_tool_calls: true },
        demoKeys.otherAdmin,
      );
      const result = reply.blocks.find((b) => b.type === "tool_result") as { content: string } | undefined;
      expect(result?.content).toContain(`other-${i}`);
      times.push(performance.now() - started);
    }
    return times;
  }

  it("disk: one workspace forks a large shared conversation until its share refuses it; the other's forks and turns go on", async () => {
    const quiet = await otherForksAndTurns(6);
    const statuses = new Map<number, number>();
    let stop = false;
    const noise = (async () => {
      while (!stop) {
        const fork = await api(
          server.url,
          "POST",
          `/api/agents/demo-agent/conversations/${big}/fork`,
          demoKeys.viewer,
          {},
        );
        statuses.set(fork.status, (statuses.get(fork.status) ?? 0) + 1);
        await fork.arrayBuffer();
      }
    })();
    // The share is full once the first refusal came.
    // (Without a share the forks never stop: 24 forks, ~3 times the share, are enough to tell.)
    while (!statuses.has(429) && (statuses.get(200) ?? 0) < 24)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(statuses.has(429), "the forker's workspace was never refused").toBe(true);
    const noisy = await otherForksAndTurns(6);
    stop = true;
    await noise;
    console.log(`disk: the Viewer's forks ${JSON.stringify(Object.fromEntries(statuses))} (by status)`);
    expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
    expect([...statuses.keys()].every((status) => status === 200 || status === 429)).toBe(true);
    expect(report("disk", quiet, noisy)).toBeLessThan(ADDED_DELAY_BOUND_MS);
  });
});

const pgSkip = postgresSkipReason();

describe.skipIf(pgSkip !== undefined)("noisy neighbour: the PostgreSQL pool", () => {
  let dir: string;
  let database: { url: string; drop(): Promise<void> };
  let server: ServeCommand;
  let demoConversation: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "noisy-pool-"));
    database = await createTestDatabase();
    server = await serve(dir, ["--store", database.url]);
    // Conversations in both workspaces, so each list reads rows.
    for (let i = 0; i < 20; i++) {
      demoConversation = (await sendTurn(server.url, "demo-agent", `Say demo ${i}.`)).conversationId;
      await sendTurn(server.url, "other-agent", `Say other ${i}.`, {}, demoKeys.otherAdmin);
    }
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** The other workspace's lists, one after another; one that takes past `timeoutMs` counts as that long. */
  async function otherLists(count: number, timeoutMs = 60_000): Promise<number[]> {
    const times: number[] = [];
    for (let i = 0; i < count; i++) {
      const started = performance.now();
      const response = await api(
        server.url,
        "GET",
        "/api/agents/other-agent/conversations?limit=200",
        demoKeys.otherAdmin,
        undefined,
        AbortSignal.timeout(timeoutMs),
      ).catch(() => undefined);
      if (response === undefined) {
        times.push(timeoutMs);
        break;
      }
      expect(response.status).toBe(200);
      await response.arrayBuffer();
      times.push(performance.now() - started);
    }
    return times;
  }

  it("PostgreSQL connections: 64 slow transcript reads of one workspace at once; the other workspace's lists are answered", async () => {
    const quiet = await otherLists(40);
    // The demo workspace's reads are slow: they wait on a lock of the transcripts' table (as an expensive read
    // would hold its connection), each holding a pooled connection while it waits. The other workspace's lists
    // read only the conversations' table.
    const blocker = new pg.Client({ connectionString: database.url });
    await blocker.connect();
    await blocker.query("BEGIN");
    await blocker.query("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE");
    const hangUp = new AbortController();
    const noise = Array.from({ length: 64 }, () =>
      api(
        server.url,
        "GET",
        `/api/agents/demo-agent/conversations/${demoConversation}/messages`,
        demoKeys.admin,
        undefined,
        hangUp.signal,
      )
        .then((response) => response.arrayBuffer())
        .catch(() => undefined),
    );
    let noisy: number[];
    try {
      // Every pooled connection the flood may hold is waiting once its reads are at the lock.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      noisy = await otherLists(40, ADDED_DELAY_BOUND_MS * 2);
    } finally {
      await blocker.query("ROLLBACK").catch(() => undefined);
      await blocker.end();
    }
    await Promise.all(noise);
    hangUp.abort();
    expect(report("PostgreSQL connections", quiet, noisy)).toBeLessThan(ADDED_DELAY_BOUND_MS);
  });
});
