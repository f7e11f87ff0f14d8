/**
 * By hand: the explorer (and with --suite the whole suite beside it) against one correct deployment in the
 * field's trouble, for several seeds; prints each run's MUST failures and each explorer finding with its
 * steps. A correct deployment has none, so anything printed is a false failure to trace.
 *
 *   node --conditions=agent-api-source test/legal-variants/explore-conditions.ts <condition> [--seeds 1,2,3]
 *     [--runs 60] [--suite]
 *   conditions: variants | flaky | busy | clock-ahead | clock-behind | real-model | flaky-real-model
 *   (the realistic model of --model-seed N, default 5; flaky-real-model puts the flaky upstream in front of it)
 */
import { parseArgs } from "node:util";
import { catalogue } from "../../conformance/catalogue.ts";
import { DEFAULT_EXPLORE_TIME_MS, resolveInputs } from "../../conformance/inputs.ts";
import { mustVerdict } from "../../conformance/reference-verdict.ts";
import { runSuite } from "../../conformance/runner.ts";
import {
  behindVariants,
  type Condition,
  onBusyWorkspace,
  onFlakyUpstream,
  onRealisticModel,
  type Stop,
  withShiftedClock,
} from "./conditions.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seeds: { type: "string", default: String(Math.floor(Math.random() * 2 ** 31)) },
    runs: { type: "string", default: "60" },
    suite: { type: "boolean", default: false },
    "model-seed": { type: "string", default: "5" },
  },
});

const name = positionals[0] ?? "variants";
const seeds = values.seeds.split(",").map(Number);

async function start(stops: Stop[], seed: number): Promise<Condition> {
  switch (name) {
    case "variants":
      return behindVariants(stops, seed);
    case "flaky":
      return onFlakyUpstream(stops, seed);
    case "busy":
      return onBusyWorkspace(stops);
    case "clock-ahead":
      return withShiftedClock(stops, 3_600_000);
    case "clock-behind":
      return withShiftedClock(stops, -3_600_000);
    case "real-model":
      return onRealisticModel(stops, Number(values["model-seed"]));
    case "flaky-real-model":
      return onFlakyUpstream(stops, seed, undefined, Number(values["model-seed"]));
    default:
      throw new Error(`unknown condition ${name}`);
  }
}

let bad = 0;
for (const seed of seeds) {
  const stops: Stop[] = [];
  try {
    const condition = await start(stops, seed);
    const report = await runSuite({
      checks: catalogue,
      inputs: resolveInputs({}, condition.vars),
      only: values.suite ? undefined : ["AUTH-KEY-WORKS"],
      explore: { runs: Number(values.runs), seed, timeLimitMs: DEFAULT_EXPLORE_TIME_MS },
    });
    const x = report.explorer;
    const verdict = mustVerdict(report);
    process.stdout.write(
      `${name} seed ${seed}: ${report.results.filter((r) => r.outcome === "pass").length} passed, ${verdict.failures.length} MUST failed in ${(report.ms / 1000).toFixed(1)} s; explorer ${x?.runs} runs, ${x?.operations} operations, ${x?.turns} turns, ${x?.inconclusive} inconclusive, ${x?.findings.length} findings, interrupted ${x?.interrupted}, ${x?.ms} ms; ${JSON.stringify(await condition.probe())}\n`,
    );
    for (const f of verdict.failures) process.stdout.write(`  FAIL ${f.slice(0, 1500)}\n`);
    for (const f of verdict.unexpectedSkips) process.stdout.write(`  SKIP ${f.slice(0, 400)}\n`);
    for (const f of x?.findings ?? [])
      process.stdout.write(
        `  FINDING ${f.rule} (${f.check}): expected ${f.expected}, saw ${f.actual}\n${f.steps.map((s, i) => `    ${i + 1}. ${s}`).join("\n")}\n${f.script}\n`,
      );
    for (const d of x?.departures ?? []) process.stdout.write(`  DEPARTURE ${JSON.stringify(d)}\n`);
    bad += verdict.failures.length + (x?.findings.length ?? 0);
  } finally {
    for (const stop of stops.reverse()) await stop();
  }
}
process.exitCode = bad > 0 ? 1 : 0;
