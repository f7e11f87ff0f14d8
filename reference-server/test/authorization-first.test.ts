/**
 * Authorization before any wait: a send naming a conversation of another workspace (or one the caller may not
 * write) is refused before the conversation's turn lock is asked for, so it never queues behind the owner's
 * running turn, never fills the owner's waiting line, and its answer does not tell when the owner was busy.
 * A real server on loopback with a small waiting line (2 per conversation).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEYS, startTestServer, type TestServer } from "./helpers.ts";
import { sleep } from "./sandbox-server.ts";

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({
    unsafeNoIsolation: true,
    sandboxUser: "server",
    limits: { waitingTurnsPerConversation: 2 },
  });
});

afterAll(async () => {
  await t.close();
});

const SLEEP = (s: number) => `Use your tools to run the shell command: sleep ${s}`;

async function send(agent: string, key: string, prompt: string, conversationId: string) {
  const response = await fetch(`${t.url}/api/agents/${agent}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json" },
    body: JSON.stringify({
      stream: true,
      messages: [{ role: "user", content: prompt }],
      metadata: { conversation_id: conversationId },
    }),
  });
  return { status: response.status, body: await response.text() };
}

describe("a refused request costs the owner nothing", () => {
  it("another workspace's and a Viewer's sends on a running conversation get their answer at once, and the owner's next turn runs", async () => {
    const id = `owner-busy-${Date.now()}`;
    let ownerDone = false;
    const owner = fetch(`${t.url}/api/agents/demo-agent/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": KEYS.admin, "content-type": "application/json" },
      body: JSON.stringify({
        stream: true,
        messages: [{ role: "user", content: SLEEP(4) }],
        metadata: { conversation_id: id },
      }),
    }).then(async (response) => {
      expect(response.status).toBe(200);
      const body = await response.text();
      ownerDone = true;
      return body;
    });
    for (let i = 0; i < 200 && t.server.live().runningTurns < 1; i++) await sleep(10);
    expect(t.server.live().runningTurns).toBe(1);

    // More than the waiting line holds: another workspace's key on its own agent, a Viewer of the owner's.
    const refused = await Promise.all([
      ...Array.from({ length: 4 }, () => send("other-agent", KEYS.otherAdmin, "Say hi.", id)),
      send("demo-agent", KEYS.viewer, "Say hi.", id),
      // Another member of the owner's workspace, who cannot see a private conversation.
      send("demo-agent", KEYS.member, "Say hi.", id),
    ]);
    expect(ownerDone).toBe(false);
    expect(refused.map((reply) => reply.status)).toEqual([404, 404, 404, 404, 403, 404]);
    expect(t.server.live().waitingTurns).toBe(0);

    // The owner's own next turn waits its turn, as the only one in the line, and runs.
    const next = await send("demo-agent", KEYS.admin, "Say one.", id);
    expect(next.status).toBe(200);
    expect(next.body).toContain("event: message_stop");
    expect(await owner).toContain("event: message_stop");
  }, 30_000);
});
