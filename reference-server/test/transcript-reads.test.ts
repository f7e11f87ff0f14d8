/**
 * Reading a large transcript over real HTTP: the body is written a page of rows at a time (the same JSON
 * as one `JSON.stringify` would give), a reader that stops reading is dropped after the stall time-out as a
 * turn's stream is, and the request's admission slot is held until the read has stopped. The transcript is
 * written into the server's SQLite file through a second connection, as a long-lived conversation would
 * have stored it. Memory per response and the delay it costs other workspaces are measured in
 * `npm run test:noisy-neighbour` (test/noisy-neighbour/), on a server in a child process.
 */
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TRANSCRIPT_PAGE_ROWS } from "../service/transcript-pages.ts";
import { openSqliteStore } from "../store/sqlite/index.ts";
import { conversationRecord } from "../store/testing.ts";
import type { Store } from "../store/types.ts";
import { KEYS, raw, startTestServer, type TestServer, uid } from "./helpers.ts";

const KiB = 1024;
const STALL_MS = 3_000;
/** Turns of the seeded transcript: at least three pages and a bit of messages (two a turn). */
const TURNS = Math.max(Math.ceil((TRANSCRIPT_PAGE_ROWS * 3) / 2) + 1, 48);
// Over 20 MB in all: more than the two sockets' kernel buffers hold, so an unread body stops draining.
const PROMPT_BYTES = 512 * KiB;
/** Its summary is row TRANSCRIPT_PAGE_ROWS - 1 (the turn before it has one message). */
const LEGACY_SUMMARY_TURN = TRANSCRIPT_PAGE_ROWS / 2;

let t: TestServer;
let seeder: Store;
const big = uid("big");

beforeAll(async () => {
  t = await startTestServer({ sseStallMs: STALL_MS, limits: { requestsPerWorkspace: 2 } });
  seeder = openSqliteStore(t.dbFile);
  await seeder.insertConversation(conversationRecord({ id: big, ownerMemberId: "alice", shared: true }));
  const text = (role: "user" | "assistant", body: string, author: string | null = null) => ({
    role,
    text: body,
    authorMemberId: author,
    authorName: author === null ? null : author.toUpperCase(),
    isCompactSummary: false,
  });
  for (let turn = 0; turn < TURNS; turn++) {
    const messages =
      turn === LEGACY_SUMMARY_TURN
        ? // A summary stored before summaries carried an author, at the last row of the first page: its
          // author is its turn's prompt's, the first row of the next page.
          [{ ...text("user", "summary"), isCompactSummary: true }, text("user", `prompt ${turn}`, "bob")]
        : turn === LEGACY_SUMMARY_TURN - 1
          ? [text("user", `${turn}:${"p".repeat(PROMPT_BYTES)}`, "alice")]
          : [
              text("user", `${turn}:${"p".repeat(PROMPT_BYTES)}`, "alice"),
              text("assistant", `answer ${turn}`),
            ];
    await seeder.commitTurn({
      conversationId: big,
      turnIndex: turn,
      messages,
      events: [{ type: "text", text: `answer ${turn}` }],
      compaction: null,
      at: new Date().toISOString(),
    });
  }
}, 60_000);

afterAll(async () => {
  await seeder?.close();
  await t?.close();
});

/** Sends a GET of the transcript on a raw socket that never reads; resolves once the response head arrived. */
function unreadTranscript(key = KEYS.admin): Promise<Socket> {
  const { hostname, port } = new URL(t.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(
        `GET /api/agents/demo-agent/conversations/${big}/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${key}\r\n\r\n`,
      );
    });
    socket.once("data", (chunk) => {
      // Stop reading: the kernel buffers fill, then the server's writes stop draining.
      socket.pause();
      expect(chunk.toString("latin1")).toMatch(/^HTTP\/1\.1 200/);
      resolve(socket);
    });
    socket.once("error", reject);
  });
}

/** Log lines of bodies cut before their end (the server's own account of a dropped reader). */
function cutLines(): number {
  return t.logLines().filter((line) => line.msg === "response body cut before its end").length;
}

/** Waits for `condition`, checking every 20 ms (the test's time-out bounds it). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}

/** Reads what is left on the socket until the server closes it. */
function readToClose(socket: Socket): Promise<string> {
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  socket.resume();
  return new Promise((resolve) =>
    socket.once("close", () => resolve(Buffer.concat(chunks).toString("latin1"))),
  );
}

describe("transcript reads in pages", () => {
  it("are the whole transcript, in order, with a legacy summary's author taken from its turn's prompt", async () => {
    const transcript = await t.client().getTranscript(big);
    expect(transcript.conversation.id).toBe(big);
    expect(transcript.messages).toHaveLength(TURNS * 2 - 1);
    expect(transcript.events.map((e) => (e as { turn_index: number }).turn_index)).toEqual([
      ...Array(TURNS).keys(),
    ]);
    expect(transcript.messages[0].content[0].text).toBe(`0:${"p".repeat(PROMPT_BYTES)}`);
    const summary = transcript.messages.findIndex((m) => m.is_compact_summary);
    expect(summary).toBe(TRANSCRIPT_PAGE_ROWS - 1);
    expect(transcript.messages[summary]).toMatchObject({ author_user_id: "bob", author_name: "BOB" });
    expect(transcript.messages.at(-1)?.content[0].text).toBe(`answer ${TURNS - 1}`);
  });

  it("drop a reader that leaves the body unread past the stall time-out", async () => {
    const cutBefore = cutLines();
    const socket = await unreadTranscript();
    // The server gives up on it (the old server kept the whole body queued for it, for ever).
    await until(() => cutLines() > cutBefore);
    const rest = await readToClose(socket);
    // What had reached the socket's buffers arrives, then the connection ends without the body's last chunk.
    expect(rest.endsWith("0\r\n\r\n")).toBe(false);
  });

  it("hold the request's admission slot while the body is written, and give it back once the reader is dropped", async () => {
    const cutBefore = cutLines();
    const socket = await unreadTranscript();
    expect(t.server.live().requestsInFlight).toBe(1);
    await until(() => cutLines() > cutBefore);
    await until(() => t.server.live().requestsInFlight === 0);
    socket.destroy();
  });

  it("count against their workspace's share of the requests in flight: over it that workspace gets 429, another is served", async () => {
    const cutBefore = cutLines();
    const readers = [await unreadTranscript(KEYS.admin), await unreadTranscript(KEYS.member)];
    const mine = await raw(t.url, "GET", "/api/agents/demo-agent/v1/models", { key: KEYS.viewer });
    expect(mine.status).toBe(429);
    expect(mine.headers.get("retry-after")).toMatch(/^\d+$/);
    expect((mine.json as { message: string }).message).toMatch(/this workspace/);
    const theirs = await raw(t.url, "GET", "/api/agents/other-agent/v1/models", { key: KEYS.otherAdmin });
    expect(theirs.status).toBe(200);
    await until(() => cutLines() >= cutBefore + 2);
    for (const socket of readers) socket.destroy();
  });
});
