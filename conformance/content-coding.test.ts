/**
 * Responses in a content coding the suite did not ask for, from a real HTTP server on loopback: JSON and an
 * event stream come back decoded (the stream chunked, its frames timed as they arrive), a corrupt body is a
 * failure that says so, and a coding nobody decodes is named.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as zlib from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDispatcher, httpRequest } from "./http.ts";

const json = JSON.stringify({ conversations: [{ id: "c1", title: "größe 🙂" }] });
const stream = `event: message_start\ndata: {"type":"message_start"}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n`;

const ENCODERS: Record<string, (b: Buffer) => Buffer> = {
  gzip: (b) => zlib.gzipSync(b),
  deflate: (b) => zlib.deflateSync(b),
  br: (b) => zlib.brotliCompressSync(b),
  zstd: (b) => zlib.zstdCompressSync(b),
  "gzip, br": (b) => zlib.brotliCompressSync(zlib.gzipSync(b)),
};

let server: Server;
let base = "";
const dispatcher = createDispatcher(10_000);

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const coding = url.searchParams.get("coding") ?? "gzip";
    const sse = url.pathname === "/sse";
    res.setHeader("content-type", sse ? "text/event-stream" : "application/json");
    res.setHeader("content-encoding", coding);
    if (coding === "corrupt") {
      res.setHeader("content-encoding", "gzip");
      res.end(Buffer.from("not gzip at all"));
      return;
    }
    if (coding === "compress") {
      res.end(Buffer.from(json));
      return;
    }
    const encoded = ENCODERS[coding](Buffer.from(sse ? stream : json));
    // Cut at odd byte boundaries, each piece its own write.
    let at = 0;
    const next = () => {
      if (at >= encoded.length) return res.end();
      const size = 1 + ((at * 7) % 13);
      res.write(encoded.subarray(at, at + size));
      at += size;
      setImmediate(next);
    };
    next();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await dispatcher.destroy();
  await new Promise((resolve) => server.close(resolve));
});

describe("a response in a content coding", () => {
  it.each(Object.keys(ENCODERS))("%s: JSON and an event stream are read decoded", async (coding) => {
    const q = `?coding=${encodeURIComponent(coding)}`;
    const plain = await httpRequest(dispatcher, { method: "GET", url: `${base}/json${q}` });
    expect(plain.text).toBe(json);
    const sse = await httpRequest(dispatcher, { method: "GET", url: `${base}/sse${q}` });
    expect(sse.text).toBe(stream);
    expect(sse.timing?.frameMs).toHaveLength(2);
  });

  it("a body that is not in the coding it names fails the request, saying why", async () => {
    await expect(
      httpRequest(dispatcher, { method: "GET", url: `${base}/json?coding=corrupt` }),
    ).rejects.toThrow(/incorrect header check|failed/);
  });

  it("a coding the suite cannot decode is named", async () => {
    await expect(
      httpRequest(dispatcher, { method: "GET", url: `${base}/json?coding=compress` }),
    ).rejects.toThrow(/content coding "compress"/);
  });
});
