/**
 * A Messages upstream that is overloaded now and then: a real HTTP proxy in front of `agent-api model` that,
 * seeded, answers some model calls with a stream that opens and then ends in the upstream's
 * `overloaded_error` event (which a deployment reports as an error event on its own stream), and some with a
 * 529 refusal (which a deployment's client retries itself). Everything else is forwarded unchanged.
 */
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { seededRandom } from "./sse-variants.ts";

export interface FlakyUpstream {
  url: string;
  /** Calls answered with trouble, by kind. */
  troubles: Map<string, number>;
  close(): Promise<void>;
}

const OPENED_THEN_OVERLOADED = [
  `event: message_start\ndata: ${JSON.stringify({
    type: "message_start",
    message: {
      id: "msg_overloaded",
      type: "message",
      role: "assistant",
      model: "scripted-1",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 1, output_tokens: 0 },
    },
  })}\n\n`,
  `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } })}\n\n`,
].join("");

export async function startFlakyUpstream(
  upstream: string,
  seed: number,
  rates: { streamOverload: number; refusal529: number },
): Promise<FlakyUpstream> {
  const target = new URL(upstream);
  const random = seededRandom(seed);
  const troubles = new Map<string, number>();
  const count = (kind: string) => troubles.set(kind, (troubles.get(kind) ?? 0) + 1);
  const server: Server = createServer((req, res) => {
    const roll = random();
    if (req.method === "POST" && req.url?.startsWith("/v1/messages")) {
      if (roll < rates.streamOverload) {
        count("stream-overloaded");
        req.resume();
        res.writeHead(200, { "content-type": "text/event-stream" }).end(OPENED_THEN_OVERLOADED);
        return;
      }
      if (roll < rates.streamOverload + rates.refusal529) {
        count("529");
        req.resume();
        res
          .writeHead(529, { "content-type": "application/json" })
          .end(JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }));
        return;
      }
    }
    const forwarded = request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: target.host },
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    forwarded.on("error", () => res.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    troubles,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Another client of the same key, busy throughout a run: it starts a conversation every `everyMs` (a turn
 * each), as other integrations of a workspace do, until stopped; then deletes what it made.
 */
export function startBusyClient(vars: Record<string, string>, everyMs: number): { stop(): Promise<number> } {
  const made: string[] = [];
  let stopped = false;
  const base = vars.AGENT_API_BASE_URL.replace(/\/+$/, "");
  const agent = vars.AGENT_API_AGENT;
  const headers = { "x-api-key": vars.AGENT_API_KEY, "content-type": "application/json" };
  const loop = (async () => {
    while (!stopped) {
      try {
        const res = await fetch(`${base}/api/agents/${agent}/v1/messages`, {
          method: "POST",
          headers,
          body: JSON.stringify({ stream: true, messages: [{ role: "user", content: "Say hello." }] }),
        });
        const id = res.headers.get("x-conversation-id");
        await res.text();
        if (id) made.push(id);
      } catch {
        // A busy neighbour's failure is not the run's business.
      }
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      for (const id of made) {
        await fetch(`${base}/api/agents/${agent}/conversations/${encodeURIComponent(id)}`, {
          method: "DELETE",
          headers,
        }).catch(() => undefined);
      }
      return made.length;
    },
  };
}
