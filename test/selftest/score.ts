/**
 * The mutation score of the conformance suite: starts the reference demo, runs the WHOLE suite through
 * the fault proxy once unbroken and once per mutation, and prints a markdown table (mutation, area,
 * caught, by which failing checks) with the score.
 *
 *   node test/selftest/score.ts [--parallel 4] [--mutation a,b] [--area-only] [--json out.json]
 *
 * --area-only restricts each run to the mutation's area checks plus its `breaks` (what the self-test
 * does); without it every run is the full suite. Each parallel lane has its own demo server, so runs do
 * not see each other's conversations (the list checks) or pushes (the repository checks).
 * Exit 1 when a mutation that is not a known gap goes uncaught, or the unbroken proxy fails a MUST check.
 */
import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { SpecValidator } from "../../conformance/spec-validator.ts";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";
import { type MutationOutcome, runMutation, runThroughProxy } from "./harness.ts";
import { checksFor, mutations } from "./mutations.ts";

const { values } = parseArgs({
  options: {
    parallel: { type: "string", default: "4" },
    mutation: { type: "string" },
    "area-only": { type: "boolean", default: false },
    json: { type: "string" },
  },
});

const parallel = Number(values.parallel);
const wanted = values.mutation?.split(",").map((s) => s.trim());
const selected = wanted ? mutations.filter((m) => wanted.includes(m.name)) : mutations;
if (wanted && selected.length !== wanted.length) {
  const known = new Set(mutations.map((m) => m.name));
  console.error(`unknown mutation(s): ${wanted.filter((w) => !known.has(w)).join(", ")}`);
  process.exit(2);
}

/** "N skipped (ID: reason, ...)": a skip of the unbroken run is a fact the demo did not show, named. */
function skippedText(results: Array<{ id: string; outcome: string; reason?: string }>): string {
  const skipped = results.filter((r) => r.outcome === "skip");
  if (skipped.length === 0) return "0 skipped";
  return `${skipped.length} skipped (${skipped.map((r) => `${r.id}: ${r.reason ?? "no reason"}`).join("; ")})`;
}

const started = performance.now();
const lanes: DemoServer[] = await Promise.all(
  Array.from({ length: Math.max(1, parallel) }, () => startDemoServer(400)),
);
let exitCode = 0;
try {
  const validator = await SpecValidator.load();
  const baseline = await runThroughProxy(lanes[0], null, { validator });
  const baselineFailures = baseline.results.filter((r) => r.level === "MUST" && r.outcome === "fail");
  if (baselineFailures.length > 0) exitCode = 1;

  const outcomes: MutationOutcome[] = new Array(selected.length);
  let next = 0;
  await Promise.all(
    lanes.map(async (demo) => {
      while (next < selected.length) {
        const i = next++;
        const m = selected[i];
        outcomes[i] = await runMutation(demo, m, {
          validator,
          only: values["area-only"] ? checksFor(m) : undefined,
        });
      }
    }),
  );
  const caught = outcomes.filter((o) => o.caught).length;
  if (outcomes.some((o) => !o.caught && !o.mutation.knownGap)) exitCode = 1;
  const pct = outcomes.length === 0 ? 100 : Math.round((caught / outcomes.length) * 1000) / 10;

  const lines: string[] = [];
  lines.push(
    `Unbroken proxy: ${baseline.results.filter((r) => r.outcome === "pass").length} passed, ` +
      `${baselineFailures.length} MUST failed${baselineFailures.length ? ` (${baselineFailures.map((r) => r.id).join(", ")})` : ""}, ` +
      `${skippedText(baseline.results)}.`,
    "",
    "| mutation | area | caught | by (declared checks that failed) | other failing checks |",
    "| --- | --- | --- | --- | --- |",
  );
  for (const o of outcomes) {
    const others = o.failed.length - o.caughtBy.length;
    const caughtText = o.mustCaught
      ? "yes"
      : o.caught
        ? "yes (SHOULD only)"
        : o.mutation.knownGap
          ? "**no** (known gap)"
          : "**no**";
    lines.push(
      `| \`${o.mutation.name}\` | ${o.mutation.area} | ${caughtText} | ${o.caughtBy.join(", ") || "—"} | ${others} |`,
    );
  }
  lines.push("", `Score: ${caught}/${outcomes.length} (${pct}%)`, "");
  const areas = [...new Set(outcomes.map((o) => o.mutation.area))];
  lines.push(
    `By area: ${areas
      .map((a) => {
        const of = outcomes.filter((o) => o.mutation.area === a);
        return `${a} ${of.filter((o) => o.caught).length}/${of.length}`;
      })
      .join(", ")}`,
    "",
  );
  const classes = [...new Set(outcomes.map((o) => o.mutation.table ?? "written for a check"))];
  lines.push(
    `By class: ${classes
      .map((c) => {
        const of = outcomes.filter((o) => (o.mutation.table ?? "written for a check") === c);
        return `${c} ${of.filter((o) => o.caught).length}/${of.length}`;
      })
      .join(", ")}`,
    "",
  );
  for (const o of outcomes.filter((x) => !x.caught)) {
    lines.push(`- not caught: \`${o.mutation.name}\` — ${o.mutation.knownGap ?? o.mutation.description}`);
  }
  lines.push(
    "",
    `(${values["area-only"] ? "area checks + breaks" : "full suite"} per mutation, ${lanes.length} lanes, ${Math.round((performance.now() - started) / 100) / 10} s)`,
  );
  console.log(lines.join("\n"));

  if (values.json) {
    await writeFile(
      values.json,
      JSON.stringify(
        {
          baseline: { mustFailures: baselineFailures.map((r) => r.id) },
          score: { caught, total: outcomes.length },
          mutations: outcomes.map((o) => ({
            name: o.mutation.name,
            area: o.mutation.area,
            caught: o.caught,
            caughtBy: o.caughtBy,
            failed: o.failed,
            ms: o.ms,
          })),
        },
        null,
        2,
      ),
    );
  }
} finally {
  await Promise.all(lanes.map((demo) => demo.close()));
}
process.exit(exitCode);
