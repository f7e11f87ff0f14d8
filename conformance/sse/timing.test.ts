/**
 * Arrival times of a stream's frames, read by the suite's own request path (httpRequest) from a real server on
 * loopback: a streamed turn shows its pause between frames, a buffered one shows none, and the frame positions
 * are those the grammar reads (comment lines included).
 */
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { encodeSseEvent } from "@agent-api/client/sse";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDispatcher, httpRequest } from "../http.ts";
import { checkTurnStream } from "./grammar.ts";
import { timelineText, turnTimeline } from "./timing.ts";

const PAUSE_MS = 400;

const usage = {
  input_tokens: 1,
  output_tokens: 1,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
  total_cost_usd: 0,
};

function block(index: number, text: string): string {
  return (
    encodeSseEvent("content_block_start", {
      type: "content_block_start",
      index,
      content_block: { type: "text", text: "" },
    }) +
    encodeSseEvent("content_block_delta", {
      type: "content_block_delta",
      index,
      delta: { type: "text_delta", text },
    }) +
    encodeSseEvent("content_block_stop", { type: "content_block_stop", index })
  );
}

const START = encodeSseEvent("message_start", {
  type: "message_start",
  message: { id: "m", model: "x", usage },
});
const END =
  encodeSseEvent("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage }) +
  encodeSseEvent("message_stop", { type: "message_stop" });

let server: Server;
let base: string;
const dispatcher = createDispatcher(10_000);

function sse(res: ServerResponse): void {
  res.writeHead(200, { "content-type": "text/event-stream" });
}

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === "/streamed") {
      sse(res);
      // The second block is split across two writes, one of them in the middle of a CRLF-free line.
      res.write(START + block(0, "first"));
      setTimeout(() => res.write(": keep-alive\n\n"), PAUSE_MS / 2);
      setTimeout(() => {
        const rest = block(1, "second") + END;
        res.write(rest.slice(0, 20));
        res.end(rest.slice(20));
      }, PAUSE_MS);
    } else if (req.url === "/buffered") {
      const body = START + block(0, "first") + block(1, "second") + END;
      setTimeout(() => {
        res.writeHead(200, {
          "content-type": "text/event-stream",
          "content-length": Buffer.byteLength(body),
        });
        res.end(body);
      }, PAUSE_MS);
    } else {
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await dispatcher.close();
  await new Promise((resolve) => server.close(resolve));
});

describe("arrival times of a turn's frames", () => {
  it("a streamed turn: the earlier block arrives a pause before the later one; comment frames keep their place", async () => {
    const res = await httpRequest(dispatcher, { method: "POST", url: `${base}/streamed` });
    const timing = res.timing;
    if (!timing) throw new Error("no timing for an event stream");
    const reading = checkTurnStream(res.text, { streamToolCalls: false });
    // Every frame the grammar read has its arrival, the comment frame included.
    expect(timing.frameMs).toHaveLength(reading.frames.length);
    expect(reading.frames.some((f) => f.raw === ": keep-alive")).toBe(true);
    const timeline = turnTimeline(timing, reading);
    expect(timeline.blocks.map((b) => b.type)).toEqual(["text", "text"]);
    const [first, second] = timeline.blocks;
    expect((second.stopMs ?? 0) - (first.stopMs ?? 0)).toBeGreaterThanOrEqual(PAUSE_MS - 50);
    expect(timeline.headersMs).toBeLessThan(PAUSE_MS);
    expect(timeline.firstByteMs).toBeLessThan(PAUSE_MS);
    expect(timeline.finalEventMs).toBeGreaterThanOrEqual(PAUSE_MS - 50);
    expect(res.exchange.ms).toBeGreaterThanOrEqual(timeline.finalEventMs ?? 0);
    expect(timelineText(timeline)).toMatch(
      /^headers \d+ ms · first byte \d+ ms · #0 text \d+ ms · #1 text [\d,]+ ms · final event [\d,]+ ms · end [\d,]+ ms$/,
    );
  });

  it("a buffered turn: headers and every block arrive together, after the pause", async () => {
    const res = await httpRequest(dispatcher, { method: "POST", url: `${base}/buffered` });
    const timing = res.timing;
    if (!timing) throw new Error("no timing for an event stream");
    const timeline = turnTimeline(timing, checkTurnStream(res.text, { streamToolCalls: false }));
    expect(timeline.headersMs).toBeGreaterThanOrEqual(PAUSE_MS - 50);
    const [first, second] = timeline.blocks;
    expect((second.stopMs ?? 0) - (first.stopMs ?? 0)).toBeLessThan(PAUSE_MS / 2);
  });

  it("a JSON answer is read whole, without timing", async () => {
    const res = await httpRequest(dispatcher, { method: "GET", url: `${base}/json` });
    expect(res.text).toBe("{}");
    expect(res.timing).toBeUndefined();
  });
});
