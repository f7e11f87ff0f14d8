import { knownSpecGap } from "./findings.ts";
import type { FuzzReport } from "./types.ts";

/** A human summary of a report (bench output, test failure messages). */
export function formatReport(report: FuzzReport): string {
  const lines = [
    `seed ${report.seed}: ${report.requests} requests in ${(report.ms / 1000).toFixed(1)} s (${report.requestsPerSecond} requests/s)`,
    `statuses: ${Object.entries(report.statusHistogram)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([s, n]) => `${s}×${n}`)
      .join("  ")}`,
    `5xx: ${report.counts["5xx"]}  crashes: ${report.counts.crash}  no response: ${report.counts["no-response"]}  hangs: ${report.counts.hang}`,
    `spec violations: ${report.counts["spec-violation"]}  undocumented statuses: ${report.counts["undocumented-status"]}  invalid requests accepted: ${report.counts["accepted-invalid"]}`,
    `liveness probes: ${report.probes.ok}/${report.probes.made}  protected data: ${report.integrity.length === 0 ? "byte-identical" : `${report.integrity.length} difference(s)`}`,
    `coverage: ${Object.entries(report.coverage)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([tag, n]) => `${tag}×${n}`)
      .join("  ")}`,
    "per operation (requests, of which the spec refuses; statuses):",
    ...Object.entries(report.operations).map(
      ([id, s]) =>
        `  ${id.padEnd(24)} ${String(s.requests).padStart(6)} ${String(s.invalidSent).padStart(6)}  ${Object.entries(
          s.statuses,
        )
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([st, n]) => `${st}×${n}`)
          .join(" ")}`,
    ),
  ];
  const classes = Object.entries(report.classes).sort(([a], [b]) => a.localeCompare(b));
  if (classes.length > 0) lines.push("distinct findings (count, class):");
  for (const [key, { count, example }] of classes) {
    const gap = knownSpecGap(example);
    lines.push(`  ${String(count).padStart(6)}  ${key}${gap ? `  [known spec gap: ${gap.id}]` : ""}`);
  }
  // Examples of what is not a known spec gap (the gaps are described in KNOWN_SPEC_GAPS).
  for (const f of classes.map(([, c]) => c.example).filter((f) => !knownSpecGap(f))) {
    lines.push(
      `FINDING ${f.kind} #${f.index} ${f.operation}: ${f.message}\n    ${f.request.method} ${f.request.path} ${JSON.stringify(f.request.headers)} body(${f.request.bodyBytes} B)=${f.request.body}\n    -> ${f.status ?? "-"} ${f.response ?? ""}`,
    );
  }
  for (const d of report.integrity) lines.push(`INTEGRITY ${d}`);
  return lines.join("\n");
}
