/**
 * `agent_session_id` over real HTTP with a 300 ms recording delay: null until recorded after a turn with
 * output, the API's race (a turn sent before the recording resumes with no memory and no error), a
 * resumed turn with no output clearing it, and concurrent turns on one conversation.
 */

import { AgentApiError } from "@agent-api/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEYS, PHRASES, runTurn, sleep, startTestServer, type TestServer, uid } from "./helpers.ts";

const DELAY_MS = 400;
let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({ sessionDelayMs: DELAY_MS });
});
afterAll(async () => {
  await t?.close();
});

async function readable(key: string, id: string) {
  try {
    return await t.client(key).getTranscript(id);
  } catch (error) {
    if (error instanceof AgentApiError && error.status === 404) return null;
    throw error;
  }
}

async function sessionOf(id: string): Promise<string | null> {
  return (await t.client().getConversation(id)).conversation.agent_session_id;
}

// Each test has its own conversations, so they run side by side (the recording delay dominates).
describe.concurrent("agent_session_id", () => {
  it("is null until recorded, about sessionDelayMs after a turn with output closes", async () => {
    const alice = t.client();
    const started = Date.now();
    const turn = await runTurn(alice, PHRASES.remember("late-kiwi"));
    expect(await sessionOf(turn.conversationId)).toBeNull();
    const waited = await alice.waitForSession(turn.conversationId, { intervalMs: 20, timeoutMs: 5000 });
    expect(waited.timedOut).toBe(false);
    expect(waited.agentSessionId).toEqual(expect.any(String));
    expect(Date.now() - started).toBeGreaterThanOrEqual(DELAY_MS - 20);
    expect(await sessionOf(turn.conversationId)).toBe(waited.agentSessionId);
    // Once recorded, resuming remembers.
    const recall = await runTurn(alice, PHRASES.recall, { conversation_id: turn.conversationId });
    expect(recall.text).toBe("late-kiwi");
    // A resumed turn with output keeps a session.
    expect(await sessionOf(turn.conversationId)).not.toBeNull();
  });

  it("a turn sent before it was recorded resumes with no memory and no error", async () => {
    const alice = t.client();
    const first = await runTurn(alice, PHRASES.remember("too-soon"));
    const second = await runTurn(alice, PHRASES.recall, { conversation_id: first.conversationId });
    expect(second.status).toBe(200);
    expect(second.events.at(-1)?.type).toBe("message_stop");
    expect(second.text).toBe("I don't know");
    const transcript = await alice.getTranscript(first.conversationId);
    expect(transcript.conversation.turn_count).toBe(2);
    expect(transcript.messages.map((m) => m.content[0].text)).toEqual([
      PHRASES.remember("too-soon"),
      "OK",
      PHRASES.recall,
      "I don't know",
    ]);
    // The newer turn's session is the one recorded; it never learnt the word.
    await alice.waitForSession(first.conversationId, { intervalMs: 20, timeoutMs: 5000 });
    expect((await runTurn(alice, PHRASES.recall, { conversation_id: first.conversationId })).text).toBe(
      "I don't know",
    );
  });

  it("a resumed turn with no output clears it to null, and the next turn starts a clean session", async () => {
    const alice = t.client();
    const first = await runTurn(alice, PHRASES.remember("cleared"));
    const id = first.conversationId;
    const recorded = await alice.waitForSession(id, { intervalMs: 20, timeoutMs: 5000 });
    expect(recorded.agentSessionId).not.toBeNull();

    const empty = await runTurn(alice, PHRASES.noOutput, { conversation_id: id });
    expect(empty.status).toBe(200);
    expect(empty.events.map((e) => e.type)).toEqual(["message_start", "message_delta", "message_stop"]);
    expect(await sessionOf(id)).toBeNull();
    await sleep(DELAY_MS + 100);
    expect(await sessionOf(id)).toBeNull();
    // The empty turn is still a turn of the transcript: its prompt, no answer.
    const transcript = await alice.getTranscript(id);
    expect(transcript.conversation.turn_count).toBe(2);
    expect(transcript.messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(await alice.getLastCompaction(id)).toEqual({ compacted: false, summary: "" });

    const next = await runTurn(alice, PHRASES.recall, { conversation_id: id });
    expect(next.text).toBe("I don't know");
    const waited = await alice.waitForSession(id, { intervalMs: 20, timeoutMs: 5000 });
    expect(waited.agentSessionId).not.toBeNull();
    expect(waited.agentSessionId).not.toBe(recorded.agentSessionId);
  });

  it("a first turn with no output never gets one; waitForSession times out and the retry works", async () => {
    const alice = t.client();
    const empty = await runTurn(alice, PHRASES.noOutput);
    const waited = await alice.waitForSession(empty.conversationId, {
      intervalMs: 50,
      timeoutMs: DELAY_MS + 200,
    });
    expect(waited).toEqual({ agentSessionId: null, timedOut: true });
    const retry = await runTurn(alice, "Try again.", { conversation_id: empty.conversationId });
    expect(retry.text).toBe("You said: Try again.");
    expect((await alice.waitForSession(empty.conversationId, { intervalMs: 20 })).timedOut).toBe(false);
  });

  it("a recording still pending when the conversation is deleted never lands on a new conversation with that id", async () => {
    const alice = t.client();
    const parent = await runTurn(alice, PHRASES.remember("parent-word"));
    const doomed = await runTurn(alice, PHRASES.remember("doomed-word"));
    await alice.deleteConversation(doomed.conversationId);
    // The id is reused at once by a fork, which records its own session without running a turn.
    const fork = await alice.fork(parent.conversationId, { conversation_id: doomed.conversationId });
    await sleep(DELAY_MS + 150);
    expect(await sessionOf(doomed.conversationId)).toBe(fork.agent_session_id);
    expect((await runTurn(alice, PHRASES.recall, { conversation_id: doomed.conversationId })).text).toBe(
      "parent-word",
    );
  });
});

describe("concurrent turns on one conversation", () => {
  it("never corrupt the transcript: every turn is stored whole, in some order, with its own answer", async () => {
    const alice = t.client();
    const id = uid("concurrent");
    await runTurn(alice, "opening", { conversation_id: id });
    const prompts = Array.from({ length: 6 }, (_, i) => `parallel prompt ${i}`);
    const results = await Promise.all(prompts.map((p) => runTurn(alice, p, { conversation_id: id })));
    for (const [i, r] of results.entries()) {
      expect(r.status).toBe(200);
      expect(r.conversationId).toBe(id);
      expect(r.text).toBe(`You said: ${prompts[i]}`);
      expect(r.events.at(-1)?.type).toBe("message_stop");
    }
    const transcript = await alice.getTranscript(id);
    expect(transcript.conversation.turn_count).toBe(7);
    const texts = transcript.messages.map((m) => [m.role, m.content[0].text]);
    expect(texts).toHaveLength(14);
    for (let i = 0; i < texts.length; i += 2) {
      expect(texts[i][0]).toBe("user");
      expect(texts[i + 1]).toEqual(["assistant", `You said: ${texts[i][1]}`]);
    }
    expect(
      texts
        .filter(([role]) => role === "user")
        .map(([, text]) => text)
        .sort(),
    ).toEqual(["opening", ...prompts].sort());
    // The raw events carry one turn index per turn, 0..6, each once.
    const turnIndexes = (transcript.events as Array<{ turn_index: number }>).map((e) => e.turn_index);
    expect([...new Set(turnIndexes)].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });

  it("two members racing to create the same new id: one gets the conversation, the other a 404", async () => {
    const id = uid("race");
    const outcome = async (key: string) => {
      try {
        const r = await runTurn(t.client(key), `from ${key}`, { conversation_id: id });
        return r.status;
      } catch (error) {
        if (error instanceof AgentApiError) return error.status;
        throw error;
      }
    };
    const statuses = await Promise.all([outcome(KEYS.admin), outcome(KEYS.member)]);
    expect([...statuses].sort()).toEqual([200, 404]);
    const winner = (await Promise.all([KEYS.admin, KEYS.member].map((key) => readable(key, id)))).flatMap(
      (transcript, i) => (transcript ? [{ key: i === 0 ? "alice" : "bob", transcript }] : []),
    );
    expect(winner).toHaveLength(1);
    const { key, transcript } = winner[0];
    expect(transcript.conversation.turn_count).toBe(1);
    expect(transcript.messages.map((m) => m.author_user_id ?? null)).toEqual([key, null]);
  });

  it("a client that goes away mid-turn does not block the next turn", async () => {
    const alice = t.client();
    const id = uid("abandoned");
    const abort = new AbortController();
    const turn = await alice.sendMessage(
      {
        // Long enough that a next turn waiting for it is told apart from a slow machine.
        messages: [{ role: "user", content: "Use your tools to run the shell command: sleep 30" }],
        metadata: { conversation_id: id },
      },
      { signal: abort.signal },
    );
    const iterator = turn[Symbol.asyncIterator]();
    expect((await iterator.next()).value?.type).toBe("message_start");
    abort.abort();
    const started = Date.now();
    const next = await runTurn(alice, "still here?", { conversation_id: id });
    expect(next.text).toBe("You said: still here?");
    expect(Date.now() - started).toBeLessThan(10_000);
    const transcript = await alice.getTranscript(id);
    expect(transcript.conversation.turn_count).toBe(2);
    expect(transcript.messages.at(-1)?.content[0].text).toBe("You said: still here?");
  });
});
