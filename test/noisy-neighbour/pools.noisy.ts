/**
 * Noisy neighbour, per pool: the demo workspace pushes one pool to its share while the other workspace's
 * requests and turns are timed, against `agent-api serve --demo` in a child process. Each pool's figure is the
 * other workspace's p99 added delay (p99 under the noise minus p99 quiet), bounded by ADDED_DELAY_BOUND_MS:
 * a correctness bound, orders of magnitude above what a fair share costs, catching a pool one tenant can fill.
 *
 * - transcript reads: 16 readers of an 86 MB transcript that stop reading (the old server held the event
 *   loop for each read and kept every body in memory: 4.5-10 s for others, then the OOM killer); the
 *   server's memory per response is printed for docs/limits.md.
 * - sandbox processes: 24 turns each running a command that starts 250 processes (the old single pool of
 *   4,096 filled and other workspaces' `echo` failed with "fork: Resource temporarily unavailable").
 * - requests in flight: 3,500 requests of one workspace held open (past the old server cap of 4,096 minus
 *   what another workspace needs): the other workspace's requests are served.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoKeys } from "../../reference-server/demo/workspace.ts";
import { openSqliteStore } from "../../reference-server/store/sqlite/index.ts";
import { conversationRecord } from "../../reference-server/store/testing.ts";
import {
  type ServeCommand,
  sendTurn,
  startServeCommand,
} from "../../reference-server/test/sandbox-server.ts";

const BIN = fileURLToPath(new URL("../../bin/agent-api", import.meta.url));
const MiB = 1024 * 1024;
/** The other workspace's p99 added delay must stay below this under any one pool's noise. */
const ADDED_DELAY_BOUND_MS = 3_000;
/** A response's share of the server's memory while its reader does not read (the old server: the body, twice). */
const MEMORY_PER_RESPONSE_BOUND = 48 * MiB;
const TRANSCRIPT_ROWS = 172;
const ROW_BYTES = 512 * 1024;

let dir: string;
let server: ServeCommand;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "noisy-neighbour-"));
  server = await startServeCommand([
    BIN,
    "serve",
    "--demo",
    "--data",
    dir,
    "--port",
    "0",
    "--unsafe-no-isolation",
    "--tool-timeout-seconds",
    "30",
    "--requests-per-key",
    "4000",
  ]);
  // An 86 MB transcript, written as a long-lived conversation would have stored it, shared with the workspace.
  const store = openSqliteStore(join(dir, "agent-api.sqlite"));
  await store.insertConversation(conversationRecord({ id: "huge", ownerMemberId: "alice", shared: true }));
  for (let turn = 0; turn < TRANSCRIPT_ROWS; turn++)
    await store.commitTurn({
      conversationId: "huge",
      turnIndex: turn,
      messages: [
        {
          role: "user",
          text: `${turn}:${"x".repeat(ROW_BYTES)}`,
          authorMemberId: "alice",
          authorName: "Alice",
          isCompactSummary: false,
        },
      ],
      events: [],
      compaction: null,
      at: new Date().toISOString(),
    });
  await store.close();
});

afterAll(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function rss(): Promise<number> {
  const status = await readFile(`/proc/${server.pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) * 1024;
}

function p99(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)];
}

/** Times the other workspace's model list `count` times, one after another. */
async function otherRequests(count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const response = await fetch(`${server.url}/api/agents/other-agent/v1/models`, {
      headers: { "x-api-key": demoKeys.otherAdmin },
    });
    await response.arrayBuffer();
    expect(response.status).toBe(200);
    times.push(performance.now() - started);
  }
  return times;
}

/** Times the other workspace's turns running `echo`, one after another; each must print its word. */
async function otherTurns(count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const reply = await sendTurn(
      server.url,
      "other-agent",
      `Use your tools to run the shell command: echo other-${i}`,
      { stream_tool_calls: true },
      demoKeys.otherAdmin,
    );
    const result = reply.blocks.find((b) => b.type === "tool_result") as { content: string } | undefined;
    expect(result?.content).toContain(`other-${i}`);
    times.push(performance.now() - started);
  }
  return times;
}

/** A GET on a raw socket that stops reading once the head arrived. */
function unreadRead(path: string, key: string): Promise<Socket> {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () =>
      socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${key}\r\n\r\n`),
    );
    socket.once("data", () => {
      socket.pause();
      resolve(socket);
    });
    socket.once("error", reject);
  });
}

