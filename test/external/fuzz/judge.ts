/** Judging one response against the spec, and the coverage tags of a request. */

import type { SpecValidator } from "../../../conformance/spec-validator.ts";
import { checkTurnStream } from "../../../conformance/sse/grammar.ts";
import { serverMessageOf } from "./findings.ts";
import type { Plan, Setup } from "./requests.ts";
import type { Sent } from "./transport.ts";
import type { Finding } from "./types.ts";

export function excerpt(text: string, max = 300): string {
  return text.length <= max ? text : `${text.slice(0, max)}…(+${text.length - max})`;
}

export function describeRequest(plan: Plan): Finding["request"] {
  const text = plan.body?.toString("utf8") ?? "";
  return {
    method: plan.method,
    path: excerpt(plan.path, 300),
    headers: Object.fromEntries(Object.entries(plan.headers).map(([k, v]) => [k, excerpt(v, 80)])),
    body: excerpt(text, 600),
    bodyBytes: plan.body?.length ?? 0,
  };
}

/** Judges one response; returns the findings (empty when it is fine). */
export function judge(plan: Plan, index: number, sent: Sent, validator: SpecValidator): Finding[] {
  const findings: Finding[] = [];
  const op = plan.target;
  const contentType = sent.headers["content-type"];
  const text = sent.bytes.toString("utf8");
  const base = {
    serverMessage: serverMessageOf(text),
    operation: op && op !== plan.op ? `${plan.op.id}→${op.id}` : plan.op.id,
    index,
    request: describeRequest(plan),
    status: sent.status,
    response: excerpt(text, 600),
  };
  const documented = op?.statuses.includes(String(sent.status)) ?? false;
  // A documented 5xx (501 for `delivery: "async"`) is the API's answer, not a fault.
  if (sent.status >= 500 && !documented) {
    findings.push({ ...base, kind: "5xx", message: `status ${sent.status}` });
    return findings;
  }
  // A method and path the spec has no operation for: only "no 5xx, no crash" applies.
  if (!op) return findings;
  if (!documented) {
    const closeNote =
      sent.status === 431 && !/close/i.test(sent.headers.connection ?? "")
        ? "; the socket is then closed without `Connection: close`"
        : "";
    findings.push({
      ...base,
      kind: "undocumented-status",
      message: `status ${sent.status} is not documented for ${op.id} (documented: ${op.statuses.join(", ")})${closeNote}`,
    });
  }
  if (plan.specInvalid && sent.status >= 200 && sent.status < 300) {
    findings.push({
      ...base,
      kind: "accepted-invalid",
      message: `a request the spec refuses was answered ${sent.status} (${plan.note})`,
    });
  }
  for (const v of validator.validateResponse(op.id, sent.status, contentType, text)) {
    findings.push({
      ...base,
      kind: "spec-violation",
      message: `${v.message}${v.evidence ? ` — ${excerpt(v.evidence, 200)}` : ""}`,
    });
  }
  if (sent.status === 200 && (contentType ?? "").startsWith("text/event-stream")) {
    if (!sent.headers["x-conversation-id"]) {
      findings.push({
        ...base,
        kind: "spec-violation",
        message: "200 event stream without X-Conversation-Id",
      });
    }
    const reading = checkTurnStream(sent.bytes, { streamToolCalls: plan.streamToolCalls });
    for (const v of reading.violations.filter((x) => x.severity === "error").slice(0, 5)) {
      findings.push({ ...base, kind: "spec-violation", message: `${v.code}: ${v.message}` });
    }
    for (const event of reading.events) {
      for (const v of validator.validateEvent(event.name, event.data).slice(0, 3)) {
        findings.push({ ...base, kind: "spec-violation", message: v.message });
      }
    }
  }
  return findings;
}

export function coverageTags(plan: Plan, setup: Setup): string[] {
  const tags =
    plan.note === ""
      ? []
      : plan.note.split("|").map((part, i) => `${["body", "encoding", "content-type"][i] ?? "x"}:${part}`);
  if (plan.method !== plan.op.method) tags.push(`method:${plan.method}`);
  if (!plan.target) tags.push("no-operation");
  else if (plan.target !== plan.op) tags.push("re-routed");
  const text = `${plan.path} ${plan.body?.subarray(0, 4096).toString("utf8") ?? ""}`;
  if (setup.protectedIds.some((id) => text.includes(id))) tags.push(`protected-data:${plan.keyOwner}`);
  return tags;
}
