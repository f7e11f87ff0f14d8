/**
 * Judges the JSON report of `check` run from the image against the image's demo (scripts/container-ci.sh):
 * every MUST check that ran passed, no deployment-level finding, and the checks that need the tools ran and
 * passed, i.e. bubblewrap worked inside the container. Prints one line and exits 1 on anything else.
 *
 *   node scripts/container-verdict.ts REPORT.json
 */
import { readFileSync } from "node:fs";

/** Checks whose turns write, read or run files through the agent's tools. */
const TOOL_CHECKS = [
  "STATE-RESUME-KEEPS-FILES",
  "SEND-TOOL-BLOCKS",
  "SEND-ATTACHMENT-READ",
  "SEND-ATTACHMENT-DEDUP",
  "REPO-READ-ONLY-FALSE-PUSHES",
  "REPO-ATTACHMENTS-NOT-COMMITTED",
];

interface Report {
  summary: { verdict: string; byLevel: { MUST: { passed: number; failed: number } } };
  findings?: string[];
  results: Array<{ id: string; outcome: string; reason?: string }>;
}

const file = process.argv[2];
if (!file) {
  process.stderr.write("usage: node scripts/container-verdict.ts REPORT.json\n");
  process.exit(2);
}
let report: Report;
try {
  report = JSON.parse(readFileSync(file, "utf8")) as Report;
} catch (error) {
  process.stderr.write(`container-verdict: ${file} is not a JSON report: ${String(error)}\n`);
  process.exit(1);
}
const problems: string[] = [];
if (report.summary.verdict !== "pass") problems.push(`verdict ${report.summary.verdict}`);
for (const finding of report.findings ?? []) problems.push(`deployment finding: ${finding}`);
for (const id of TOOL_CHECKS) {
  const result = report.results.find((r) => r.id === id);
  if (!result) problems.push(`${id} did not run`);
  else if (result.outcome !== "pass") problems.push(`${id} ${result.outcome}: ${result.reason ?? ""}`);
}
if (problems.length > 0) {
  process.stderr.write(`container-verdict: the image's check did not pass:\n  ${problems.join("\n  ")}\n`);
  process.exit(1);
}
const must = report.summary.byLevel.MUST;
process.stdout.write(
  `container-verdict: check from the image passed: ${must.passed} MUST checks passed, 0 failed; tool checks passed in the sandbox: ${TOOL_CHECKS.join(", ")}\n`,
);
