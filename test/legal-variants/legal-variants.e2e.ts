/**
 * Correct deployments in the field's trouble, each checked by the whole suite: 0 MUST failures on each.
 * - behind the legal-variants proxy (every SSE framing, content coding and chunking the standards allow),
 *   for a few seeds (LEGAL_VARIANTS_SEEDS=1,2 picks others);
 * - on an upstream model overloaded now and then (a stream that opens then ends in overloaded_error, a 529);
 * - on a workspace where another client of the same key starts conversations throughout the run;
 * - with the server's clock an hour ahead, and an hour behind (the suite's wait stays bounded).
 * Each deployment is `agent-api serve` in a child process, as an operator runs it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmod, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { catalogue } from "../../conformance/catalogue.ts";
import { resolveInputs } from "../../conformance/inputs.ts";
import { mustVerdict } from "../../conformance/reference-verdict.ts";
import { runSuite } from "../../conformance/runner.ts";
import type { RunReport } from "../../conformance/types.ts";
import { startServeCommand } from "../../reference-server/test/sandbox-server.ts";
import { startBusyClient, startFlakyUpstream } from "./flaky-upstream.ts";
import { startVariantsProxy } from "./variants-proxy.ts";

const BIN = fileURLToPath(new URL("../../bin/agent-api", import.meta.url));
const CLOCK = fileURLToPath(new URL("./shifted-clock.ts", import.meta.url));
const SEEDS = (process.env.LEGAL_VARIANTS_SEEDS ?? "1,2")
  .split(",")
  .map((s) => Number(s.trim()))
  .filter((n) => Number.isInteger(n));

const stops: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
});

/** `agent-api model` on a free port. */
async function startModel(): Promise<string> {
  const child: ChildProcess = spawn(BIN, ["model", "--port", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  stops.push(async () => {
    if (!child.pid || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    process.kill(-child.pid, "SIGTERM");
    await exited;
  });
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`agent-api model did not start: ${out}`)), 30_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8");
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      if (url) {
        clearTimeout(timer);
        resolve(url);
      }
    });
  });
}

/** The demo served by `agent-api serve` in a child process; its AGENT_API_* variables. */
async function serveDemo(extraArgs: string[], env: NodeJS.ProcessEnv = {}): Promise<Record<string, string>> {
  const dir = await mkdtemp(join(tmpdir(), "legal-variants-"));
  stops.push(() => rm(dir, { recursive: true, force: true }));
  await chmod(dir, 0o711);
  const envFile = join(dir, "demo.env");
  const server = await startServeCommand(
    [
      BIN,
      "serve",
      "--demo",
      "--data",
      join(dir, "data"),
      "--port",
      "0",
      "--env-file",
      envFile,
      "--session-delay-ms",
      "1000",
      "--unsafe-no-isolation",
      "--log-level",
      "silent",
      ...extraArgs,
    ],
    { ...process.env, ...env },
  );
  stops.push(server.stop);
  return Object.fromEntries(
    (await readFile(envFile, "utf8"))
      .trim()
      .split("\n")
      .map((line) => line.split(/=(.*)/s).slice(0, 2)),
  );
}

async function suite(vars: Record<string, string>): Promise<RunReport> {
  return runSuite({
    checks: catalogue,
    inputs: resolveInputs({}, { ...vars, AGENT_API_SESSION_WAIT_MS: "5000" }),
  });
}

function expectGreen(report: RunReport, label: string): void {
  const verdict = mustVerdict(report);
  process.stdout.write(
    `${label}: ${report.results.filter((r) => r.outcome === "pass").length} passed in ${(report.ms / 1000).toFixed(1)} s; ${report.cost?.turns} turns${verdict.unexpectedSkips.map((s) => `\n  skip ${s}`).join("")}\n`,
  );
  expect(verdict.failures, label).toEqual([]);
}

describe.sequential("correct deployments in the field's trouble: no MUST check fails", () => {
  for (const seed of SEEDS) {
    it(`behind the legal-variants proxy, seed ${seed}`, async () => {
      const vars = await serveDemo([]);
      const proxy = await startVariantsProxy(vars.AGENT_API_BASE_URL, seed);
      stops.push(proxy.close);
      const report = await suite({
        ...vars,
        AGENT_API_BASE_URL: `${proxy.url}//`,
        AGENT_API_FLOW_URL: `${proxy.url}//`,
      });
      expectGreen(report, `variants seed ${seed}`);
      expect(proxy.codings.size).toBe(4);
    });
  }

  it("on an upstream model that is overloaded now and then", async () => {
    const model = await startModel();
    const flaky = await startFlakyUpstream(model, 11, { streamOverload: 0.04, refusal529: 0.04 });
    stops.push(flaky.close);
    const vars = await serveDemo(["--engine", "anthropic"], {
      ANTHROPIC_BASE_URL: flaky.url,
      ANTHROPIC_API_KEY: "flaky-upstream-key",
    });
    const report = await suite(vars);
    expectGreen(report, `flaky upstream (${JSON.stringify([...flaky.troubles])})`);
    expect(flaky.troubles.get("stream-overloaded") ?? 0).toBeGreaterThan(0);
  });

  it("on a workspace where another client of the same key starts conversations throughout the run", async () => {
    const vars = await serveDemo([]);
    // Four neighbours at once: far more new conversations during the run than the API's largest page.
    const busy = [1, 2, 3, 4].map(() => startBusyClient(vars, 0));
    let made = 0;
    try {
      const report = await suite(vars);
      for (const b of busy.splice(0)) made += await b.stop();
      expectGreen(report, `busy workspace (${made} conversations by the other clients)`);
    } finally {
      for (const b of busy) made += await b.stop();
    }
    expect(made).toBeGreaterThan(200);
  });

  for (const [label, offset] of [
    ["an hour ahead", 3_600_000],
    ["an hour behind", -3_600_000],
  ] as const) {
    it(`with the server's clock ${label}, within a bounded time`, async () => {
      const vars = await serveDemo([], {
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import=${CLOCK}`.trim(),
        AGENT_API_TEST_CLOCK_OFFSET_MS: String(offset),
      });
      // The server's clock is off indeed: a conversation it creates now is dated an hour away.
      const report = await suite(vars);
      expectGreen(report, `clock ${label}`);
      const since = report.results.find((r) => r.id === "CONSIST-SINCE-FORMS");
      expect(since?.outcome).toBe("pass");
      expect(since?.ms).toBeLessThan(60_000);
    });
  }
});
