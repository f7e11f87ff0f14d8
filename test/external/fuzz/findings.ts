/** Classes of findings, and the spec gaps known to be the spec's rather than the server's. */

import type { Finding } from "./types.ts";

/** The `message` of a JSON error body, with an echoed URL, quoted values and numbers elided. */
export function serverMessageOf(text: string): string | undefined {
  let message: unknown;
  try {
    message = (JSON.parse(text) as { message?: unknown }).message;
  } catch {
    return undefined;
  }
  if (typeof message !== "string") return undefined;
  return message
    .replace(/^'.*'/s, "'<url>'")
    .replace(/"[^"]*"/g, '"…"')
    .replace(/\d+/g, "N")
    .slice(0, 100);
}

/** The class of a finding: kind, status, operation, and the server's message with specifics elided. */
export function classOf(finding: Finding): string {
  const message =
    finding.kind === "undocumented-status" || finding.kind === "5xx"
      ? (finding.serverMessage ?? (finding.response ?? "").slice(0, 60))
      : finding.message.replace(/\d+/g, "N").slice(0, 100);
  return `${finding.kind} ${finding.status ?? "-"} ${finding.operation}: ${message}`;
}

/**
 * Statuses the server sends that the spec does not document for the operation. Each is a known
 * disagreement between the reference server (its HTTP layer, Fastify) and the spec, reported to the lead;
 * anything else undocumented fails fuzz.test.ts.
 */
export const KNOWN_SPEC_GAPS: { id: string; status: number; message: RegExp; why: string }[] = [
  {
    id: "request-head-too-large",
    status: 431,
    message: /^The request head is larger than N KiB$/,
    why: "a request head over Node's 16 KiB limit gets 431 (with Connection: close) before any route runs: HTTP's own limit, stated in the spec's description rather than on each operation",
  },
];

/** The known spec gap an undocumented-status finding belongs to, if any. */
export function knownSpecGap(finding: Finding): (typeof KNOWN_SPEC_GAPS)[number] | undefined {
  if (finding.kind !== "undocumented-status") return undefined;
  return KNOWN_SPEC_GAPS.find(
    (g) => g.status === finding.status && g.message.test(finding.serverMessage ?? ""),
  );
}
