/**
 * A real full disk is the failing request's error, never a crash: the server's data directory on a small tmpfs
 * (mounted here as root), one workspace fills it with a tool command and forks, and each failing write gets
 * its own error (a tool error, a turn's error event, a fork's error answer) while the server keeps answering
 * every workspace's reads, and once the filler deletes its conversations the other workspace writes again.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkTurnStream } from "../../conformance/sse/grammar.ts";
import { KEYS, startTestServer, type TestServer } from "./helpers.ts";
import { sendTurn } from "./sandbox-server.ts";

const mountPoint = mkdtempSync(join(tmpdir(), "agent-api-full-disk-"));
let mounted = false;
let t: TestServer;

beforeAll(async () => {
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=48m,mode=0711", "tmpfs", mountPoint]);
  mounted = true;
  t = await startTestServer({
    dataDir: join(mountPoint, "data"),
    unsafeNoIsolation: true,
    sandboxUser: "server",
  });
});
afterAll(async () => {
  await t?.stop();
  if (mounted) execFileSync("umount", ["-l", mountPoint]);
  rmSync(mountPoint, { recursive: true, force: true });
});

function api(method: string, path: string, key: string, body?: unknown) {
  return fetch(`${t.url}${path}`, {
    method,
    headers: { "x-api-key": key, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

const RUN = (command: string) => `Use your tools to run the shell command: ${command}`;

describe("a full disk", () => {
  it("fails only the writes that hit it; the server keeps answering, and writes again once room is made", async () => {
    // The filler's command meets the full disk: a tool error, the turn itself goes on.
    const filler = await sendTurn(
      t.url,
      "demo-agent",
      RUN("head -c 60000000 /dev/zero > fill.bin; echo exit=$?"),
    );
    expect(filler.status).toBe(200);
    expect(JSON.stringify(filler.blocks)).toContain("No space left on device");
    // Its forks cannot be copied: each is that request's error, the API's envelope with Retry-After.
    for (let i = 0; i < 2; i++) {
      const fork = await api(
        "POST",
        `/api/agents/demo-agent/conversations/${filler.conversationId}/fork`,
        KEYS.admin,
        {},
      );
      expect(fork.status).toBe(503);
      expect(Number(fork.headers.get("retry-after"))).toBeGreaterThan(0);
      const body = (await fork.json()) as { error: { type: string; message: string } };
      expect(body.error.type).toBe("overloaded_error");
      expect(body.error.message).toMatch(/disk is full/);
    }
    // Another workspace's turn that needs the disk fails with that turn's own error, named: refused before its
    // stream opens (503, as the forks above) when the server meets the full disk while storing the turn, or an
    // error event of its stream when it meets it later. Which comes first is a race of the two writes.
    const other = await api("POST", "/api/agents/other-agent/v1/messages", KEYS.otherAdmin, {
      stream: true,
      messages: [{ role: "user", content: RUN("echo hello > a.txt && echo ok") }],
    });
    const otherText = await other.text();
    if (other.status === 503) {
      expect(Number(other.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(otherText).toMatch(/disk is full/);
    } else {
      expect(other.status).toBe(200);
      const error = checkTurnStream(otherText, { streamToolCalls: false }).events.find(
        (e) => e.name === "error",
      );
      if (error !== undefined) expect(JSON.stringify(error.data)).toMatch(/disk is full/);
    }
    // Every workspace's reads still answer.
    expect((await api("GET", "/api/agents/other-agent/v1/models", KEYS.otherAdmin)).status).toBe(200);
    expect((await api("GET", "/api/agents/demo-agent/conversations", KEYS.admin)).status).toBe(200);
    const transcript = await api(
      "GET",
      `/api/agents/demo-agent/conversations/${filler.conversationId}/messages`,
      KEYS.admin,
    );
    expect(transcript.status).toBe(200);
    await transcript.arrayBuffer();

    // The filler deletes its conversation: the other workspace writes again, on the same running server.
    expect(
      (await api("DELETE", `/api/agents/demo-agent/conversations/${filler.conversationId}`, KEYS.admin))
        .status,
    ).toBe(204);
    const after = await sendTurn(
      t.url,
      "other-agent",
      RUN("echo hello > b.txt && echo written"),
      {},
      KEYS.otherAdmin,
    );
    expect(after.status).toBe(200);
    expect(after.error).toBeUndefined();
    expect(JSON.stringify(after.blocks)).toContain("written");
  }, 120_000);
});
