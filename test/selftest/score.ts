/**
 * The mutation score of the conformance suite: starts the reference demo, runs the WHOLE suite through
 * the fault proxy once unbroken and once per mutation, and prints a markdown table (mutation, area,
 * caught, by which failing checks) with the score.
 *
 *   node test/selftest/score.ts [--parallel 4] [--mutation a,b] [--area-only] [--skip-npm-test] [--skip-known-gaps]
 *                               [--json out.json] [--catchers catchers.json] [--write-catchers catchers.json]
 *                               [--explore <n> --explore-seed <s> [--explorer-only]]
 *
 * --area-only restricts each run to the mutation's area checks plus its `breaks` (what the self-test
 * does); without it every run is the full suite. --skip-npm-test (what `.ci/run` gives, after `npm test`)
 * runs no row `npm test` already proved caught (mutation.test.ts runs it with a subset of the suite's checks,
 * and a failure of a subset is a failure of the whole): those count as caught, marked so; known gaps, whose
 * proof is that the WHOLE suite still misses them, run as ever. Each parallel lane has its own demo server, so runs do
 * not see each other's conversations (the list checks) or pushes (the repository checks).
 * --skip-known-gaps (what `.ci/run` gives too) runs no row marked as a known gap: whatever its run shows, it
 * cannot change the exit code, so its proof is the measurement by hand (test/selftest/README.md), and CI's
 * time goes to the rows that can fail it.
 * --catchers (what `.ci/run` gives too) runs each row first with only the checks that caught it in an earlier
 * full run (test/selftest/catchers.json, written by --write-catchers) plus its `needs`: a failure of a subset is a
 * failure of the whole, so a row caught that way is caught. A row they no longer catch (a check renamed, a
 * catch that came from another check's traffic, a row the suite now misses) runs the whole suite as ever, so the
 * verdict and the exit code are the whole suite's; only the time differs. --write-catchers records, for every row
 * a run caught, the (at most two) fastest checks that caught it, merged into the file.
 * --explore runs the explorer beside the checks in every run (n sequences from seed s, the default time bound of
 * `agent-api check`); without it the explorer is off, as in the kit's other test runs.
 * A mutation whose fault never fired in its run is listed as not applied (its verdict says nothing).
 * Exit 1 when a mutation that is not a known gap goes uncaught, or the unbroken proxy fails a MUST check.
 */
import { readFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { DEFAULT_EXPLORE_RUNS } from "../../conformance/inputs.ts";
import { SpecValidator } from "../../conformance/spec-validator.ts";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";
import { exploreFromFlags, type MutationOutcome, runMutation, runThroughProxy } from "./harness.ts";
import { checksFor, inNpmTest, mutations } from "./mutations.ts";
import type { Mutation } from "./proxy-calls.ts";

const { values } = parseArgs({
  options: {
    parallel: { type: "string", default: "4" },
    mutation: { type: "string" },
    "area-only": { type: "boolean", default: false },
    json: { type: "string" },
    explore: { type: "string" },
    "explore-seed": { type: "string" },
    "skip-npm-test": { type: "boolean", default: false },
    "skip-known-gaps": { type: "boolean", default: false },
    catchers: { type: "string" },
    "write-catchers": { type: "string" },
    "explorer-only": { type: "boolean", default: false },
  },
});

/**
 * --explorer-only (with --explore): a check id no check has, so no named check runs and a row is caught by the
 * explorer's model and the sweeps over its traffic alone: what the explorer is worth by itself.
 */
const NO_CHECKS = ["(no named check)"];

/** Row name → the checks that caught it in an earlier full run (--catchers, --write-catchers). */
type Catchers = Record<string, string[]>;
async function readCatchers(path: string | undefined): Promise<Catchers> {
  if (!path) return {};
  try {
    return JSON.parse(await readFile(path, "utf8")) as Catchers;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw error;
  }
}
const recorded = await readCatchers(values.catchers);
/** At most two of a row's catchers, the fastest in its run: any one failing is the catch. */
function fastestCatchers(outcome: MutationOutcome): string[] {
  const ms = new Map(outcome.report.results.map((r) => [r.id, r.ms]));
  return [...outcome.caughtBy].sort((a, b) => (ms.get(a) ?? 0) - (ms.get(b) ?? 0)).slice(0, 2);
}
const exploration = exploreFromFlags(values.explore, values["explore-seed"]);
/** The exploration a row marked `caughtByExplorer` always runs with: `check`'s default budget, a fixed seed. */
const EXPLORER_CATCH = exploreFromFlags(String(DEFAULT_EXPLORE_RUNS), "5");
const explorationFor = (m: Mutation) => exploration ?? (m.caughtByExplorer ? EXPLORER_CATCH : undefined);
if (exploration) console.log(`Each run explores ${exploration.runs} sequences, seed ${exploration.seed}`);

const parallel = Number(values.parallel);
const wanted = values.mutation?.split(",").map((s) => s.trim());
const chosen = wanted ? mutations.filter((m) => wanted.includes(m.name)) : mutations;
if (wanted && chosen.length !== wanted.length) {
  const known = new Set(mutations.map((m) => m.name));
  console.error(`unknown mutation(s): ${wanted.filter((w) => !known.has(w)).join(", ")}`);
  process.exit(2);
}
/** Rows npm test proved caught, not run again here (--skip-npm-test). */
const provenByNpmTest = values["skip-npm-test"] ? chosen.filter((m) => inNpmTest(m) && !m.knownGap) : [];
/** Known gaps, not run here (--skip-known-gaps): none of them can change the exit code. */
const knownGapsSkipped = values["skip-known-gaps"] ? chosen.filter((m) => m.knownGap) : [];
const selected = chosen.filter((m) => !provenByNpmTest.includes(m) && !knownGapsSkipped.includes(m));
if (knownGapsSkipped.length > 0)
  console.log(
    `${knownGapsSkipped.length} known gaps not run (--skip-known-gaps); the score below is over the rest`,
  );

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
  // Unbroken, with the exploration the explorer's rows run with too: it must find nothing there either.
  const baseline = await runThroughProxy(lanes[0], null, {
    validator,
    explore: exploration ?? (selected.some((m) => m.caughtByExplorer) ? EXPLORER_CATCH : undefined),
  });
  const baselineFailures = baseline.results.filter((r) => r.level === "MUST" && r.outcome === "fail");
  if (baselineFailures.length > 0) exitCode = 1;

  const outcomes: MutationOutcome[] = new Array(selected.length);
  /** Rows their recorded catchers caught (--catchers): the whole suite was not run for them. */
  const byRecorded = new Set<string>();
  let next = 0;
  await Promise.all(
    lanes.map(async (demo) => {
      while (next < selected.length) {
        const i = next++;
        const m = selected[i];
        const catchers = values["area-only"] ? undefined : recorded[m.name];
        if (catchers && catchers.length > 0) {
          const quick = await runMutation(demo, m, {
            validator,
            explore: explorationFor(m),
            only: [...new Set([...catchers, ...(m.needs ?? [])])],
          });
          if (quick.caught) {
            outcomes[i] = quick;
            byRecorded.add(m.name);
            continue;
          }
        }
        outcomes[i] = await runMutation(demo, m, {
          validator,
          explore: explorationFor(m),
          only: values["explorer-only"] ? NO_CHECKS : values["area-only"] ? checksFor(m) : undefined,
        });
      }
    }),
  );
  const caught = outcomes.filter((o) => o.caught).length + provenByNpmTest.length;
  const total = outcomes.length + provenByNpmTest.length;
  if (outcomes.some((o) => !o.caught && !o.mutation.knownGap)) exitCode = 1;
  const pct = total === 0 ? 100 : Math.round((caught / total) * 1000) / 10;

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
      ? byRecorded.has(o.mutation.name)
        ? "yes (its recorded checks)"
        : "yes"
      : o.caught
        ? "yes (SHOULD only)"
        : o.mutation.knownGap
          ? "**no** (known gap)"
          : "**no**";
    lines.push(
      `| \`${o.mutation.name}\` | ${o.mutation.area} | ${caughtText} | ${o.caughtBy.join(", ") || "—"} | ${others} |`,
    );
  }
  for (const m of provenByNpmTest) {
    lines.push(`| \`${m.name}\` | ${m.area} | yes (npm test, its own checks) | — | — |`);
  }
  lines.push("", `Score: ${caught}/${total} (${pct}%)`, "");
  // Every row, caught or not: a row npm test proved counts as caught.
  const verdicts = [
    ...outcomes.map((o) => ({ mutation: o.mutation, caught: o.caught })),
    ...provenByNpmTest.map((mutation) => ({ mutation, caught: true })),
  ];
  const areas = [...new Set(verdicts.map((o) => o.mutation.area))];
  lines.push(
    `By area: ${areas
      .map((a) => {
        const of = verdicts.filter((o) => o.mutation.area === a);
        return `${a} ${of.filter((o) => o.caught).length}/${of.length}`;
      })
      .join(", ")}`,
    "",
  );
  const classes = [...new Set(verdicts.map((o) => o.mutation.table ?? "written for a check"))];
  lines.push(
    `By class: ${classes
      .map((c) => {
        const of = verdicts.filter((o) => (o.mutation.table ?? "written for a check") === c);
        return `${c} ${of.filter((o) => o.caught).length}/${of.length}`;
      })
      .join(", ")}`,
    "",
  );
  for (const o of outcomes.filter((x) => x.fired === 0)) {
    lines.push(`- not applied (its fault never fired in the run): \`${o.mutation.name}\``);
  }
  for (const o of outcomes.filter((x) => !x.caught)) {
    lines.push(`- not caught: \`${o.mutation.name}\` — ${o.mutation.knownGap ?? o.mutation.description}`);
  }
  lines.push(
    "",
    `(${values["area-only"] ? "area checks + breaks" : "full suite"} per mutation${exploration ? `, explorer ${exploration.runs} sequences from seed ${exploration.seed}` : ""}, ${lanes.length} lanes, ${Math.round((performance.now() - started) / 100) / 10} s${provenByNpmTest.length > 0 ? `; ${provenByNpmTest.length} rows npm test proved caught not run again` : ""}${byRecorded.size > 0 ? `; ${byRecorded.size} rows caught by their recorded checks, the whole suite not run for them` : ""})`,
  );
  console.log(lines.join("\n"));

  if (values["write-catchers"]) {
    const file = values["write-catchers"];
    const merged: Catchers = { ...(await readCatchers(file)) };
    for (const o of outcomes) {
      if (o.caught && !byRecorded.has(o.mutation.name)) merged[o.mutation.name] = fastestCatchers(o);
      else if (!o.caught) delete merged[o.mutation.name];
    }
    const sorted = Object.fromEntries(Object.entries(merged).sort(([a], [b]) => a.localeCompare(b)));
    // One row a line, as Biome formats it (npm run lint reads the file).
    const rows = Object.entries(sorted).map(
      ([name, ids]) => `  ${JSON.stringify(name)}: ${JSON.stringify(ids).replaceAll(",", ", ")}`,
    );
    await writeFile(file, `{\n${rows.join(",\n")}\n}\n`);
    console.log(`wrote ${file} (${Object.keys(sorted).length} rows)`);
  }

  if (values.json) {
    await writeFile(
      values.json,
      JSON.stringify(
        {
          baseline: { mustFailures: baselineFailures.map((r) => r.id) },
          score: { caught, total, provenByNpmTest: provenByNpmTest.map((m) => m.name) },
          mutations: outcomes.map((o) => ({
            name: o.mutation.name,
            area: o.mutation.area,
            caught: o.caught,
            caughtBy: o.caughtBy,
            fired: o.fired,
            failed: o.failed,
            ms: o.ms,
            // What each catching check said: an explorer finding, a sweep over the checks' or the explorer's traffic.
            reasons: o.report.results
              .filter((r) => o.caughtBy.includes(r.id))
              .map((r) => ({ id: r.id, details: r.details.map((d) => d.message.slice(0, 300)) })),
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
