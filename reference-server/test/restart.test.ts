/**
 * Durability across a restart: stop the server, start a new one on the same data directory, and every
 * conversation, transcript, session pointer and sharing flag is still there and resumable.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createAgentClient } from "@agent-api/client";
import { afterAll, describe, expect, it } from "vitest";
import { SOURCE_CONDITION_FLAG } from "../../scripts/source-condition.ts";
import { KEYS, PHRASES, runTurn, sleep, startTestServer, type TestServer } from "./helpers.ts";

const servers: TestServer[] = [];

afterAll(async () => {
  // Stop everything, then remove the (shared) data directory once.
  for (const s of servers) await s.stop();
  await servers[0]?.close();
});

async function everything(server: TestServer) {
  const result: Record<string, unknown> = {};
  for (const [key, agent] of [
    [KEYS.admin, "demo-agent"],
    [KEYS.member, "demo-agent"],
    [KEYS.admin, "notes-agent"],
  ] as const) {
    const client = server.client(key, agent);
    const { conversations } = await client.listConversations({ limit: 200 });
    result[`${key}/${agent}`] = await Promise.all(
      conversations.map(async (c) => ({
        transcript: await client.getTranscript(c.id),
        compaction: await client.getLastCompaction(c.id),
      })),
    );
  }
  return result;
}

describe("restart on the same data directory", () => {
  it("keeps every conversation and transcript, and resumes them", async () => {
    // Tools (their outputs fill the budget) run unisolated where bubblewrap does not work.
    const first = await startTestServer({ compactionBudgetTokens: 500, unsafeNoIsolation: true });
    servers.push(first);
    const alice = first.client();
    const bob = first.client(KEYS.member);

    const remembered = (await runTurn(alice, PHRASES.remember("durable-kiwi"))).conversationId;
    await alice.waitForSession(remembered, { intervalMs: 20, timeoutMs: 3000 });
    await runTurn(alice, "Second turn.", { conversation_id: remembered });

    const bobShared = (await runTurn(bob, PHRASES.remember("bob-word"))).conversationId;
    await bob.setSharing(bobShared, true);
    await bob.waitForSession(bobShared, { intervalMs: 20, timeoutMs: 3000 });
    const fork = await alice.fork(bobShared, { model: "demo-small" });

    const notes = (await runTurn(first.client(KEYS.admin, "notes-agent"), "A notes conversation."))
      .conversationId;

    const compacted = "restart-compacted";
    for (const word of ["c-one", "c-two", "c-three"]) {
      await runTurn(alice, `${PHRASES.remember(word)} ${"Padding. ".repeat(12)}`, {
        conversation_id: compacted,
      });
      await alice.waitForSession(compacted, { intervalMs: 20, timeoutMs: 3000 });
    }
    expect((await alice.getLastCompaction(compacted)).compacted).toBe(true);

    const before = await everything(first);
    // A last turn whose session recording is still pending when the server stops, right after it.
    const pending = (await runTurn(alice, PHRASES.remember("pending-word"))).conversationId;
    await first.stop();

    const second = await startTestServer({
      dataDir: first.dataDir,
      compactionBudgetTokens: 500,
      unsafeNoIsolation: true,
    });
    servers.push(second);
    const after = await everything(second);
    const withoutPending = (x: Record<string, unknown>) =>
      Object.fromEntries(
        Object.entries(x).map(([k, v]) => [
          k,
          (v as Array<{ transcript: { conversation: { id: string } } }>).filter(
            (e) => e.transcript.conversation.id !== pending,
          ),
        ]),
      );
    // Also the demo's seeded conversations: the second start did not seed them again.
    expect(withoutPending(after)).toEqual(before);
    const alice2 = second.client();
    const ids = (await alice2.listConversations({ limit: 200 })).conversations.map((c) => c.id);
    expect(ids).toEqual(
      expect.arrayContaining([remembered, bobShared, fork.conversation_id, compacted, pending]),
    );
    expect(
      (await second.client(KEYS.admin, "notes-agent").getConversation(notes)).conversation.turn_count,
    ).toBe(1);

    // Sessions survive: resumed turns remember, also across a compaction and in a fork.
    expect((await runTurn(alice2, PHRASES.recall, { conversation_id: remembered })).text).toBe(
      "durable-kiwi",
    );
    expect((await runTurn(alice2, PHRASES.recall, { conversation_id: compacted })).text).toBe("c-three");
    expect((await runTurn(alice2, PHRASES.recall, { conversation_id: fork.conversation_id })).text).toBe(
      "bob-word",
    );
    expect((await runTurn(alice2, PHRASES.whichModel, { conversation_id: fork.conversation_id })).text).toBe(
      "demo-small",
    );
    // Sharing and ownership survive: bob's shared conversation is readable by alice, not writable.
    const shared = await alice2.getConversation(bobShared);
    expect(shared.conversation).toMatchObject({ shared: true, is_owner: false });
    // The turn whose recording was pending is stored, but lost its pointer (README: pending recordings are
    // in memory), which the API allows: the next turn has no memory, and no error.
    const pendingConversation = (await alice2.getTranscript(pending)).conversation;
    expect(pendingConversation).toMatchObject({ turn_count: 1, agent_session_id: null });
    const afterPending = await runTurn(alice2, PHRASES.recall, { conversation_id: pending });
    expect(afterPending.status).toBe(200);
    expect(afterPending.text).toBe("I don't know");

    // Turn indexes go on from where they were.
    const transcript = await alice2.getTranscript(remembered);
    expect(transcript.conversation.turn_count).toBe(3);
    expect(transcript.messages).toHaveLength(6);
  });

  // Needs a tool that runs for a while.
  it("a server killed with SIGKILL in the middle of a turn restarts with every completed turn intact, and the interrupted turn recorded", {
    tags: ["sandbox"],
    timeout: 90_000,
  }, async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "agent-api-kill-"));
    const child = spawn(
      process.execPath,
      [
        SOURCE_CONDITION_FLAG,
        fileURLToPath(new URL("../../conformance/cli/agent-api.ts", import.meta.url)),
        "serve",
        "--port",
        "0",
        "--data",
        dataDir,
        "--session-delay-ms",
        "50",
        "--log-level",
        "warn",
      ],
      { stdio: ["ignore", "pipe", "ignore"] },
    );
    // Not --env-file: Node itself reads that flag even after the script name (nodejs/node#54232).
    let output = "";
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (chunk: string) => {
      output += chunk;
    });
    try {
      let url: string | undefined;
      // Up to 20 s: a loaded 2-core machine took more than 5 s to start the server (type stripping, Fastify,
      // the sandbox probes).
      for (let i = 0; i < 800 && !url; i++) {
        await sleep(25);
        url = /listening on (http:\/\/\S+)/.exec(output)?.[1];
      }
      expect(url).toBeDefined();
      const alice = createAgentClient({ baseUrl: url as string, apiKey: KEYS.admin, agent: "demo-agent" });
      const id = "killed-mid-turn";
      await runTurn(alice, PHRASES.remember("survivor"), { conversation_id: id });
      await alice.waitForSession(id, { intervalMs: 20, timeoutMs: 3000 });
      await runTurn(alice, "Second completed turn.", { conversation_id: id });
      const completed = await alice.getTranscript(id);

      // A turn in flight (its tool sleeps) when the process is killed.
      const inFlight = await alice.sendMessage({
        messages: [{ role: "user", content: "Use your tools to run the shell command: sleep 5" }],
        metadata: { conversation_id: id },
      });
      const reading = (async () => {
        try {
          for await (const _ of inFlight) {
            // drain until the connection dies
          }
        } catch {
          // expected: the stream is cut
        }
      })();
      // Killed the moment the 200 arrived: what that 200 acknowledged must already be on disk.
      child.kill("SIGKILL");
      await once(child, "exit");
      await reading;

      const second = await startTestServer({ dataDir });
      servers.push(second);
      const after = await second.client().getTranscript(id);
      // Nothing acknowledged is lost: the interrupted turn is recorded like a disconnected one, with the
      // user's message kept and an error event; the completed turns are untouched.
      expect(after.messages).toEqual([
        ...completed.messages,
        {
          role: "user",
          content: [{ type: "text", text: "Use your tools to run the shell command: sleep 5" }],
          author_user_id: "alice",
          author_name: "Alice Admin",
          is_compact_summary: false,
        },
      ]);
      expect(after.conversation.turn_count).toBe(3);
      expect(after.events.at(-1)).toMatchObject({
        turn_index: 2,
        type: "error",
        code: "AGENT_API_SERVER_STOPPED",
      });
      // The session is the last completed turn's: memory survives, and the conversation goes on.
      expect((await runTurn(second.client(), PHRASES.recall, { conversation_id: id })).text).toBe("survivor");
      expect((await second.client().getConversation(id)).conversation.turn_count).toBe(4);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await rm(dataDir, { recursive: true, force: true }).catch(() => undefined);
    }
  });
});
