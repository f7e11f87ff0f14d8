/**
 * Nothing a turn makes outlives it (issue 13), over real HTTP and a real SQLite file: after a burst of
 * concurrent turns (completed, failed, cut by their client, cut by a delete) every per-turn and
 * per-conversation figure the server holds is back to 0, and no turn arms a timer or signal that Node keeps
 * alive past the turn (`AbortSignal.timeout`, `AbortSignal.any`).
 */
import { DatabaseSync } from "node:sqlite";
import { collectText, StreamErrorEventError } from "@agent-api/client";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { SCHEMA_VERSION } from "../store/sqlite/migrations.ts";
import { PHRASES, runTurn, sleep, startTestServer, type TestServer, uid } from "./helpers.ts";

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({ sessionDelayMs: 50, turnTimeoutMs: 60_000 });
});
afterAll(async () => {
  await t?.close();
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** A turn read to its end; a turn that ends with an `error` event (as some here must) is fine too. */
function settle(turn: Promise<unknown>): Promise<unknown> {
  return turn.catch((error: unknown) => {
    if (error instanceof StreamErrorEventError) return undefined;
    throw error;
  });
}

async function drained(): Promise<ReturnType<TestServer["server"]["live"]>> {
  // Session recordings wait for their delay; everything else is released before the stream ends.
  for (let i = 0; i < 100 && t.server.live().pendingRecordings > 0; i++) await sleep(20);
  return t.server.live();
}

describe("after a burst of turns", () => {
  it("no turn-timeout timer, running turn, lock or pending recording is left", async () => {
    const timeout = vi.spyOn(AbortSignal, "timeout");
    const any = vi.spyOn(AbortSignal, "any");
    const alice = t.client();
    const conversations = Array.from({ length: 6 }, () => uid("burst"));
    const prompts = [
      PHRASES.remember("burst-word"),
      PHRASES.recall,
      PHRASES.fail,
      PHRASES.noOutput,
      "Say hello in one short sentence.",
    ];
    // The figures do move while turns run (else a 0 at the end would prove nothing).
    let peak = 0;
    const sampler = setInterval(() => {
      const live = t.server.live();
      peak = Math.max(peak, live.runningTurns + live.conversationLocks + live.turnTimers);
    }, 1);
    await Promise.all(
      conversations.map(async (id, c) => {
        for (let i = 0; i < 8; i++) {
          const turn = settle(runTurn(alice, prompts[(c + i) % prompts.length], { conversation_id: id }));
          // Two turns at once on one conversation: the second waits for the lock, then runs.
          const second =
            i % 4 === 0 ? settle(runTurn(alice, PHRASES.recall, { conversation_id: id })) : undefined;
          await Promise.all([turn, second]);
        }
      }),
    );
    // A client that leaves mid-turn, and a turn ended by a delete of its conversation.
    const leaving = new AbortController();
    const pending = alice
      .sendMessage(
        { stream: true, messages: [{ role: "user", content: "Keep using your tools without end." }] },
        { signal: leaving.signal },
      )
      .catch(() => undefined);
    await sleep(30);
    leaving.abort();
    await pending;
    const deleted = uid("burst-delete");
    await runTurn(alice, PHRASES.remember("gone"), { conversation_id: deleted });
    const running = runTurn(alice, "Keep using your tools without end.", { conversation_id: deleted }).catch(
      () => undefined,
    );
    await sleep(30);
    await alice.deleteConversation(deleted).catch(() => undefined);
    await running;

    clearInterval(sampler);
    expect(peak).toBeGreaterThan(0);
    // The abandoned turn ends on the server a moment after its client left.
    for (let i = 0; i < 100 && t.server.live().runningTurns > 0; i++) await sleep(20);
    expect(await drained()).toEqual({
      runningTurns: 0,
      turnTimers: 0,
      conversationLocks: 0,
      waitingTurns: 0,
      pendingRecordings: 0,
      requestsInFlight: 0,
      bodyBytesHeld: 0,
    });
    expect(timeout).not.toHaveBeenCalled();
    expect(any).not.toHaveBeenCalled();
  });

  it("a turn still times out, and its timer is gone with it", async () => {
    // Tools run unisolated where bubblewrap does not work: the turn needs them to run long, not the sandbox.
    const short = await startTestServer({
      sessionDelayMs: 0,
      turnTimeoutMs: 300,
      maxIterations: 1_000_000,
      unsafeNoIsolation: true,
    });
    try {
      const turn = await short.client().sendMessage({
        messages: [{ role: "user", content: "Keep using your tools without end." }],
      });
      await expect(collectText(turn)).rejects.toThrow(StreamErrorEventError);
      expect(await short.turnFailure(turn.conversationId)).toBe("AGENT_API_TURN_TIMED_OUT");
      expect(short.server.live()).toEqual({
        runningTurns: 0,
        turnTimers: 0,
        conversationLocks: 0,
        waitingTurns: 0,
        pendingRecordings: 0,
        requestsInFlight: 0,
        bodyBytesHeld: 0,
      });
    } finally {
      await short.close();
    }
  });
});

describe("a long conversation", () => {
  it("each turn inserts only its own history rows; the whole history is still resumed", async () => {
    const s = await startTestServer({ sessionDelayMs: 0 });
    const spy = new DatabaseSync(s.dbFile, { timeout: 5000 });
    try {
      spy.exec(`
        CREATE TABLE write_counts (what TEXT PRIMARY KEY, n INTEGER NOT NULL);
        INSERT INTO write_counts VALUES ('inserts', 0), ('deletes', 0), ('updates', 0);
        CREATE TRIGGER count_inserts AFTER INSERT ON session_messages BEGIN UPDATE write_counts SET n = n + 1 WHERE what = 'inserts'; END;
        CREATE TRIGGER count_deletes AFTER DELETE ON session_messages BEGIN UPDATE write_counts SET n = n + 1 WHERE what = 'deletes'; END;
        CREATE TRIGGER count_updates AFTER UPDATE ON session_messages BEGIN UPDATE write_counts SET n = n + 1 WHERE what = 'updates'; END;
      `);
      const alice = s.client();
      const first = await runTurn(alice, PHRASES.remember("long-kiwi"));
      const id = first.conversationId;
      for (let i = 0; i < 40; i++) await runTurn(alice, `Say hello, number ${i}.`, { conversation_id: id });
      const recall = await runTurn(alice, PHRASES.recall, { conversation_id: id });
      expect(recall.text).toBe("long-kiwi");
      const counts = Object.fromEntries(
        (spy.prepare("SELECT what, n FROM write_counts").all() as Array<{ what: string; n: number }>).map(
          (r) => [r.what, r.n],
        ),
      );
      const rows = (spy.prepare("SELECT COUNT(*) AS n FROM session_messages").get() as { n: number }).n;
      // 42 turns of one user message and one answer each: every row was written once, none rewritten.
      expect(rows).toBe(84);
      expect(counts).toEqual({ inserts: 84, deletes: 0, updates: 0 });
    } finally {
      spy.close();
      await s.close();
    }
  });

  it("a session an earlier version stored whole is resumed after the upgrade, then appended to", async () => {
    const s = await startTestServer({ sessionDelayMs: 0 });
    let restarted: TestServer | undefined;
    try {
      const first = await runTurn(s.client(), PHRASES.remember("old-fig"));
      await runTurn(s.client(), "Say hello.", { conversation_id: first.conversationId });
      await s.stop();
      // Back to schema 4 as that version wrote it: the history as one JSON value in sessions.context.
      const db = new DatabaseSync(s.dbFile, { timeout: 5000 });
      const sessions = db
        .prepare("SELECT id, history_tokens FROM sessions WHERE history_tokens IS NOT NULL")
        .all() as Array<{
        id: string;
        history_tokens: number;
      }>;
      expect(sessions.length).toBeGreaterThan(0);
      for (const session of sessions) {
        const messages = (
          db
            .prepare("SELECT message FROM session_messages WHERE session_id = ? ORDER BY seq")
            .all(session.id) as Array<{
            message: string;
          }>
        ).map((r) => JSON.parse(r.message));
        db.prepare("UPDATE sessions SET context = ? WHERE id = ?").run(
          JSON.stringify({ messages, tokens: session.history_tokens }),
          session.id,
        );
      }
      db.exec(
        "DROP TABLE session_messages; ALTER TABLE sessions DROP COLUMN history_tokens; ALTER TABLE sessions DROP COLUMN history_length; ALTER TABLE conversations DROP COLUMN generation; DROP TABLE conversation_generations; PRAGMA user_version = 4;",
      );
      db.close();

      restarted = await startTestServer({ sessionDelayMs: 0, dataDir: s.dataDir });
      const recall = await runTurn(restarted.client(), PHRASES.recall, {
        conversation_id: first.conversationId,
      });
      expect(recall.text).toBe("old-fig");
      const again = await runTurn(restarted.client(), PHRASES.recall, {
        conversation_id: first.conversationId,
      });
      expect(again.text).toBe("old-fig");
      const check = new DatabaseSync(s.dbFile, { readOnly: true, timeout: 5000 });
      try {
        expect(check.prepare("PRAGMA user_version").get()).toEqual({ user_version: SCHEMA_VERSION });
        // Two turns before, two after: eight messages, all in rows now.
        expect(check.prepare("SELECT COUNT(*) AS n FROM session_messages").get()).toEqual({ n: 8 });
      } finally {
        check.close();
      }
    } finally {
      await restarted?.close();
      await s.close();
    }
  });
});
