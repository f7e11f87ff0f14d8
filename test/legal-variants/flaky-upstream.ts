/**
 * A Messages upstream that is overloaded now and then, and sometimes refuses: a real HTTP proxy in front of
 * `agent-api model` that, seeded, answers some model calls with a stream that opens and then ends in the
 * upstream's `overloaded_error` event (which a deployment reports as an error event on its own stream), some
 * with a 529 refusal (which a deployment's client retries itself), and some as a model that declines: a
 * complete message with no content whose `stop_reason` is `refusal` (on any call of a turn), or an empty
 * `end_turn` reply (on a turn's first call); both are answers the Messages API gives. Everything else is
 * forwarded unchanged.
 */
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from "node:http";
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

/** A complete Messages stream with no content block, ending for `stopReason`. */
export function emptyMessageStream(model: string, stopReason: "refusal" | "end_turn"): string {
  const frame = (data: Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;
  return [
    frame({
      type: "message_start",
      message: {
        id: `msg_${stopReason}`,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 12, output_tokens: 0 },
      },
    }),
    frame({
      type: "message_delta",
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: stopReason === "refusal" ? 1 : 0 },
    }),
    frame({ type: "message_stop" }),
  ].join("");
}

export interface FlakyRates {
  streamOverload: number;
  refusal529: number;
  /** A complete reply with no content and `stop_reason: "refusal"`. */
  modelRefusal?: number;
  /** A complete reply with no content and `stop_reason: "end_turn"`. */
  emptyReply?: number;
}

export async function startFlakyUpstream(
  upstream: string,
  seed: number,
  rates: FlakyRates,
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
      const refusal = rates.streamOverload + rates.refusal529 + (rates.modelRefusal ?? 0);
      const empty = refusal + (rates.emptyReply ?? 0);
      if (roll < empty) {
        const stopReason = roll < refusal ? "refusal" : "end_turn";
        const chunks: Buffer[] = [];
        req.on("data", (chunk: Buffer) => chunks.push(chunk));
        req.on("end", () => {
          const body = Buffer.concat(chunks);
          let call: { model?: unknown; messages?: Array<{ content?: unknown }> } = {};
          try {
            call = JSON.parse(body.toString("utf8"));
          } catch {
            // Not JSON: forwarded as it came, for the upstream to judge.
          }
          // An empty end_turn only as a turn's first call: after a tool call it would leave the turn's
          // visible text a preamble with no answer, which no client can tell from a lost answer.
          const last = call.messages?.at(-1)?.content;
          const afterTool =
            Array.isArray(last) && last.some((b) => (b as { type?: unknown })?.type === "tool_result");
          if (stopReason === "end_turn" && afterTool) return void forward(req, res, body);
          count(stopReason === "refusal" ? "model-refusal" : "empty-reply");
          res
            .writeHead(200, { "content-type": "text/event-stream" })
            .end(emptyMessageStream(String(call.model ?? "scripted-1"), stopReason));
        });
        return;
      }
    }
    forward(req, res);
  });
  /** Forwards the call unchanged; `body` when the request's body was already read. */
  function forward(req: IncomingMessage, res: ServerResponse, body?: Buffer): void {
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
    if (body === undefined) req.pipe(forwarded);
    else forwarded.end(body);
  }
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
 * each), as other integrations of a workspace do, until stopped; then deletes what it made, unless
 * `keep` (a deployment thrown away after the run: thousands of deletes, one by one, take minutes).
 */
export function startBusyClient(
  vars: Record<string, string>,
  everyMs: number,
  options: { keep?: boolean } = {},
): { made(): number; stop(): Promise<number> } {
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
    made: () => made.length,
    async stop() {
      stopped = true;
      await loop;
      if (options.keep) return made.length;
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
