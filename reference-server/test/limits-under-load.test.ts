/**
 * The server under a flood, as one tenant could send it: `agent-api serve` in a child process, its memory
 * read from /proc/<pid>/status (VmRSS), while another workspace's `GET …/v1/models` is timed.
 *
 * - While one turn runs on a conversation, FLOOD_REQUESTS send-message requests of FLOOD_BODY_BYTES each
 *   to that conversation (the attack that took the old server's heap to 4.4 GB and a V8 abort). Before
 *   the caps every one was read, parsed and held waiting for the conversation's lock: 130 × 16 MiB is
 *   over 2 GiB of bodies, past RSS_BOUND_BYTES. Now the body bytes a key may hold bound them (429 before
 *   the body is read) and the waiting turns of a conversation are capped.
 * - Slow clients: bodies trickled and heads left unfinished end with the request time-out; a turn's
 *   stream that lasts longer than that time-out is not cut by it.
 * - The stream of a quiet turn gets its first keep-alive comment early enough for a 10 s proxy idle
 *   time-out, and a stream cut mid-turn is logged at warn with how far it got.
 */

import { mkdtemp, readFile, rm } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEYS } from "./helpers.ts";
import { type ServeCommand, sleep, startServeCommand } from "./sandbox-server.ts";

const BIN = fileURLToPath(new URL("../../bin/agent-api", import.meta.url));
const MiB = 1024 * 1024;
/** The flood of the attack (129 waiting requests of 32 MiB), at half the body size to keep the test short. */
const FLOOD_REQUESTS = 130;
const FLOOD_BODY_BYTES = 16 * MiB;
/** The server's resident memory must stay below this under the flood (it idles near 150 MB). */
const RSS_BOUND_BYTES = 1024 * MiB;
/** Another workspace's request waits at most this long while the flood is served (~0.7 s measured on a busy machine). */
const OTHER_TENANT_DELAY_BOUND_MS = 5_000;
const REQUEST_TIMEOUT_MS = 3_000;
const HEADERS_TIMEOUT_MS = 1_500;

let dir: string;
let server: ServeCommand;
let host: string;
let port: number;

/** `agent-api serve` with the demo in data directory `name`, its deadlines short for the test. */
async function serve(name: string): Promise<ServeCommand> {
  const served = await startServeCommand([
    BIN,
    "serve",
    "--demo",
    "--data",
    join(dir, name),
    "--port",
    "0",
    // The long turn needs a tool, not isolation: where bubblewrap does not work, it runs unisolated.
    "--unsafe-no-isolation",
    "--sandbox-user",
    "server",
    "--request-timeout-ms",
    String(REQUEST_TIMEOUT_MS),
    "--headers-timeout-ms",
    String(HEADERS_TIMEOUT_MS),
  ]);
  return served;
}

function kill(served: ServeCommand): void {
  try {
    process.kill(-served.pid, "SIGKILL");
  } catch {}
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "limits-under-load-"));
  server = await serve("shared");
  const url = new URL(server.url);
  host = url.hostname;
  port = Number(url.port);
}, 60_000);

afterAll(async () => {
  if (server) kill(server);
  await sleep(200);
  await rm(dir, { recursive: true, force: true });
});

async function rssBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  return Number(kb) * 1024;
}

/** Samples the server's RSS until stopped; resolves with the peak. */
function sampleRss(pid: number): { stop(): Promise<number> } {
  let peak = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      peak = Math.max(peak, await rssBytes(pid).catch(() => Number.POSITIVE_INFINITY));
      await sleep(25);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return peak;
    },
  };
}

/** Times another workspace's `GET …/v1/models` every 100 ms until stopped; resolves with the slowest. */
function probeOtherTenant(target: ServeCommand = server): {
  stop(): Promise<{ slowestMs: number; statuses: number[] }>;
} {
  const statuses: number[] = [];
  let slowestMs = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      const response = await fetch(`${target.url}/api/agents/other-agent/v1/models`, {
        headers: { "x-api-key": KEYS.otherAdmin },
        signal: AbortSignal.timeout(30_000),
      }).catch(() => undefined);
      await response?.arrayBuffer();
      statuses.push(response?.status ?? 0);
      slowestMs = Math.max(slowestMs, Date.now() - started);
      await sleep(100);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { slowestMs, statuses };
    },
  };
}

