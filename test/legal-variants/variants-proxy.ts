/**
 * A real HTTP proxy, on loopback, that answers every request with what its upstream answered, rewritten
 * into a variant HTTP and the SSE standard allow: event streams reframed per event (./sse-variants.ts),
 * bodies in a content coding (gzip, deflate, br or none, chosen per response), and the bytes written at
 * random boundaries. Every choice comes from one seed, so a failing run is replayed with the same seed.
 */
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as zlib from "node:zlib";
import { SseVariantRewriter, seededRandom } from "./sse-variants.ts";

export interface VariantsProxy {
  url: string;
  /** Responses rewritten so far, by content coding ("identity" for none). */
  codings: Map<string, number>;
  close(): Promise<void>;
}

const CODINGS = ["identity", "gzip", "deflate", "br"] as const;
type Coding = (typeof CODINGS)[number];

function encoder(coding: Coding): zlib.Gzip | zlib.Deflate | zlib.BrotliCompress | null {
  if (coding === "gzip") return zlib.createGzip();
  if (coding === "deflate") return zlib.createDeflate();
  if (coding === "br") return zlib.createBrotliCompress();
  return null;
}

export async function startVariantsProxy(upstream: string, seed: number): Promise<VariantsProxy> {
  const target = new URL(upstream);
  const random = seededRandom(seed);
  const codings = new Map<string, number>();
  let responses = 0;
  const server: Server = createServer((req, res) => {
    const responseSeed = seed * 1000 + responses++;
    const coding = CODINGS[Math.floor(random() * CODINGS.length)];
    const forwarded = request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: target.host },
      },
      (up) => {
        const headers = { ...up.headers };
        const sse = String(headers["content-type"] ?? "").startsWith("text/event-stream");
        const empty = up.statusCode === 204 || up.statusCode === 304 || req.method === "HEAD";
        const enc = empty ? null : encoder(coding);
        codings.set(enc ? coding : "identity", (codings.get(enc ? coding : "identity") ?? 0) + 1);
        if (enc) {
          headers["content-encoding"] = coding;
          delete headers["content-length"];
        }
        if (sse) delete headers["content-length"];
        res.writeHead(up.statusCode ?? 502, headers);
        const chunkRandom = seededRandom(responseSeed);
        // Each piece of output goes out at random byte boundaries, one write each.
        const sendPieces = (bytes: Buffer) => {
          let at = 0;
          while (at < bytes.length) {
            const size = 1 + Math.floor(chunkRandom() * 64);
            res.write(bytes.subarray(at, at + size));
            at += size;
          }
        };
        if (enc) enc.on("data", (chunk: Buffer) => sendPieces(chunk));
        const write = (text: string) => {
          if (text === "") return;
          const bytes = Buffer.from(text, "utf8");
          if (!enc) return sendPieces(bytes);
          enc.write(bytes);
          // A stream must keep streaming through the coding: each upstream chunk is flushed as it comes.
          if (sse) enc.flush();
        };
        const rewriter = sse ? new SseVariantRewriter(responseSeed) : null;
        const decoder = new TextDecoder();
        up.on("data", (chunk: Buffer) => {
          if (rewriter) write(rewriter.push(decoder.decode(chunk, { stream: true })));
          else if (enc) enc.write(chunk);
          else sendPieces(chunk);
        });
        up.on("end", () => {
          if (rewriter) write(rewriter.push(decoder.decode()) + rewriter.end());
          if (enc) {
            enc.on("end", () => res.end());
            enc.end();
          } else res.end();
        });
        up.on("error", () => res.destroy());
      },
    );
    forwarded.on("error", () => {
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end("variants proxy: upstream unreachable");
    });
    req.pipe(forwarded);
    // The client went away (a turn given up): so does the upstream request.
    res.on("close", () => {
      if (!res.writableFinished) forwarded.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    codings,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
