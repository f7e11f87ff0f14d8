/**
 * One self-contained HTML page for people: run facts and a verdict up top, a bar per level, then the
 * checks by API section with failures first and open. Inline CSS only, no scripts, no external resources;
 * readable in dark mode and printed (failures are open by default, so they print).
 * Everything from the run (ids, reasons, evidence, bodies) goes through `esc`.
 */

import { costText } from "../run-cost.ts";
import { timelineText } from "../sse/timing.ts";
import type { CheckResult, Exchange, FailureDetail, Level, RunReport } from "../types.ts";
import { type Counts, summarize } from "./console.ts";
import { escapeMarkup as esc } from "./escape.ts";

const LEVELS: Level[] = ["MUST", "SHOULD", "INFO"];
const LEVEL_RANK: Record<Level, number> = { MUST: 0, SHOULD: 1, INFO: 2 };
const OUTCOME_RANK = { fail: 0, xfail: 1, skip: 2, pass: 3 };

/** The report's stylesheet; the live page (conformance/ui/) uses it too, so both look alike. */
export const REPORT_CSS = `
:root{color-scheme:light dark;--bg:#fff;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--panel:#f6f8fa;
--pass:#1a7f37;--fail:#cf222e;--skip:#9a6700;--info:#8250df;--pass-bg:#dafbe1;--fail-bg:#ffebe9;--skip-bg:#fff8c5;
--info-bg:#fbefff;--mono:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--line:#3d444d;--panel:#151b23;
--pass:#3fb950;--fail:#f85149;--skip:#d29922;--info:#ab7df8;--pass-bg:#12261e;--fail-bg:#2d1214;--skip-bg:#272115;
--info-bg:#231a36}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
.page{max-width:1180px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:22px;margin:0 0 12px}
h2{font-size:17px;margin:32px 0 8px;padding-bottom:6px;border-bottom:1px solid var(--line)}
h2 .tally{font-size:13px;font-weight:normal;color:var(--muted);margin-left:8px}
h3{font-size:13px;margin:14px 0 6px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
code,pre{font-family:var(--mono);font-size:12.5px}
a{color:inherit}
.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0 0 16px}
.meta dt{color:var(--muted)}.meta dd{margin:0;overflow-wrap:anywhere}
.verdict{padding:10px 14px;border-radius:6px;font-weight:600;font-size:15px;margin:0 0 14px;border:1px solid}
.verdict.ok{color:var(--pass);background:var(--pass-bg)}.verdict.bad{color:var(--fail);background:var(--fail-bg)}
.verdict small{display:block;font-weight:normal;color:var(--fg);font-size:13px}
table.levels{border-collapse:collapse;margin:0 0 14px}
.levels td,.levels th{padding:3px 10px 3px 0;text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.levels th{font-weight:600;color:var(--muted);font-size:12px}.levels th:first-child,.levels td:first-child{text-align:left}
.levels td.barcell{width:420px}
.bar{display:flex;height:12px;border-radius:3px;overflow:hidden;background:var(--line);print-color-adjust:exact;-webkit-print-color-adjust:exact}
.bar span{display:block;height:100%}.bar .p{background:var(--pass)}.bar .f{background:var(--fail)}.bar .s{background:var(--skip)}
.n-pass{color:var(--pass)}.n-fail{color:var(--fail);font-weight:600}.n-skip{color:var(--skip)}.n-xfail{color:var(--info)}.zero{color:var(--muted);font-weight:normal}
.box{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:8px 14px;margin:0 0 12px}
.box ul{margin:4px 0;padding-left:18px}
.box ul.chips{display:flex;flex-wrap:wrap;gap:6px;margin:6px 0 4px;padding:0;list-style:none}
.chips li{border:1px solid var(--line);border-radius:12px;padding:1px 9px;font-size:12.5px;background:var(--bg)}
.chips a{text-decoration:none}.chips .has-fail{border-color:var(--fail)}
.row,details.result>summary{display:grid;grid-template-columns:3.4em 4.2em minmax(0,17.5rem) 1fr 5em;gap:10px;align-items:baseline;padding:4px 8px}
.row{border-bottom:1px solid var(--line)}
.row .reason{grid-column:3/6;color:var(--muted);font-size:13px}
.timeline{grid-column:3/6;font-family:var(--mono);font-size:12px;color:var(--muted);overflow-wrap:anywhere}
.id{font-family:var(--mono);font-size:12.5px;overflow-wrap:anywhere}
.ms{text-align:right;color:var(--muted);font-variant-numeric:tabular-nums;font-size:12.5px}
.badge{font:600 11px/1.6 var(--mono);text-align:center;border-radius:3px;padding:0 4px;print-color-adjust:exact;-webkit-print-color-adjust:exact}
.badge.pass{color:var(--pass);background:var(--pass-bg)}.badge.fail{color:var(--fail);background:var(--fail-bg)}
.badge.skip{color:var(--skip);background:var(--skip-bg)}.badge.info,.badge.xfail{color:var(--info);background:var(--info-bg)}
.lvl{font:11px/1.6 var(--mono);color:var(--muted)}.lvl.MUST{color:var(--fg);font-weight:600}
details.result{border:1px solid var(--line);border-left:4px solid var(--fail);border-radius:6px;margin:8px 0;background:var(--bg)}
details.result.info{border-left-color:var(--info)}
details.result>summary{cursor:pointer;list-style:none;background:var(--panel);border-radius:0 6px 6px 0}
details.result>summary::-webkit-details-marker{display:none}
details.result[open]>summary{border-bottom:1px solid var(--line);border-radius:0 6px 0 0}
.body{padding:6px 14px 12px}
.reason-main{font-weight:600;margin:6px 0;overflow-wrap:anywhere}
.note{color:var(--muted);font-size:13px}
ul.details{list-style:none;padding:0;margin:0}
ul.details>li{border-left:3px solid var(--line);padding:2px 0 2px 10px;margin:6px 0}
.kv{font-size:13px;color:var(--muted)}.kv code{color:var(--fg);overflow-wrap:anywhere}
pre{background:var(--panel);border:1px solid var(--line);border-radius:4px;padding:8px 10px;margin:4px 0;white-space:pre-wrap;overflow-wrap:anywhere;max-height:28em;overflow:auto}
details.ex{margin:6px 0;border:1px solid var(--line);border-radius:4px}
details.ex>summary{cursor:pointer;padding:4px 8px;font-family:var(--mono);font-size:12.5px;overflow-wrap:anywhere}
details.ex>summary b{margin-left:6px}details.ex>summary .ms{margin-left:6px}
.ex-body{display:grid;grid-template-columns:1fr 1fr;gap:10px;padding:0 8px 8px}
.ex-body h4{margin:4px 0 0;font-size:12px;color:var(--muted);font-weight:600}
.ex-body pre{max-height:22em}
footer{margin-top:40px;color:var(--muted);font-size:12px}
@media (max-width:760px){.row,details.result>summary{grid-template-columns:3.4em 4.2em 1fr}.row .title,.row .ms,summary .title,summary .ms{grid-column:1/-1}.ex-body{grid-template-columns:1fr}}
@media print{body{font-size:11px}.page{max-width:none;padding:0}pre{max-height:none;overflow:visible}
details.result,.row{break-inside:avoid}h2{break-after:avoid}}
`;

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function when(iso: string): string {
  return /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(iso)
    ? `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`
    : iso;
}