interface OpenTurn {
  conversationId: string;
  /** Milliseconds from the response head to each SSE frame (comments as ": …"). */
  frames: Array<{ at: number; text: string }>;
  done: Promise<void>;
  cancel(): void;
}

/** Starts a turn and reads its stream in the background (resolves once the head arrived). */
async function openTurn(
  prompt: string,
  metadata: Record<string, unknown> = {},
  target: ServeCommand = server,
): Promise<OpenTurn> {
  const abort = new AbortController();
  const response = await fetch(`${target.url}/api/agents/demo-agent/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": KEYS.admin, "content-type": "application/json" },
    body: JSON.stringify({ stream: true, messages: [{ role: "user", content: prompt }], metadata }),
    signal: abort.signal,
  });
  expect(response.status).toBe(200);
  const started = Date.now();
  const frames: OpenTurn["frames"] = [];
  const done = (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end = buffer.indexOf("\n\n");
        while (end >= 0) {
          frames.push({ at: Date.now() - started, text: buffer.slice(0, end) });
          buffer = buffer.slice(end + 2);
          end = buffer.indexOf("\n\n");
        }
      }
    } catch {
      // cancelled
    }
  })();
  return {
    conversationId: response.headers.get("x-conversation-id") ?? "",
    frames,
    done,
    cancel: () => abort.abort(),
  };
}

interface FloodResult {
  status: number;
  retryAfter?: string;
  body: string;
}

/**
 * One raw send-message request of `body` to `url`; resolves once the server answered. `onSent` is called
 * once the whole body is sent (an admitted request then waits for the lock, answered after the long turn).
 */
function floodRequest(url: URL, body: Buffer, onSent: () => void): Promise<FloodResult> {
  return new Promise((resolve) => {
    const request = httpRequest({
      host: url.hostname,
      port: Number(url.port),
      method: "POST",
      path: "/api/agents/demo-agent/v1/messages",
      agent: false,
      // Another member's key: a cheap 404 (alice's conversation is private), decided before the lock is asked for.
      headers: {
        "x-api-key": KEYS.member,
        "content-type": "application/json",
        "content-length": body.length,
      },
    });
    request.on("response", (response) => {
      let text = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        if (text.length < 4096) text += chunk;
        // A 200 is an admitted turn streaming: its head is enough.
        if (response.statusCode === 200) response.destroy();
      });
      const done = () =>
        resolve({
          status: response.statusCode ?? 0,
          retryAfter: response.headers["retry-after"],
          body: text,
        });
      response.on("end", done);
      response.on("close", done);
    });
    // The server may close the connection once it refused the request, before the body is all sent.
    request.on("error", () => resolve({ status: 0, body: "" }));
    request.on("finish", onSent);
    request.end(body);
  });
}

function floodBody(conversationId: string, bytes: number): Buffer {
  const head = `{"stream":true,"metadata":{"conversation_id":"${conversationId}"},"messages":[{"role":"user","content":"`;
  const tail = `"}]}`;
  return Buffer.concat([
    Buffer.from(head),
    Buffer.alloc(bytes - head.length - tail.length, "a"),
    Buffer.from(tail),
  ]);
}

describe("limits under load", () => {
  it("a flood of large send-message requests to a busy conversation: memory stays bounded, others keep answering, refusals are 429 with Retry-After", async () => {
    // A server of its own, killed at the end: the flood's admitted requests still wait for the lock.
    const flooded = await serve("flood");
    const long = await openTurn("Use your tools to run the shell command: sleep 30", {}, flooded);
    const rss = sampleRss(flooded.pid);
    const probe = probeOtherTenant(flooded);
    const body = floodBody(long.conversationId, FLOOD_BODY_BYTES);
    let sent = 0;
    const results: FloodResult[] = [];
    const pending = Array.from({ length: FLOOD_REQUESTS }, () =>
      floodRequest(new URL(flooded.url), body, () => sent++).then((result) => {
        results.push(result);
      }),
    );
    // Settled: every request answered or, admitted, all its body read (it now waits for the lock).
    const deadline = Date.now() + 60_000;
    while (results.length + sent < FLOOD_REQUESTS && results.length < FLOOD_REQUESTS && Date.now() < deadline)
      await sleep(50);
    // The bodies read last are parsed a moment after they were sent.
    await sleep(1_000);
    const peak = await rss.stop();
    const other = await probe.stop();
    long.cancel();
    await long.done;
    kill(flooded);
    void Promise.allSettled(pending);

    console.log(
      `flood: ${FLOOD_REQUESTS} × ${FLOOD_BODY_BYTES / MiB} MiB; peak RSS ${Math.round(peak / MiB)} MiB; ` +
        `other tenant's slowest models request ${other.slowestMs} ms; ` +
        `answers ${JSON.stringify(
          Object.groupBy(results, (r) => String(r.status)),
          (k, v) =>
            k === ""
              ? Object.fromEntries(Object.entries(v as object).map(([s, l]) => [s, (l as unknown[]).length]))
              : v,
        )}, bodies read in full ${sent}`,
    );
    expect(peak).toBeLessThan(RSS_BOUND_BYTES);
    expect(other.statuses.every((s) => s === 200)).toBe(true);
    expect(other.slowestMs).toBeLessThan(OTHER_TENANT_DELAY_BOUND_MS);
    // Refused: a 429; an admitted body that took longer than the request time-out (the test's own process
    // writes them all at once): 408; an admitted body read in full: 404 at once, without waiting for the lock
    // (another member may not write alice's conversation); rarely a connection closed before its answer was
    // read. Nothing else.
    const refused = results.filter((r) => r.status === 429);
    expect(results.filter((r) => ![429, 408, 404, 0].includes(r.status))).toEqual([]);
    expect(results.length).toBeGreaterThan(FLOOD_REQUESTS - 20);
    expect(refused.length).toBeGreaterThan(10);
    for (const refusal of refused) {
      expect(Number(refusal.retryAfter)).toBeGreaterThan(0);
      expect(JSON.parse(refusal.body)).toMatchObject({
        type: "error",
        error: { type: "rate_limit_error", message: expect.any(String) },
      });
    }
  }, 120_000);
});

// Side by side on the shared server (the keep-alive test mostly waits): the file stays near 12 s.
describe.concurrent("slow clients, keep-alives, stream logs and headers", () => {
  it("slow clients are cut by the request time-out, a turn streaming longer than it is not, and the server keeps answering", async () => {
    const rss = sampleRss(server.pid);
    const probe = probeOtherTenant();
    // A turn streaming for longer than the request time-out: only receiving the request is timed.
    const long = await openTurn(
      `Use your tools to run the shell command: sleep ${REQUEST_TIMEOUT_MS / 1000 + 1}`,
    );
    const started = Date.now();
    // Slow bodies: a 4 MiB body declared, a few bytes a second sent.
    const slowBodies = Array.from({ length: 40 }, () => {
      const socket = connect(port, host);
      const ended = new Promise<{ ms: number; answer: string }>((resolve) => {
        let answer = "";
        socket.on("data", (chunk) => {
          answer += chunk.toString("latin1");
        });
        socket.on("close", () => resolve({ ms: Date.now() - started, answer }));
        socket.on("error", () => undefined);
      });
      socket.write(
        `POST /api/agents/demo-agent/v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${KEYS.admin}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${4 * MiB}\r\n\r\n{"stream":true,`,
      );
      const trickle = setInterval(() => socket.write(" "), 200);
      return ended.finally(() => clearInterval(trickle));
    });
    // Slow heads: the head never finishes.
    const slowHeads = Array.from({ length: 40 }, () => {
      const socket = connect(port, host);
      const ended = new Promise<{ ms: number; answer: string }>((resolve) => {
        let answer = "";
        socket.on("data", (chunk) => {
          answer += chunk.toString("latin1");
        });
        socket.on("close", () => resolve({ ms: Date.now() - started, answer }));
        socket.on("error", () => undefined);
      });
      socket.write(`GET /api/agents/demo-agent/v1/models HTTP/1.1\r\nHost: x\r\n`);
      const trickle = setInterval(() => socket.write("X-Slow: 1\r\n"), 200);
      return ended.finally(() => clearInterval(trickle));
    });
    const bound = REQUEST_TIMEOUT_MS * 3;
    const within = <T>(promise: Promise<T>) =>
      Promise.race([promise, sleep(bound).then(() => ({ ms: Number.POSITIVE_INFINITY, answer: "" }))]);
    const bodies = await Promise.all(slowBodies.map(within));
    const heads = await Promise.all(slowHeads.map(within));
    await long.done;
    const peak = await rss.stop();
    const other = await probe.stop();

    for (const cut of [...bodies, ...heads]) expect(cut.ms).toBeLessThan(bound);
    // Each slow body was either refused at once (over the key's body cap) or timed out with 408.
    for (const cut of bodies) expect(cut.answer).toMatch(/^HTTP\/1\.1 (408|429) /);
    expect(bodies.some((cut) => cut.answer.startsWith("HTTP/1.1 408 "))).toBe(true);
    expect(heads.every((cut) => cut.answer === "" || cut.answer.startsWith("HTTP/1.1 408 "))).toBe(true);
    expect(long.frames.at(-1)?.text).toContain("event: message_stop");
    expect(peak).toBeLessThan(RSS_BOUND_BYTES);
    expect(other.statuses.every((s) => s === 200)).toBe(true);
    expect(other.slowestMs).toBeLessThan(OTHER_TENANT_DELAY_BOUND_MS);
  }, 60_000);

  it("a quiet turn's first keep-alive comes within a 10 s proxy idle time-out; a stream cut mid-turn is logged at warn with how far it got", async () => {
    const turn = await openTurn("Use your tools to run the shell command: sleep 8", {
      stream_tool_calls: true,
    });
    const deadline = Date.now() + 12_000;
    while (!turn.frames.some((f) => f.text.startsWith(":")) && Date.now() < deadline) await sleep(50);
    const firstComment = turn.frames.find((f) => f.text.startsWith(":"));
    expect(firstComment?.at).toBeLessThan(10_000);
    // The client goes away mid-turn (as when a proxy's time-out cuts the stream).
    turn.cancel();
    await turn.done;
    const logged = async () =>
      server
        .stdout()
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .find((entry) => entry.conversation === turn.conversationId);
    let entry = await logged();
    for (let i = 0; i < 100 && entry === undefined; i++) {
      await sleep(100);
      entry = await logged();
    }
    expect(entry).toMatchObject({
      level: 40,
      msg: expect.stringMatching(/incomplete/),
      status: 200,
      stream: {
        end: "cut",
        reason: expect.stringMatching(/client/),
        lastEvent: "content_block_stop",
        blocks: 1,
        events: expect.any(Number),
      },
    });
  }, 60_000);

  it("turn streams carry Cache-Control no-transform and no hand-set Connection header (HTTP/1.0 upstreams)", async () => {
    const socket = connect(port, host);
    let answer = "";
    const closed = new Promise<void>((resolve) => {
      socket.on("data", (chunk) => {
        answer += chunk.toString("utf8");
      });
      socket.on("close", () => resolve());
    });
    const body = JSON.stringify({ stream: true, messages: [{ role: "user", content: "Say hello." }] });
    socket.write(
      `POST /api/agents/demo-agent/v1/messages HTTP/1.0\r\nHost: x\r\nX-Api-Key: ${KEYS.admin}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await closed;
    const head = answer.slice(0, answer.indexOf("\r\n\r\n")).toLowerCase();
    expect(head).toMatch(/^http\/1\.1 200 /);
    expect(head).toContain("cache-control: no-cache, no-transform");
    expect(head).toContain("x-accel-buffering: no");
    // HTTP/1.0: the stream can only end with the connection, so no keep-alive may be announced.
    expect(head).not.toContain("connection: keep-alive");
    expect(answer).toContain("event: message_stop");
  }, 30_000);
});
