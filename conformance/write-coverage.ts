/**
 * Writes conformance/COVERAGE.md from the coverage map and the catalogue (`npm run coverage`); with
 * --check it only says whether the file is current (exit 1 when stale or when the map and catalogue disagree).
 */
import { readFile, writeFile } from "node:fs/promises";
import { catalogue } from "./catalogue.ts";
import { coverageProblems, modelRuleProblems, renderCoverage } from "./coverage.ts";

export const COVERAGE_FILE = new URL("./COVERAGE.md", import.meta.url);

const problems = [...coverageProblems(catalogue), ...modelRuleProblems(catalogue)];
if (problems.length > 0) {
  process.stderr.write(`coverage map and catalogue disagree:\n  ${problems.join("\n  ")}\n`);
  process.exit(1);
}
const text = renderCoverage(catalogue);
if (process.argv.includes("--check")) {
  const current = await readFile(COVERAGE_FILE, "utf8").catch(() => "");
  if (current !== text) {
    process.stderr.write("conformance/COVERAGE.md is stale: run npm run coverage\n");
    process.exit(1);
  }
} else {
  await writeFile(COVERAGE_FILE, text);
  process.stdout.write(`wrote conformance/COVERAGE.md\n`);
}
