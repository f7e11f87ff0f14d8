/**
 * The suite's score on mutations drawn at random from rule breakers × conditions (random-mutations.ts), not
 * hand-picked: starts the reference demo (one per lane), runs the WHOLE suite through the fault proxy once
 * unbroken and once per drawn pair, and prints the seed, each pair's verdict, and the score by rule, by
 * condition and by dimension. A pair is caught when any MUST check fails (as `agent-api check` judges a
 * deployment; harness.ts); a pair whose fault never fired in its run is reported as not applied, apart.
 *
 *   npm run mutation-score [-- --seed 12345] [--sample 40] [--parallel 3] [--area-only] [--json out.json]
 *
 * A fresh seed is drawn unless `--seed` is given; rerun a sample with the seed it printed.
 * Exit 1 only when the unbroken proxy fails a MUST check: a pair the suite misses is a finding to report, and a
 * fresh sample must not make a run red by chance.
 */
import { randomInt } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { SpecValidator } from "../../conformance/spec-validator.ts";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";
import { exploreFromFlags, type MutationOutcome, runMutation, runThroughProxy } from "./harness.ts";
import { checksFor } from "./mutations.ts";
import { breakers, conditions, type Draw, drawPairs } from "./random-mutations.ts";
import { type PairVerdict, scoreTables } from "./random-report.ts";

const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    sample: { type: "string", default: "40" },
    parallel: { type: "string", default: "3" },
    "area-only": { type: "boolean", default: false },
    json: { type: "string" },
    explore: { type: "string" },
    "explore-seed": { type: "string" },
  },
});
const exploration = exploreFromFlags(values.explore, values["explore-seed"]);
if (exploration) console.log(`Each run explores ${exploration.runs} sequences, seed ${exploration.seed}`);

const seed = values.seed === undefined ? randomInt(1, 2 ** 31) : Number(values.seed);
const sample = Number(values.sample);
const parallel = Math.max(1, Number(values.parallel));
if (!Number.isInteger(seed) || !Number.isInteger(sample) || sample < 1) {
  console.error("--seed and --sample take positive integers");
  process.exit(2);
}
const draws: Draw[] = drawPairs(seed, sample);
console.log(
  `Random mutations: seed ${seed}, ${draws.length} of ${breakers.length * conditions.length} pairs ` +
    `(${breakers.length} rules × ${conditions.length} conditions); rerun: npm run mutation-score -- --seed ${seed} --sample ${sample}`,
);

const started = performance.now();
const lanes: DemoServer[] = await Promise.all(Array.from({ length: parallel }, () => startDemoServer(400)));
let exitCode = 0;
try {
  const validator = await SpecValidator.load();
  const baseline = await runThroughProxy(lanes[0], null, { validator, explore: exploration });
  const baselineFailures = baseline.results.filter((r) => r.level === "MUST" && r.outcome === "fail");
  if (baselineFailures.length > 0) exitCode = 1;

  const outcomes: MutationOutcome[] = new Array(draws.length);
  let next = 0;
  await Promise.all(
    lanes.map(async (demo) => {
      while (next < draws.length) {
        const i = next++;
        const m = draws[i].mutation;
        outcomes[i] = await runMutation(demo, m, {
          validator,
          explore: exploration,
          only: values["area-only"] ? checksFor(m) : undefined,
        });
      }
    }),
  );
  const verdicts: PairVerdict[] = draws.map((d, i) => ({
    rule: d.breaker.name,
    condition: d.condition.name,
    dimension: d.condition.dimension,
    fired: d.fired(),
    caught: outcomes[i].caught,
    caughtBy: outcomes[i].caughtBy,
  }));
  console.log(
    [
      `Unbroken proxy: ${baseline.results.filter((r) => r.outcome === "pass").length} passed, ` +
        `${baselineFailures.length} MUST failed${baselineFailures.length ? ` (${baselineFailures.map((r) => r.id).join(", ")})` : ""}.`,
      "",
      scoreTables(verdicts),
      "",
      `(seed ${seed}, ${values["area-only"] ? "area checks" : "full suite"} per pair, ${lanes.length} lanes, ${Math.round((performance.now() - started) / 100) / 10} s)`,
    ].join("\n"),
  );
  if (values.json) {
    await writeFile(
      values.json,
      JSON.stringify(
        { seed, baseline: { mustFailures: baselineFailures.map((r) => r.id) }, pairs: verdicts },
        null,
        2,
      ),
    );
  }
} finally {
  await Promise.all(lanes.map((demo) => demo.close()));
}
process.exit(exitCode);
