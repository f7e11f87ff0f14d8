/**
 * Times a full conformance run against the reference server's demo started in-process
 * (session delay 500 ms, as `agent-api check` without --base-url uses). Prints total seconds and, per
 * API section, the number of checks and the summed check time (checks run 8 at a time, so sums overlap).
 * With --slow-model-ms N the demo runs on `--engine anthropic` whose upstream is the scripted model over
 * HTTP answering each call after N ms (the suite against a slow model).
 * Run: node_modules/.bin/node bench/conformance-run.ts [--slow-model-ms 1000]
 */
import { parseArgs } from "node:util";
import { catalogue } from "../conformance/catalogue.ts";
import { resolveInputs } from "../conformance/inputs.ts";
import { summarize } from "../conformance/reports/console.ts";
import { runSuite } from "../conformance/runner.ts";
import { startDemoServer } from "../reference-server/demo/index.ts";

const { values } = parseArgs({ options: { "slow-model-ms": { type: "string" } } });
const slowMs = values["slow-model-ms"] === undefined ? undefined : Number(values["slow-model-ms"]);
let model: { close(): Promise<void> } | undefined;
if (slowMs !== undefined) {
  const { serveScriptedModel } = await import("../reference-server/scripted-model/scripted-transport.ts");
  const served = await serveScriptedModel({ latencyMs: slowMs });
  process.env.ANTHROPIC_BASE_URL = served.url;
  process.env.ANTHROPIC_API_KEY = "bench";
  model = served;
}
const demo = await startDemoServer(500, slowMs !== undefined ? { engine: "anthropic" } : {});
try {
  const started = performance.now();
  const report = await runSuite({ checks: catalogue, inputs: resolveInputs({}, demo.envVars) });
  const seconds = (performance.now() - started) / 1000;
  const sections = new Map<string, { count: number; ms: number }>();
  for (const r of report.results) {
    const s = sections.get(r.section) ?? { count: 0, ms: 0 };
    s.count++;
    s.ms += r.ms;
    sections.set(r.section, s);
  }
  for (const [section, s] of [...sections.entries()].sort((a, b) => b[1].ms - a[1].ms)) {
    console.log(
      `${section.padEnd(58)} ${String(s.count).padStart(3)} checks ${(s.ms / 1000).toFixed(2).padStart(7)} s summed`,
    );
  }
  const slowest = [...report.results].sort((a, b) => b.ms - a.ms).slice(0, 5);
  console.log(`slowest: ${slowest.map((r) => `${r.id} ${(r.ms / 1000).toFixed(2)} s`).join(", ")}`);
  const sum = summarize(report);
  console.log(
    `total ${seconds.toFixed(2)} s wall for ${report.results.length} checks (${sum.passed} passed, ${sum.failed} failed, ${sum.mustFailed} MUST failed, ${sum.skipped} skipped)`,
  );
} finally {
  await demo.close();
  await model?.close();
}