/** JSON bodies are easier to read indented; anything else (SSE, cut-short JSON) is shown as it came. */
function pretty(body: string): string {
  const trimmed = body.trim();
  if (!/^[[{]/.test(trimmed)) return body;
  try {
    return JSON.stringify(JSON.parse(trimmed), null, 2);
  } catch {
    return body;
  }
}

function pre(text: string): string {
  return `<pre>${esc(text)}</pre>`;
}

function tallyCells(c: Counts): string {
  const cell = (n: number, cls: string) => `<td class="${n === 0 ? "zero" : cls}">${n}</td>`;
  return (
    cell(c.passed, "n-pass") +
    cell(c.failed, "n-fail") +
    cell(c.skipped, "n-skip") +
    cell(c.expectedFailures, "n-xfail")
  );
}

function bar(c: Counts): string {
  const total = c.passed + c.failed + c.skipped;
  if (total === 0) return '<div class="bar"></div>';
  const seg = (n: number, cls: string) =>
    n === 0 ? "" : `<span class="${cls}" style="width:${((n / total) * 100).toFixed(2)}%"></span>`;
  return `<div class="bar">${seg(c.passed, "p")}${seg(c.failed, "f")}${seg(c.skipped, "s")}</div>`;
}

function anchor(r: CheckResult): string {
  return `c-${r.id.replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

function outcomeBadge(r: CheckResult): string {
  if (r.outcome === "fail" && r.level === "INFO") return '<span class="badge info">FAIL</span>';
  return `<span class="badge ${r.outcome}">${r.outcome.toUpperCase()}</span>`;
}

/** The five grid cells every result starts with: outcome, level, id, title, time. */
function cells(r: CheckResult): string {
  return (
    `${outcomeBadge(r)}<span class="lvl ${r.level}">${r.level}</span><span class="id">${esc(r.id)}</span>` +
    `<span class="title">${esc(r.title)}</span><span class="ms">${r.ms} ms</span>`
  );
}

/** `reason` is the check's own message, which a detail often repeats; it is not shown twice. */
function detail(d: FailureDetail, reason: string | undefined): string {
  const parts = d.message === reason ? [] : [`<div>${esc(d.message)}</div>`];
  if (d.pointer !== undefined) {
    parts.push(`<div class="kv">at <code>${d.pointer === "" ? "(root)" : esc(d.pointer)}</code></div>`);
  }
  if (d.schemaPath !== undefined)
    parts.push(`<div class="kv">schema <code>${esc(d.schemaPath)}</code></div>`);
  if (d.evidence !== undefined) parts.push(pre(d.evidence));
  return `<li>${parts.join("")}</li>`;
}

function headers(h: Record<string, string>): string {
  return Object.entries(h)
    .map(([name, value]) => `${name}: ${value}`)
    .join("\n");
}

function exchange(e: Exchange, open: boolean): string {
  const request = `${e.method} ${e.url}\n${headers(e.requestHeaders)}${
    e.requestBody === undefined ? "" : `\n\n${pretty(e.requestBody)}`
  }`;
  const response = `${e.status === 0 ? "no response" : e.status}\n${headers(e.responseHeaders)}${
    e.timeline ? `\n\narrived: ${timelineText(e.timeline)}` : ""
  }${e.responseBody === "" ? "" : `\n\n${pretty(e.responseBody)}`}`;
  return (
    `<details class="ex"${open ? " open" : ""}><summary>${esc(e.method)} ${esc(e.url)} <b>→ ${e.status}</b>` +
    `<span class="ms">${e.ms} ms</span></summary><div class="ex-body">` +
    `<div><h4>Request</h4>${pre(request)}</div><div><h4>Response</h4>${pre(response)}</div></div></details>`
  );
}

function failed(r: CheckResult): string {
  const info = r.level === "INFO";
  const parts = [`<p class="reason-main">${esc(r.reason ?? "failed")}</p>`];
  if (info) parts.push('<p class="note">INFO check: reported for information, it does not fail the run.</p>');
  if (r.details.length > 0)
    parts.push(`<ul class="details">${r.details.map((d) => detail(d, r.reason)).join("")}</ul>`);
  if (r.notes.length > 0) parts.push(`<h3>Notes</h3>${notes(r.notes)}`);
  if (r.timelines) parts.push(`<h3>Timelines</h3>${timelines(r)}`);
  if (r.exchanges.length > 0) {
    // The last request is usually the one the check judged; the others stay one line until clicked.
    const last = r.exchanges.length - 1;
    parts.push(
      `<h3>HTTP exchanges (${r.exchanges.length})</h3>${r.exchanges.map((e, i) => exchange(e, i === last)).join("")}`,
    );
  }
  return (
    `<details open class="result${info ? " info" : ""}" id="${anchor(r)}"><summary>${cells(r)}</summary>` +
    `<div class="body">${parts.join("")}</div></details>`
  );
}

function notes(list: string[]): string {
  return `<ul class="note">${list.map((n) => `<li>${esc(n)}</li>`).join("")}</ul>`;
}

/** The turns whose arrival times the check judged: headers, first byte, each block, the end. */
function timelines(r: CheckResult): string {
  return (r.timelines ?? [])
    .map(({ label, timeline }) => `<div class="timeline">${esc(label)}: ${esc(timelineText(timeline))}</div>`)
    .join("");
}

function row(r: CheckResult): string {
  const extra =
    r.outcome === "skip"
      ? `<span class="reason">skipped: ${esc(r.reason ?? "")} (${r.skipKind === "input" ? "input not given" : "not showable"})</span>`
      : r.outcome === "xfail"
        ? `<span class="reason">expected failure (${esc(r.expectedFailure ?? "")}): ${esc(r.reason ?? "")}</span>`
        : r.notes.length > 0
          ? `<span class="reason">${r.notes.map(esc).join("; ")}</span>`
          : "";
  return `<div class="row" id="${anchor(r)}">${cells(r)}${extra}${timelines(r)}</div>`;
}

/** One check as the report shows it: a failure open with its evidence, anything else one row. */
export function resultHtml(r: CheckResult): string {
  return r.outcome === "fail" ? failed(r) : row(r);
}

function sectionTally(results: CheckResult[]): string {
  const n = (o: string) => results.filter((r) => r.outcome === o).length;
  const parts = [
    n("fail") > 0 ? `<span class="n-fail">${n("fail")} failed</span>` : "",
    n("skip") > 0 ? `${n("skip")} skipped` : "",
    n("pass") > 0 ? `${n("pass")} passed` : "",
  ];
  return parts.filter(Boolean).join(" · ");
}

/** Sections with a failure that fails the run first, then other failures, then the rest; by name within. */
function sectionsOf(results: CheckResult[]): Array<[string, CheckResult[]]> {
  const map = new Map<string, CheckResult[]>();
  for (const r of results) map.set(r.section, [...(map.get(r.section) ?? []), r]);
  const rank = (rs: CheckResult[]) =>
    rs.some((r) => r.outcome === "fail" && r.level === "MUST")
      ? 0
      : rs.some((r) => r.outcome === "fail")
        ? 1
        : 2;
  return [...map].sort(([a, ra], [b, rb]) => rank(ra) - rank(rb) || a.localeCompare(b));
}

function byOutcome(a: CheckResult, b: CheckResult): number {
  return OUTCOME_RANK[a.outcome] - OUTCOME_RANK[b.outcome] || LEVEL_RANK[a.level] - LEVEL_RANK[b.level];
}

export function htmlReport(report: RunReport): string {
  const s = summarize(report);
  const sections = sectionsOf(report.results);
  const failures = report.results.filter((r) => r.outcome === "fail").sort(byOutcome);
  // What the verdict does not cover, said as plainly as the verdict itself.
  const caveats = [
    s.mustNotRun > 0
      ? `${plural(s.mustNotRun, "MUST check")} did not run (${s.byLevel.MUST.skippedForInput} for want of an input, ${s.byLevel.MUST.skippedUnobservable} not showable by the deployment).`
      : "",
    s.prevented > 0
      ? `${plural(s.prevented, "failure")} came from the deployment answering instead of the API (proxy page, TLS, body size limit).`
      : "",
    s.expectedFailures > 0 ? `${plural(s.expectedFailures, "expected failure")} listed in the baseline.` : "",
    s.staleExpectations.length > 0
      ? `${plural(s.staleExpectations.length, "listed expected failure")} passed: the baseline is stale (${esc(s.staleExpectations.join(", "))}).`
      : "",
  ]
    .filter(Boolean)
    .join(" ");
  const verdict =
    s.verdict === "fail"
      ? `<div class="verdict bad">${
          s.mustFailed > 0
            ? `${plural(s.mustFailed, "MUST check")} failed`
            : "The expected-failures baseline is stale"
        }<small>The run fails. ${caveats}</small></div>`
      : `<div class="verdict ok">All MUST checks that ran passed<small>${
          s.failed > 0
            ? `${plural(s.failed, "SHOULD or INFO check")} did not hold; those do not fail a run. `
            : ""
        }${caveats || "&nbsp;"}</small></div>`;
  const levelRows = LEVELS.map((l) => {
    const c = s.byLevel[l];
    return `<tr><td><span class="lvl ${l}">${l}</span></td><td class="barcell">${bar(c)}</td>${tallyCells(c)}</tr>`;
  }).join("");
  const sectionIds = new Map(sections.map(([name], i) => [name, `s-${i + 1}`]));
  const chips = sections
    .map(([name, rs]) => {
      const f = rs.filter((r) => r.outcome === "fail").length;
      return `<li${f > 0 ? ' class="has-fail"' : ""}><a href="#${sectionIds.get(name)}">${esc(name)}</a> ${
        f > 0 ? `<span class="n-fail">${f}✗</span> ` : ""
      }<span class="zero">${rs.length}</span></li>`;
    })
    .join("");
  // Ids only (titles are below, and on hover): a failing deployment can have dozens of these.
  const failureList =
    failures.length === 0
      ? ""
      : `<div class="box"><strong>Failed checks (${failures.length})</strong><ul class="chips">${failures
          .map(
            (r) =>
              `<li${r.level === "INFO" ? "" : ' class="has-fail"'}><a class="id" href="#${anchor(r)}" title="${esc(r.title)}">${esc(r.id)}</a> <span class="lvl ${r.level}">${r.level}</span></li>`,
          )
          .join("")}</ul></div>`;
  const findings =
    (report.findings ?? []).length === 0
      ? ""
      : `<div class="box"><strong>The deployment</strong>${notes(report.findings ?? [])}</div>`;
  const warnings =
    report.warnings.length === 0
      ? ""
      : `<details class="box"${report.warnings.length <= 5 ? " open" : ""}><summary><strong>Warnings (${report.warnings.length})</strong></summary>${notes(report.warnings)}</details>`;
  const body = sections
    .map(([name, rs]) => {
      const sorted = [...rs].sort(byOutcome);
      return (
        `<section id="${sectionIds.get(name)}"><h2>${esc(name)}<span class="tally">${sectionTally(rs)}</span></h2>` +
        sorted.map(resultHtml).join("") +
        "</section>"
      );
    })
    .join("\n");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Conformance: ${esc(report.agent)} at ${esc(report.baseUrl)}</title>
<style>${REPORT_CSS}</style>
</head>
<body>
<div class="page">
<header>
<h1>Agent Conversation API conformance report</h1>
<dl class="meta">
<dt>Base URL</dt><dd><code>${esc(report.baseUrl)}</code></dd>
<dt>Agent</dt><dd><code>${esc(report.agent)}</code></dd>
<dt>Run id</dt><dd><code>${esc(report.runId)}</code></dd>
<dt>Started</dt><dd>${esc(when(report.startedAt))}</dd>
<dt>Duration</dt><dd>${(report.ms / 1000).toFixed(1)} s for ${plural(s.total, "check")}</dd>${report.cost ? `\n<dt>Cost</dt><dd id="run-cost">${esc(costText(report.cost))}</dd>` : ""}
</dl>
</header>
${findings}
${verdict}
<table class="levels"><thead><tr><th>Level</th><th></th><th>passed</th><th>failed</th><th>skipped</th><th title="failures the expected-failures file lists">expected failures</th></tr></thead>
<tbody>${levelRows}<tr><td><b>all</b></td><td class="barcell">${bar(s)}</td>${tallyCells(s)}</tr></tbody></table>
${warnings}
${failureList}
<nav class="box"><strong>Sections</strong><ul class="chips">${chips}</ul></nav>
<main>
${body}
</main>
<footer>Generated by <code>agent-api check</code>. Levels: MUST (the API states it) fails the run; SHOULD (client guidance) and INFO (behaviour the API does not show) are reported only. Keys are masked and bodies cut short by the runner.</footer>
</div>
</body>
</html>
`;
}
