/**
 * Nothing a turn makes outlives it (issue 13), over real HTTP and a real SQLite file: after a burst of
 * concurrent turns (completed, failed, cut by their client, cut by a delete) every per-turn and
 * per-conversation figure the server holds is back to 0, and no turn arms a timer or signal that Node keeps
 * alive past the turn (`AbortSignal.timeout`, `AbortSignal.any`).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { StreamErrorEventError } from "../../client/index.ts";
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
      pendingRecordings: 0,
    });
    expect(timeout).not.toHaveBeenCalled();
    expect(any).not.toHaveBeenCalled();
  });

  it("a turn still times out, and its timer is gone with it", async () => {
    const short = await startTestServer({ sessionDelayMs: 0, turnTimeoutMs: 300, maxIterations: 1_000_000 });
    try {
      await expect(runTurn(short.client(), "Keep using your tools without end.")).rejects.toThrow(
        /timed out/,
      );
      expect(short.server.live()).toEqual({
        runningTurns: 0,
        turnTimers: 0,
        conversationLocks: 0,
        pendingRecordings: 0,
      });
    } finally {
      await short.close();
    }
  });
});
