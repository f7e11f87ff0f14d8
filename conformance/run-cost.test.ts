/**
 * What a run cost, counted where the suite sends a turn: the meter on its own, and `--max-turns` on a real
 * run against the reference demo (a check that needs a turn past the bound is skipped, saying so, and the
 * run sends no more than the bound).
 */
import { existsSync } from "node:fs";
import { encodeSseEvent } from "@agent-api/client/sse";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DemoServer } from "../reference-server/demo/index.ts";
import { catalogue } from "./catalogue.ts";
import { resolveInputs, resolveRunSettings, UsageError } from "./inputs.ts";
import { summaryText } from "./reports/console.ts";
import { junitReport } from "./reports/junit.ts";
import { costText, TurnMeter, turnBoundText } from "./run-cost.ts";
import { runSuite } from "./runner.ts";

const usage = {
  input_tokens: 10,
  output_tokens: 4,
  cache_read_input_tokens: 2,
  cache_creation_input_tokens: 1,
  total_cost_usd: 0.0015,
};
const stream = (u: unknown) =>
  encodeSseEvent("message_start", { type: "message_start" }) +
  encodeSseEvent("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: u }) +
  encodeSseEvent("message_stop", { type: "message_stop" });
const sse = "text/event-stream; charset=utf-8";

describe("TurnMeter", () => {
  it("sums the usage of each 200 stream and counts refusals and 4xx as no turn", () => {
    const meter = new TurnMeter();
    for (let i = 0; i < 3; i++) {
      expect(meter.take()).toBe(true);
      meter.settle({ status: 200, contentType: sse, text: stream(usage) });
    }
    meter.take();
    meter.settle({ status: 403, contentType: "application/json", text: "{}" });
    meter.take();
    meter.settle(null);
    meter.take();
    meter.settle({ status: 200, contentType: sse, text: stream(undefined) });
    expect(meter.cost).toEqual({
      turns: 4,
      turnsWithUsage: 3,
      inputTokens: 30,
      outputTokens: 12,
      cacheReadInputTokens: 6,
      cacheCreationInputTokens: 3,
      totalCostUsd: 0.0045,
      turnsRefused: 0,
    });
    expect(costText(meter.cost)).toBe(
      "4 turns · tokens 30 in, 12 out, 6 cache read, 3 cache written · total_cost_usd $0.0045 · 1 without usage",
    );
  });

  it("holds turns in flight under the bound and gives back the place of one that ran none", () => {
    const meter = new TurnMeter(2);
    expect(meter.take()).toBe(true);
    expect(meter.take()).toBe(true);
    expect(meter.take()).toBe(false);
    meter.settle({ status: 401, contentType: "application/json", text: "{}" });
    expect(meter.take()).toBe(true);
    meter.settle({ status: 200, contentType: sse, text: stream(usage) });
    meter.settle({ status: 200, contentType: sse, text: stream(usage) });
    expect(meter.take()).toBe(false);
    expect(meter.cost).toMatchObject({ turns: 2, maxTurns: 2, turnsRefused: 2 });
  });

  it("--max-turns is a whole number; the bound is said before a run", () => {
    expect(resolveRunSettings({ maxTurns: "12" }, {}).maxTurns).toBe(12);
    expect(resolveRunSettings({}, { AGENT_API_MAX_TURNS: "0" }).maxTurns).toBe(0);
    expect(resolveRunSettings({}, {}).maxTurns).toBeUndefined();
    expect(() => resolveRunSettings({ maxTurns: "many" }, {})).toThrow(UsageError);
    expect(turnBoundText(12)).toMatch(/at most 12 turns/);
    expect(turnBoundText(undefined)).toMatch(/none/);
  });
});

const serverPresent = existsSync(new URL("../reference-server/index.ts", import.meta.url));
let demo: DemoServer | undefined;

beforeAll(async () => {
  if (!serverPresent) return;
  const { startDemoServer } = await import("../reference-server/demo/index.ts");
  demo = await startDemoServer(200, { unsafeNoIsolation: true });
}, 60_000);

afterAll(async () => {
  await demo?.close();
});

describe.skipIf(!serverPresent)("--max-turns on a run against the demo", () => {
  it("sends at most the bound; checks that need more are skipped saying so; the reports carry the cost", async () => {
    const report = await runSuite({
      checks: catalogue,
      only: ["SEND-*", "SSE-*"],
      maxTurns: 5,
      inputs: resolveInputs({}, { ...demo?.envVars, AGENT_API_SESSION_WAIT_MS: "2000" }),
    });
    expect(report.cost?.turns).toBeLessThanOrEqual(5);
    expect(report.cost?.turns).toBeGreaterThan(0);
    expect(report.cost?.turnsRefused).toBeGreaterThan(0);
    const bounded = report.results.filter(
      (r) => r.outcome === "skip" && /--max-turns 5/.test(r.reason ?? ""),
    );
    expect(bounded.length).toBeGreaterThan(0);
    expect(bounded.every((r) => r.skipKind === "input")).toBe(true);
    expect(report.results.filter((r) => r.outcome === "fail" && r.level === "MUST")).toEqual([]);
    expect(summaryText(report)).toMatch(/cost to the deployment: \d turns? of at most 5 · tokens/);
    expect(junitReport(report)).toMatch(/<property name="total_cost_usd" value="[\d.]+"\/>/);
  }, 120_000);
});
