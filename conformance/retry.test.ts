/**
 * Refusals for load (429, 503, 529) prove nothing about a rule: ctx.call / ctx.turn retry them, honouring
 * Retry-After, and a deployment that keeps refusing makes the check skip as inconclusive, never fail.
 * Other statuses are not retried. Also the run settings behind `--concurrency` and `--timeout-ms`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { encodeSseEvent } from "@agent-api/client/sse";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureHistoryKnown, ensureTurnOk, settledConversation } from "./checks/common.ts";
import { sendChecks } from "./checks/send.ts";
import { DEFAULT_RETRY, retryDelayMs } from "./context.ts";
import { DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT_MS, resolveRunSettings, UsageError } from "./inputs.ts";
import { runSuite } from "./runner.ts";
import { SpecValidator } from "./spec-validator.ts";
import type { CheckDef, CheckResult } from "./types.ts";

type Answer = (res: ServerResponse) => void;

const MODELS = JSON.stringify({
  data: [{ type: "model", id: "stub-model", display_name: "Stub model" }],
  has_more: false,
});

const ok: Answer = (res) => res.writeHead(200, { "content-type": "application/json" }).end(MODELS);
const refuse =
  (status: number, retryAfter?: string): Answer =>
  (res) =>
    res
      .writeHead(status, {
        "content-type": "application/json",
        ...(retryAfter === undefined ? {} : { "retry-after": retryAfter }),
      })
      // Not a body of the spec: a refusal that is retried or skipped must not be judged against it.
      .end(JSON.stringify({ error: "slow down" }));

const SSE = [
  ["message_start", { type: "message_start", message: { id: "m1", model: "stub-model", usage: {} } }],
  [
    "content_block_start",
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
  ],
  [
    "content_block_delta",
    { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "hi" } },
  ],
  ["content_block_stop", { type: "content_block_stop", index: 0 }],
  [
    "message_delta",
    {
      type: "message_delta",
      delta: { stop_reason: "end_turn" },
      usage: {
        input_tokens: 1,
        output_tokens: 1,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
        total_cost_usd: 0,
      },
    },
  ],
  ["message_stop", { type: "message_stop" }],
]
  .map(([name, data]) => encodeSseEvent(name as string, data))
  .join("");

const stream: Answer = (res) =>
  res.writeHead(200, { "content-type": "text/event-stream", "x-conversation-id": "stub-conv" }).end(SSE);

/** A 200 stream that opens, then ends in an error event with `message` (an upstream's trouble). */
const streamError =
  (message: string): Answer =>
  (res) =>
    res
      .writeHead(200, { "content-type": "text/event-stream", "x-conversation-id": "stub-conv" })
      .end(
        SSE.slice(0, SSE.indexOf("event: content_block_start")) +
          encodeSseEvent("error", { type: "error", error: { type: "api_error", message } }),
      );

/** Answers per path: the scripted answers in order, then the last one forever; counts the requests. */
let script = new Map<string, Answer[]>();
const seen = new Map<string, number>();
let server: Server;
let baseUrl: string;
let validator: SpecValidator;

function handle(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  req.on("end", () => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    const n = seen.get(path) ?? 0;
    seen.set(path, n + 1);
    if (req.method === "DELETE") return void res.writeHead(204).end();
    const answers = script.get(path) ?? [ok];
    answers[Math.min(n, answers.length - 1)](res);
  });
}