function report(pool: string, quiet: number[], noisy: number[]): number {
  const added = p99(noisy) - p99(quiet);
  console.log(
    `${pool}: other workspace p99 ${p99(quiet).toFixed(0)} ms quiet, ${p99(noisy).toFixed(0)} ms under the noise (added ${added.toFixed(0)} ms, bound ${ADDED_DELAY_BOUND_MS} ms)`,
  );
  return added;
}

describe("noisy neighbour", () => {
  it("transcript reads: 16 unread reads of an 86 MB transcript; bounded memory per response, others answered", async () => {
    const quiet = await otherRequests(40);
    const before = await rss();
    const readers: Socket[] = [];
    for (let i = 0; i < 16; i++)
      readers.push(await unreadRead("/api/agents/demo-agent/conversations/huge/messages", demoKeys.admin));
    const noisy = await otherRequests(40);
    const perResponse = ((await rss()) - before) / readers.length;
    console.log(
      `transcript reads: ${(perResponse / MiB).toFixed(1)} MiB of server memory per unread response (86 MB transcript)`,
    );
    for (const socket of readers) socket.destroy();
    expect(report("transcript reads", quiet, noisy)).toBeLessThan(ADDED_DELAY_BOUND_MS);
    expect(perResponse).toBeLessThan(MEMORY_PER_RESPONSE_BOUND);
  });

  it("sandbox processes: 24 turns of 250 processes each; the other workspace's commands still run", async () => {
    const quiet = await otherTurns(5);
    const hangUp = new AbortController();
    const noise = [...Array(24).keys()].map((i) =>
      fetch(`${server.url}/api/agents/demo-agent/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": demoKeys.admin, "content-type": "application/json" },
        body: JSON.stringify({
          messages: [
            {
              role: "user",
              content: `Use your tools to run the shell command: for i in $(seq 250); do sleep 2${i} & done; wait`,
            },
          ],
        }),
        signal: hangUp.signal,
      })
        .then((r) => r.text())
        .catch(() => ""),
    );
    // The noise has filled its share once the demo workspace's commands hold their processes.
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline && (await sleepers()) < 8 * 250)
      await new Promise((r) => setTimeout(r, 100));
    console.log(`sandbox processes: the noise holds ${await sleepers()} processes`);
    const noisy = await otherTurns(5);
    hangUp.abort();
    await Promise.all(noise);
    expect(report("sandbox processes", quiet, noisy)).toBeLessThan(ADDED_DELAY_BOUND_MS);
  });

  it("requests in flight: 3,500 held by one workspace; the other workspace is served", async () => {
    const quiet = await otherRequests(40);
    const held: Socket[] = [];
    // A request whose body never comes holds its slot until the request time-out; past the workspace's share
    // they get 429.
    const { hostname, port } = new URL(server.url);
    for (let i = 0; i < 3500; i++) {
      const socket = connect(Number(port), hostname);
      socket.write(
        `POST /api/agents/demo-agent/conversations/huge HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${demoKeys.admin}\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n`,
      );
      socket.pause();
      socket.on("error", () => undefined);
      held.push(socket);
    }
    const noisy = await otherRequests(40);
    for (const socket of held) socket.destroy();
    expect(report("requests in flight", quiet, noisy)).toBeLessThan(ADDED_DELAY_BOUND_MS);
  });
});

/** Processes of the noise's commands (sleep 2<i>) alive on the host. */
async function sleepers(): Promise<number> {
  const { readdir } = await import("node:fs/promises");
  let count = 0;
  for (const pid of await readdir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const args = await readFile(`/proc/${pid}/cmdline`, "latin1").catch(() => "");
    if (/^sleep\0(2\d+)\0$/.test(args)) count++;
  }
  return count;
}
