/**
 * Each workspace's share of the server's pools, over real HTTP with real tool commands: while one
 * workspace holds its share (a long command in its only sandbox slot, its keys' turns and requests at their
 * caps), its own next command waits and its next turn gets 429 with Retry-After, while the other
 * workspace's requests, turns and commands go through. The old server had one pool for all: the other
 * workspace's work waited or failed with the first's. (Delays under load are measured by
 * `npm run test:noisy-neighbour`.)
 */
import { readdirSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoKeys } from "../demo/workspace.ts";
import {
  onlyToolResult,
  PHRASES,
  removeDir,
  type SandboxServer,
  sendTurn,
  startSandboxServer,
} from "../test/sandbox-server.ts";

let s: SandboxServer;

beforeAll(async () => {
  s = await startSandboxServer({
    limits: { sandboxCommandsPerWorkspace: 1, turnsPerKey: 1 },
  });
});
afterAll(async () => {
  await s?.close();
  if (s) await removeDir(s.dataDir);
});

/** Seconds of the holder's command: a number no other test's command uses, to find its process by. */
const HOLDER_SLEEP = 27;

/** Whether a `sleep <seconds>` process runs on the host (sandboxed ones included). */
function sleepRunning(seconds: string): boolean {
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0");
      if (args[0].endsWith("sleep") && args[1] === seconds) return true;
    } catch {}
  }
  return false;
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}

function request(pathname: string, key: string, init: RequestInit = {}) {
  return fetch(`${s.url}${pathname}`, { ...init, headers: { "x-api-key": key, ...init.headers } });
}

describe("a workspace's share of the pools", () => {
  it("one workspace at its shares: its own work waits or gets 429, the other workspace's goes through", async () => {
    const holder = `share-holder-${Date.now()}`;
    // The demo workspace's only sandbox slot and its admin key's only turn.
    const hangUp = new AbortController();
    const holding = request("/api/agents/demo-agent/v1/messages", demoKeys.admin, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: PHRASES.run(`sleep ${HOLDER_SLEEP}`) }],
        metadata: { conversation_id: holder },
      }),
      signal: hangUp.signal,
    })
      .then((response) => response.text().catch(() => ""))
      .catch(() => "");
    await until(() => sleepRunning(String(HOLDER_SLEEP)));

    // The admin key's second turn: 429 at once, with Retry-After (its key's share of turns is in use).
    const second = await request("/api/agents/demo-agent/v1/messages", demoKeys.admin, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
    });
    expect(second.status).toBe(429);
    expect(second.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(((await second.json()) as { message: string }).message).toMatch(/turns of this key/);

    // The same workspace's next command (another key, so its turn is admitted) waits for the slot.
    const waiter = `share-waiter-${Date.now()}`;
    const waiting = sendTurn(
      s.url,
      "demo-agent",
      PHRASES.run(`sleep 0.${HOLDER_SLEEP} ; echo waited`),
      { conversation_id: waiter, stream_tool_calls: true },
      demoKeys.member,
    );

    // The other workspace's command runs at once, while the first still holds the demo workspace's slot.
    const other = await sendTurn(
      s.url,
      "other-agent",
      PHRASES.run("echo other"),
      { stream_tool_calls: true },
      demoKeys.otherAdmin,
    );
    expect(onlyToolResult(other).content).toContain("other");
    // The waiting command has not started: its process never appeared.
    expect(sleepRunning(`0.${HOLDER_SLEEP}`)).toBe(false);

    // The holder's client hangs up, which ends its turn and command: the waiting command gets the slot.
    hangUp.abort();
    await holding;
    expect(onlyToolResult(await waiting).content).toContain("waited");
  });
});