beforeAll(async () => {
  server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  validator = await SpecValidator.load();
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

/** Runs one check against the stub, where agent `agent` answers `answers` on its models and messages routes. */
async function runOne(
  agent: string,
  answers: Answer[],
  body: CheckDef["run"],
  retry = DEFAULT_RETRY,
): Promise<{ result: CheckResult; requests: number; ms: number }> {
  script = new Map([
    [`/api/agents/${agent}/v1/models`, answers],
    [`/api/agents/${agent}/v1/messages`, answers],
  ]);
  const check: CheckDef = { id: "STUB", level: "MUST", section: "Stub", title: "stub", needs: [], run: body };
  const started = performance.now();
  const report = await runSuite({
    checks: [check],
    inputs: { baseUrl, agent, key: "stub-key", sessionWaitMs: 0 },
    validator,
    retry,
  });
  const requests =
    (seen.get(`/api/agents/${agent}/v1/models`) ?? 0) + (seen.get(`/api/agents/${agent}/v1/messages`) ?? 0);
  return { result: report.results[0], requests, ms: performance.now() - started };
}

const listModels: CheckDef["run"] = async (ctx) => {
  const res = await ctx.listModels();
  if (res.status !== 200) throw new Error(`status ${res.status}`);
};

describe("a refusal for load is retried", () => {
  it("429 then 200: the call is retried after Retry-After and the check passes", async () => {
    const { result, requests, ms } = await runOne("a-429-once", [refuse(429, "1"), ok], listModels);
    expect(result.outcome, result.reason).toBe("pass");
    expect(requests).toBe(2);
    expect(ms).toBeGreaterThanOrEqual(950);
    // Both attempts are in the report; the refusal's body (no spec shape) failed nothing.
    expect(result.exchanges.map((e) => e.status)).toEqual([429, 200]);
    expect(result.details).toEqual([]);
  });

  it("503 and 529 without Retry-After back off, then a turn streams", async () => {
    const { result, requests } = await runOne(
      "a-overloaded",
      [refuse(503), refuse(529), stream],
      async (ctx) => {
        const turn = await ctx.turn({ prompt: "hello" });
        if (turn.status !== 200 || turn.text !== "hi") throw new Error(`turn: ${turn.status} ${turn.text}`);
      },
      { ...DEFAULT_RETRY, baseMs: 50 },
    );
    expect(result.outcome, result.reason).toBe("pass");
    expect(requests).toBe(3);
  });

  it("429 forever: the check is skipped as inconclusive after 3 retries, not failed", async () => {
    const { result, requests } = await runOne("a-429-always", [refuse(429, "0")], listModels);
    expect(result.outcome).toBe("skip");
    expect(result.reason).toBe(
      "the deployment kept refusing with 429 (rate limit or overload): inconclusive",
    );
    expect(requests).toBe(1 + DEFAULT_RETRY.attempts);
    expect(result.details).toEqual([]);
  });

  it("a turn refused with 529 forever skips too", async () => {
    const { result } = await runOne(
      "a-529-always",
      [refuse(529)],
      async (ctx) => {
        await ctx.turn({ prompt: "hello" });
      },
      { ...DEFAULT_RETRY, baseMs: 10 },
    );
    expect(result.outcome).toBe("skip");
    expect(result.reason).toContain("kept refusing with 529");
  });

  it("a 502 whose body names load (an overloaded upstream behind a gateway) is retried, then inconclusive", async () => {
    const overloaded: Answer = (res) =>
      res
        .writeHead(502, { "content-type": "application/json" })
        .end(
          JSON.stringify({ message: "Flow step draft failed: The model is overloaded; try again later." }),
        );
    const passed = await runOne("a-502-overloaded-once", [overloaded, ok], listModels, {
      ...DEFAULT_RETRY,
      baseMs: 10,
    });
    expect(passed.result.outcome, passed.result.reason).toBe("pass");
    expect(passed.requests).toBe(2);
    const kept = await runOne("a-502-overloaded-always", [overloaded], listModels, {
      ...DEFAULT_RETRY,
      baseMs: 10,
    });
    expect(kept.result.outcome).toBe("skip");
    expect(kept.result.reason).toContain("kept refusing with 502");
  });

  it("other statuses are not retried: a 500 is the check's to judge", async () => {
    const { result, requests } = await runOne("a-500", [refuse(500), ok], listModels);
    expect(requests).toBe(1);
    expect(result.outcome).toBe("fail");
  });
});

describe("a turn that ends in an error event naming load is transient trouble", () => {
  const fast = { ...DEFAULT_RETRY, baseMs: 10 };
  const overloaded = streamError("The model is overloaded; try again later.");
  const turnOk: CheckDef["run"] = async (ctx) => {
    ensureTurnOk(await ctx.turn({ prompt: "hello" }));
  };

  it("is sent again, and the check judges the turn that succeeded", async () => {
    const { result, requests } = await runOne(
      "a-overloaded-twice",
      [overloaded, overloaded, stream],
      turnOk,
      fast,
    );
    expect(result.outcome).toBe("pass");
    expect(requests).toBe(3);
    expect(result.notes.join("\n")).toMatch(/error event naming load.*sent again/);
  });

  it("kept up past the retries: the check is inconclusive, naming the cause, not failed", async () => {
    const { result, requests } = await runOne("a-overloaded-always", [overloaded], turnOk, fast);
    expect(requests).toBe(1 + fast.attempts);
    expect(result.outcome).toBe("skip");
    expect(result.skipKind).toBe("unobservable");
    expect(result.reason).toMatch(/The model is overloaded.*on each of 4 tries; inconclusive/);
  });

  it("kept up past the retries, the check that judges whether turns succeed fails", async () => {
    const { result } = await runOne(
      "a-overloaded-owner",
      [overloaded],
      async (ctx) => ensureTurnOk(await ctx.turn({ prompt: "hello" }), "the turn", { judgesSuccess: true }),
      fast,
    );
    expect(result.outcome).toBe("fail");
    expect(result.reason).toMatch(/error event/);
  });

  it("resent into a conversation, it leaves that conversation's turns uncounted: a check counting them is inconclusive", async () => {
    const { result } = await runOne(
      "a-resent-into",
      [overloaded, stream],
      async (ctx) => {
        ensureTurnOk(await ctx.turn({ conversationId: "c-resent", prompt: "hello" }));
        ensureTurnOk(await ctx.turn({ conversationId: "c-other", prompt: "hello" }));
        ensureHistoryKnown(ctx, "c-other", "the other conversation");
        ensureHistoryKnown(ctx, "c-resent", "the resent conversation");
      },
      fast,
    );
    expect(result.outcome).toBe("skip");
    expect(result.reason).toMatch(/^the resent conversation: a turn of this conversation was sent again/);
  });

  it("an error event that names no load is the check's to judge, at once", async () => {
    const { result, requests } = await runOne(
      "a-broken",
      [streamError("internal error"), stream],
      turnOk,
      fast,
    );
    expect(requests).toBe(1);
    expect(result.outcome).toBe("fail");
  });

  it("a turn asked to fail is never retried", async () => {
    const { requests } = await runOne(
      "a-asked-to-fail",
      [overloaded, stream],
      async (ctx) => {
        await ctx.turn({ prompt: "fail", expectFailure: true });
      },
      fast,
    );
    expect(requests).toBe(1);
  });
});

describe("retryDelayMs", () => {
  const policy = { attempts: 3, baseMs: 1000, maxWaitMs: 10_000 };
  it("honours Retry-After in seconds or as a date, capped", () => {
    expect(retryDelayMs("2", 0, policy)).toBe(2000);
    expect(retryDelayMs("0", 2, policy)).toBe(0);
    expect(retryDelayMs("120", 0, policy)).toBe(10_000);
    const now = Date.parse("2025-01-01T00:00:00Z");
    expect(retryDelayMs("Wed, 01 Jan 2025 00:00:03 GMT", 0, policy, now)).toBe(3000);
    expect(retryDelayMs("Wed, 01 Jan 2025 01:00:00 GMT", 0, policy, now)).toBe(10_000);
  });
  it("backs off exponentially without a usable Retry-After", () => {
    expect(retryDelayMs(undefined, 0, policy)).toBe(1000);
    expect(retryDelayMs("soon", 1, policy)).toBe(2000);
    expect(retryDelayMs(undefined, 2, policy)).toBe(4000);
  });
});

describe("--concurrency and --timeout-ms", () => {
  it("default to 8 and 180000, read AGENT_API_* and let flags win", () => {
    expect(resolveRunSettings({}, {})).toEqual({
      concurrency: DEFAULT_CONCURRENCY,
      timeoutMs: DEFAULT_TIMEOUT_MS,
    });
    expect(DEFAULT_CONCURRENCY).toBe(8);
    expect(DEFAULT_TIMEOUT_MS).toBe(180_000);
    expect(
      resolveRunSettings(
        { timeoutMs: "600000" },
        { AGENT_API_CONCURRENCY: "2", AGENT_API_TIMEOUT_MS: "1000" },
      ),
    ).toEqual({ concurrency: 2, timeoutMs: 600_000 });
  });
  it("refuse what is not a positive integer", () => {
    expect(() => resolveRunSettings({ concurrency: "0" }, {})).toThrow(UsageError);
    expect(() => resolveRunSettings({}, { AGENT_API_TIMEOUT_MS: "3m" })).toThrow(/--timeout-ms/);
  });
});

describe("a turn whose stream shows no block", () => {
  /** A model's empty reply: message_start, message_delta, message_stop. */
  const noBlock: Answer = (res) =>
    res
      .writeHead(200, { "content-type": "text/event-stream", "x-conversation-id": "stub-conv" })
      .end(
        SSE.slice(0, SSE.indexOf("event: content_block_start")) +
          SSE.slice(SSE.indexOf("event: message_delta")),
      );

  it("cannot show a check's fact: any check reading it is inconclusive, naming the cause, not failed", async () => {
    const { result } = await runOne("a-refused-reply", [noBlock], async (ctx) => {
      const turn = await ctx.turn({ prompt: "Reply with the token t-1." });
      ensureTurnOk(turn, "the directed turn");
      if (!turn.text.includes("t-1")) throw new Error("the reply does not contain t-1");
    });
    expect(result.outcome).toBe("skip");
    expect(result.reason).toMatch(
      /the directed turn showed no output .*a refusal or an empty reply.*inconclusive/,
    );
  });

  it("a model that declines part-way (a preamble, then stop_reason refusal) is inconclusive too", async () => {
    const declined: Answer = (res) =>
      res
        .writeHead(200, { "content-type": "text/event-stream", "x-conversation-id": "stub-conv" })
        .end(SSE.replace('"end_turn"', '"refusal"'));
    const { result } = await runOne("a-declined", [declined], async (ctx) => {
      const turn = await ctx.turn({ prompt: "Use your tools to write a file." });
      ensureTurnOk(turn, "the writing turn");
      throw new Error("no file was written");
    });
    expect(result.outcome).toBe("skip");
    expect(result.reason).toMatch(/the writing turn was refused by the model \(stop_reason "refusal"\)/);
  });

  it("is judged as a turn without output where the check asked for silence", async () => {
    const { result } = await runOne("a-silent-asked", [noBlock], async (ctx) => {
      ensureTurnOk(await ctx.turn({ prompt: "Say nothing." }), "no-output turn", { mayBeSilent: true });
    });
    expect(result.outcome).toBe("pass");
  });

  it("is not sent again: one request, whatever the check", async () => {
    const { requests } = await runOne("a-refused-once", [noBlock, stream], async (ctx) => {
      ensureTurnOk(await ctx.turn({ prompt: "hello" }));
    });
    expect(requests).toBe(1);
  });

  const send200 = sendChecks.find((c) => c.id === "SEND-200-STREAM")?.run as CheckDef["run"];

  it("SEND-200-STREAM, which owns whether turns answer, tries a silent hello again in a new conversation", async () => {
    const { result, requests } = await runOne("a-refused-hello", [noBlock, noBlock, stream], send200);
    expect(result.outcome).toBe("pass");
    expect(requests).toBe(3);
    expect(result.notes.join("\n")).toMatch(/produced no text .*sent again/);
  });

  it("SEND-200-STREAM fails a deployment whose turns never answer, after its tries", async () => {
    const { result, requests } = await runOne("a-never-answers", [noBlock], send200);
    expect(result.outcome).toBe("fail");
    expect(requests).toBe(4);
    expect(result.reason).toMatch(/produced no text, on each of 4 tries/);
  });

  it("is a turn without output: a check that needs its session is inconclusive, not failed", async () => {
    const { result } = await runOne("a-refusal", [noBlock], async (ctx) => {
      await settledConversation(ctx);
    });
    expect(result.outcome).toBe("skip");
    expect(result.reason).toMatch(/showed no output .*no block in its stream.*inconclusive/);
  });
});
