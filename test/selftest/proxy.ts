/**
 * A fault-injecting HTTP proxy for the suite's self-test: it sits in front of a deployment (the reference
 * server) and breaks exactly one rule of the API, chosen by mutation name. With `mutation: null` it
 * forwards every request and response byte for byte (hop-by-hop headers dropped), so the suite must pass
 * through it. Request bodies and JSON answers are read whole; an event stream is passed on chunk by chunk as
 * it arrives (the suite judges arrival times), unless a mutation reads or rewrites it, which buffers it.
 *
 * A request goes: read whole → `onRequest` (may rewrite it, or answer itself) → forwarded upstream →
 * the ledger learns from the upstream answer → `onEvents` (200 event streams: parsed, mutated,
 * re-serialised) → `onSseText` (raw bytes of the stream, for framing faults) → `onResponse` → the client.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent, request } from "undici";
import { type Mutation, mutationByName } from "./mutations.ts";
import {
  isEventStream,
  Ledger,
  type OpenStream,
  ProxyCall,
  type ProxyResponse,
  type ProxyTools,
  parseSse,
  serialiseSse,
} from "./proxy-calls.ts";

export interface FaultProxy {
  url: string;
  close(): Promise<void>;
}

export interface FaultProxyOptions {
  /** Base URL of the deployment, e.g. `http://127.0.0.1:3001`. */
  target: string;
  /**
   * A mutation name from mutations.ts, a mutation made elsewhere (a random draw, the explorer's combination
   * faults), or null to forward faithfully.
   */
  mutation: string | Mutation | null;
}

export * from "./proxy-calls.ts";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host",
  "content-length",
  // Bodies are read and rewritten as plain bytes: ask upstream for no content coding.
  "accept-encoding",
]);

function forwardableHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name.toLowerCase())) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const mutation: Mutation | undefined =
    options.mutation === null
      ? undefined
      : typeof options.mutation === "string"
        ? mutationByName(options.mutation)
        : options.mutation;
  if (options.mutation !== null && !mutation) throw new Error(`unknown mutation ${options.mutation}`);
  const target = options.target.replace(/\/+$/, "");
  const upstream = new Agent({ connections: 64, keepAliveTimeout: 10_000 });
  const closeTasks: Array<() => Promise<void>> = [];

  const forward = async (call: ProxyCall): Promise<ProxyResponse> => {
    const res = await request(`${target}${call.path}`, {
      method: call.method as "GET",
      headers: call.headers,
      body: call.body.length > 0 || call.method === "POST" ? call.body : undefined,
      dispatcher: upstream,
    });
    const body = Buffer.from(await res.body.arrayBuffer());
    return { status: res.statusCode, headers: forwardableHeaders(res.headers), body };
  };

  const tools: ProxyTools = {
    forward,
    ledger: new Ledger(),
    state: new Map(),
    onClose: (task) => closeTasks.push(task),
  };

  /** An event stream goes through as it arrives when no hook of the mutation needs it whole. */
  const streamsThrough =
    !mutation || (!mutation.onEvents && !mutation.onSseText && !mutation.onResponse && !mutation.stream);

  /** Forwards `call`; a 200 event stream comes back unread, as `stream`, for the caller to pass on or hold. */
  const forwardOpen = async (call: ProxyCall): Promise<ProxyResponse | OpenStream> => {
    const res = await request(`${target}${call.path}`, {
      method: call.method as "GET",
      headers: call.headers,
      body: call.body.length > 0 || call.method === "POST" ? call.body : undefined,
      dispatcher: upstream,
    });
    const head = { status: res.statusCode, headers: forwardableHeaders(res.headers), body: Buffer.alloc(0) };
    if (isEventStream(head) && (streamsThrough || mutation?.stream === "buffered")) {
      return { ...head, stream: res.body };
    }
    return { ...head, body: Buffer.from(await res.body.arrayBuffer()) };
  };

  const handle = async (call: ProxyCall): Promise<ProxyResponse | OpenStream> => {
    const early = mutation?.onRequest ? await mutation.onRequest(call, tools) : undefined;
    const answer = early ?? (await forwardOpen(call));
    // The ledger reads a stream's headers only (which conversation a send created).
    if (!early) tools.ledger.observe(call, answer);
    if ("stream" in answer) return answer;
    let res = answer;
    if (mutation?.onEvents && isEventStream(res)) {
      const events = parseSse(res.body.toString("utf8"));
      const changed = mutation.onEvents(events, call, tools) ?? events;
      res = { ...res, body: Buffer.from(serialiseSse(changed)) };
    }
    if (mutation?.onSseText && isEventStream(res)) {
      res = { ...res, body: Buffer.from(mutation.onSseText(res.body.toString("utf8"), call)) };
    }
    if (mutation?.onResponse) res = (await mutation.onResponse(call, res, tools)) ?? res;
    return res;
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      try {
        const body = await readBody(req);
        const call = new ProxyCall(
          req.method ?? "GET",
          req.url ?? "/",
          forwardableHeaders(req.headers),
          body,
        );
        call.sentHeaderNames = req.rawHeaders.filter((_, i) => i % 2 === 0);
        const answer = await handle(call);
        const headers = { ...answer.headers };
        delete headers["content-length"];
        delete headers["transfer-encoding"];
        if ("stream" in answer) {
          res.writeHead(answer.status, headers);
          if (mutation?.stream === "buffered") {
            // A proxy that buffers: the headers at once, the body when the turn has ended.
            res.flushHeaders();
            res.end(Buffer.from(await answer.stream.arrayBuffer()));
            return;
          }
          for await (const chunk of answer.stream) {
            // A client that went away ends the pass-through (and, through it, the upstream request).
            if (res.destroyed) {
              answer.stream.destroy();
              return;
            }
            res.write(chunk);
          }
          res.end();
          return;
        }
        res.writeHead(answer.status, { ...headers, "content-length": String(answer.body.length) });
        res.end(answer.body);
      } catch (error) {
        if (!res.headersSent) {
          const message = `fault proxy: ${error instanceof Error ? error.message : String(error)}`;
          res.writeHead(502, { "content-type": "application/json" });
          res.end(JSON.stringify({ message }));
        } else {
          res.destroy();
        }
      }
    })();
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      for (const task of closeTasks.splice(0)) await task().catch(() => undefined);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await upstream.close();
    },
  };
}
