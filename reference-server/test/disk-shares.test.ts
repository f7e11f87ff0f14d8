/**
 * Each workspace's disk share, over real HTTP with real tool commands and a real SQLite file: a Viewer forks a
 * large conversation shared with it until its workspace's share is full, then gets the API's 429 with
 * Retry-After for its writes (forks, and its workspace's turns), while its reads still answer and another
 * workspace's forks and tool turns go on. The old server copied every fork in full with no share.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEYS, startTestServer, type TestServer } from "./helpers.ts";
import { sendTurn } from "./sandbox-server.ts";

const MiB = 1024 * 1024;
const SHARE = 6 * MiB;

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({
    unsafeNoIsolation: true,
    sandboxUser: "server",
    limits: { diskBytesPerWorkspace: SHARE },
  });
});
afterAll(async () => {
  await t?.close();
});

function api(method: string, path: string, key: string, body?: unknown) {
  return fetch(`${t.url}${path}`, {
    method,
    headers: { "x-api-key": key, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

const RUN = (command: string) => `Use your tools to run the shell command: ${command}`;

describe("a workspace's disk share", () => {
  it("forks of a large shared conversation fill only the forker's workspace: it gets 429, the other workspace goes on", async () => {
    // A conversation of about 1.5 MiB: a file of 1 MiB in its working directory, a prompt of 0.5 MiB.
    const big = await sendTurn(
      t.url,
      "demo-agent",
      RUN("head -c 1048576 /dev/urandom > big.bin && echo done"),
    );
    expect(big.status).toBe(200);
    expect(big.error).toBeUndefined();
    const padding = "x".repeat(512 * 1024);
    const second = await sendTurn(t.url, "demo-agent", `Reply with OK. ${padding}`, {
      conversation_id: big.conversationId,
    });
    expect(second.status).toBe(200);
    const shared = await api(
      "POST",
      `/api/agents/demo-agent/conversations/${big.conversationId}`,
      KEYS.admin,
      {
        shared: true,
      },
    );
    expect(shared.status).toBe(200);

    // The Viewer forks until refused: each fork is a full copy in its workspace.
    const statuses: number[] = [];
    const forks: string[] = [];
    let refusal: Response | undefined;
    for (let i = 0; i < 12 && refusal === undefined; i++) {
      const fork = await api(
        "POST",
        `/api/agents/demo-agent/conversations/${big.conversationId}/fork`,
        KEYS.viewer,
        {},
      );
      statuses.push(fork.status);
      if (fork.status !== 200) refusal = fork;
      else forks.push(((await fork.json()) as { conversation_id: string }).conversation_id);
    }
    expect(statuses.filter((status) => status === 200).length).toBeGreaterThanOrEqual(1);
    expect(refusal?.status).toBe(429);
    expect(Number(refusal?.headers.get("retry-after"))).toBeGreaterThan(0);
    const body = (await refusal?.json()) as { type: string; error: { type: string; message: string } };
    expect(body.type).toBe("error");
    expect(body.error.type).toBe("rate_limit_error");
    expect(body.error.message).toMatch(/disk share/);

    // The workspace's other writes that do not fit are refused too (the share is the workspace's, whichever
    // key writes), its reads are not.
    const turn = await api("POST", "/api/agents/demo-agent/v1/messages", KEYS.admin, {
      stream: true,
      messages: [{ role: "user", content: `Reply with OK. ${"y".repeat(2 * MiB)}` }],
    });
    expect(turn.status).toBe(429);
    await turn.arrayBuffer();
    const read = await api(
      "GET",
      `/api/agents/demo-agent/conversations/${big.conversationId}/messages`,
      KEYS.viewer,
    );
    expect(read.status).toBe(200);
    await read.arrayBuffer();

    // The other workspace: its forks and its tool turns go on.
    const own = await sendTurn(
      t.url,
      "other-agent",
      RUN("head -c 1048576 /dev/urandom > mine.bin && echo stored"),
      {},
      KEYS.otherAdmin,
    );
    expect(own.status).toBe(200);
    expect(own.error).toBeUndefined();
    for (let i = 0; i < 3; i++) {
      const fork = await api(
        "POST",
        `/api/agents/other-agent/conversations/${own.conversationId}/fork`,
        KEYS.otherAdmin,
        {},
      );
      expect(fork.status).toBe(200);
      const { conversation_id } = (await fork.json()) as { conversation_id: string };
      const tool = await sendTurn(
        t.url,
        "other-agent",
        RUN("ls -l mine.bin && echo listed"),
        { conversation_id },
        KEYS.otherAdmin,
      );
      expect(tool.status).toBe(200);
      expect(tool.error).toBeUndefined();
      expect(tool.text + JSON.stringify(tool.blocks)).toContain("listed");
    }

    // A delete gives the room back at once: the Viewer's next fork fits again.
    for (const id of forks) {
      const gone = await api("DELETE", `/api/agents/demo-agent/conversations/${id}`, KEYS.viewer);
      expect(gone.status).toBe(204);
    }
    const again = await api(
      "POST",
      `/api/agents/demo-agent/conversations/${big.conversationId}/fork`,
      KEYS.viewer,
      {},
    );
    expect(again.status).toBe(200);
  }, 120_000);
});
