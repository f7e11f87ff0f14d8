/**
 * The page of `agent-api check --ui`: one self-contained document (inline style and script, nothing from a
 * CDN, so it works offline). Results arrive as the HTML report's own fragments (reports/html.ts
 * `resultHtml`), so the page and the report read alike: the verdict first, then what to fix.
 */
import { escapeMarkup as esc } from "../reports/escape.ts";
import { REPORT_CSS } from "../reports/html.ts";
import type { FormField } from "./form.ts";

export interface PageOptions {
  fields: FormField[];
  defaults: { values: Record<string, string>; secretsGiven: string[] };
}

const UI_CSS = `
form.run{display:grid;grid-template-columns:minmax(12rem,max-content) 1fr;gap:6px 14px;align-items:center;margin:0 0 12px}
form.run label{color:var(--muted);font-size:13px}
form.run input,form.run textarea,form.run select{font:13px var(--mono);padding:4px 6px;border:1px solid var(--line);border-radius:4px;background:var(--bg);color:var(--fg);width:100%}
form.run fieldset{grid-column:1/-1;border:1px solid var(--line);border-radius:6px;padding:8px 12px;display:grid;grid-template-columns:minmax(12rem,max-content) 1fr;gap:6px 14px;align-items:center}
form.run legend{font-weight:600;font-size:13px}
.actions{grid-column:1/-1;display:flex;gap:10px;align-items:center}
button{font:600 13px system-ui,sans-serif;padding:5px 14px;border-radius:6px;border:1px solid var(--line);background:var(--panel);color:var(--fg);cursor:pointer}
button.primary{background:var(--pass);color:#fff;border-color:var(--pass)}
button:disabled{opacity:.5;cursor:default}
button.small{font-size:11.5px;padding:1px 8px;font-weight:500}
.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin:8px 0}
.filters select,.filters input{font:13px system-ui,sans-serif;padding:3px 6px;border:1px solid var(--line);border-radius:4px;background:var(--bg);color:var(--fg)}
.ui-tools{display:flex;gap:10px;align-items:baseline;padding:0 8px 6px 12px;font-size:12.5px;color:var(--muted)}
.ui-tools .rules{flex:1}.ui-tools ul{margin:0;padding-left:16px}.ui-tools summary{cursor:pointer}
.ui-check{border-bottom:1px solid var(--line)}
.ui-check .row{border-bottom:none}
.section-head{display:flex;gap:10px;align-items:baseline}
.section-head h2{flex:1}
.err{color:var(--fail);font-weight:600}
.hist td,.hist th{padding:2px 10px 2px 0;text-align:left;font-size:13px}
.downloads a{margin-right:12px}
`;

function fieldHtml(field: FormField, defaults: PageOptions["defaults"]): string {
  const id = `in${field.flag.replaceAll("-", "_")}`;
  const value = defaults.values[field.flag] ?? "";
  const given = defaults.secretsGiven.includes(field.flag);
  const placeholder = field.secret
    ? given
      ? "given on the command line (kept in memory)"
      : "kept in this process's memory only"
    : field.flag;
  const attrs = `id="${id}" name="${esc(field.flag)}" placeholder="${esc(placeholder)}"${
    field.required && !given ? " required" : ""
  } autocomplete="off" spellcheck="false"`;
  const control = field.repeatable
    ? `<textarea ${attrs} rows="2">${esc(value)}</textarea>`
    : `<input ${attrs} type="${field.secret ? "password" : "text"}" value="${esc(value)}">`;
  return `<label for="${id}">${esc(field.label)}</label>${control}`;
}

export function uiPage(options: PageOptions): string {
  const group = (name: FormField["group"]) =>
    options.fields
      .filter((f) => f.group === name)
      .map((f) => fieldHtml(f, options.defaults))
      .join("");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Agent Conversation API conformance</title>
<style>${REPORT_CSS}${UI_CSS}</style>
</head>
<body>
<div class="page">
<h1>Agent Conversation API conformance</h1>
<details id="form-box" class="box" open><summary><strong>Deployment and inputs</strong> (the flags of <code>agent-api check</code>)</summary>
<form class="run" id="run-form" autocomplete="off">
${group("deployment")}
<fieldset><legend>Optional inputs (checks that need one skip and say so)</legend>${group("inputs")}</fieldset>
<fieldset><legend>Run</legend>${group("run")}
<label for="in_level">Levels</label><select id="in_level" name="--level"><option value="">all (MUST, SHOULD, INFO)</option><option>MUST</option><option>SHOULD</option></select>
</fieldset>
<div class="actions"><button class="primary" id="run" type="submit">Run the suite</button><span id="form-error" class="err"></span></div>
</form>
</details>
<div id="run-view" hidden>
<dl class="meta" id="run-meta"></dl>
<div id="verdict" class="verdict"></div>
<table class="levels"><thead><tr><th>Level</th><th></th><th>passed</th><th>failed</th><th>skipped</th></tr></thead><tbody id="levels"></tbody></table>
<p class="downloads" id="downloads" hidden>Download the report: <a id="dl-json">JSON</a><a id="dl-xml">JUnit XML</a><a id="dl-html">HTML</a></p>
<div class="filters">Show
<select id="f-outcome"><option value="">every outcome</option><option value="fail">failed</option><option value="skip">skipped</option><option value="pass">passed</option></select>
<select id="f-level"><option value="">every level</option><option>MUST</option><option>SHOULD</option><option>INFO</option></select>
<select id="f-section"><option value="">every section</option></select>
<input id="f-id" placeholder="check id contains…" size="22">
</div>
<main id="results"></main>
</div>
<section id="history-box"><h2>Earlier runs</h2>
<table class="hist"><thead><tr><th>started</th><th>deployment</th><th>passed</th><th>failed</th><th>skipped</th><th></th></tr></thead><tbody id="history"></tbody></table>
<p id="cmp-box"><label>Compare <select id="cmp-from"></select></label> <label>with <select id="cmp-to"></select></label> <button id="compare" type="button">Compare</button></p>
<div id="comparison"></div>
</section>
<footer>Runs on this machine through the conformance library of <code>agent-api check</code>. Keys stay in this process's memory; kept runs hold masked exchanges only.</footer>
</div>
<script>
"use strict";
// The page's token is never in the page: the command gives it once, in the fragment of the address it prints
// (a fragment is never sent to the server, so no response carries it), and the tab keeps it for its reloads.
const TOKEN = (() => {
  const given = /^#token=([0-9a-f]{32})$/.exec(location.hash);
  if (given) {
    sessionStorage.setItem("agent-api-ui-token", given[1]);
    history.replaceState(null, "", location.pathname + location.search);
    return given[1];
  }
  return sessionStorage.getItem("agent-api-ui-token") || "";
})();
const LEVELS = ["MUST", "SHOULD", "INFO"];
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"})[c]);
window.__arrivals = [];
let current = null;
let source = null;

async function api(path, init) {
  const res = await fetch(path, init);
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.message || ("status " + res.status));
  return body;
}
function post(path, body) {
  return api(path, { method: "POST", headers: { "content-type": "application/json", "x-ui-token": TOKEN }, body: JSON.stringify(body) });
}

function tally() {
  const rows = [...document.querySelectorAll(".ui-check")];
  const count = (lvl) => {
    const of = rows.filter((r) => !lvl || r.dataset.level === lvl);
    const n = (o) => of.filter((r) => r.dataset.outcome === o).length;
    return { p: n("pass"), f: n("fail"), s: n("skip") };
  };
  // A bar fills against the checks the run will do at its level, so it is full only once they all have their
  // verdict; a row shown from an earlier run (a re-run keeps them) counts as done.
  const planned = (lvl) => (current && current.planned ? (lvl ? current.planned.levels[lvl] : current.planned.total) : 0);
  const bar = (c, lvl) => {
    const t = Math.max(c.p + c.f + c.s, planned(lvl));
    const seg = (n, cls) => n ? '<span class="' + cls + '" style="width:' + (n / t * 100).toFixed(2) + '%"></span>' : "";
    return '<div class="bar">' + (t ? seg(c.p, "p") + seg(c.f, "f") + seg(c.s, "s") : "") + "</div>";
  };
  const cell = (n, cls) => '<td class="' + (n ? cls : "zero") + '">' + n + "</td>";
  $("levels").innerHTML = [...LEVELS, ""].map((l) => {
    const c = count(l);
    return "<tr><td>" + (l ? '<span class="lvl ' + l + '">' + l + "</span>" : "<b>all</b>") + '</td><td class="barcell">' + bar(c, l) + "</td>" + cell(c.p, "n-pass") + cell(c.f, "n-fail") + cell(c.s, "n-skip") + "</tr>";
  }).join("");
  for (const head of document.querySelectorAll(".section-head")) {
    const of = rows.filter((r) => r.dataset.section === head.dataset.section);
    const f = of.filter((r) => r.dataset.outcome === "fail").length;
    head.querySelector(".tally").innerHTML = of.length + " done" + (f ? ' · <span class="n-fail">' + f + " failed</span>" : "");
  }
  return { done: rows.length, mustFailed: rows.filter((r) => r.dataset.level === "MUST" && r.dataset.outcome === "fail").length };
}

function sectionBox(section) {
  let box = document.querySelector('section[data-section="' + CSS.escape(section) + '"]');
  if (box) return box;
  box = document.createElement("section");
  box.dataset.section = section;
  box.innerHTML = '<div class="section-head" data-section="' + esc(section) + '"><h2>' + esc(section) + '<span class="tally"></span></h2><button class="small rerun-section" type="button">Re-run section</button></div><div class="checks"></div>';
  box.querySelector(".rerun-section").addEventListener("click", () => {
    const ids = [...box.querySelectorAll(".ui-check")].map((c) => c.dataset.id);
    rerun(ids);
  });
  $("results").append(box);
  const option = document.createElement("option");
  option.value = option.textContent = section;
  $("f-section").append(option);
  return box;
}

function addResult(r) {
  window.__arrivals.push({ id: r.id, at: performance.now() });
  const old = document.querySelector('.ui-check[data-id="' + CSS.escape(r.id) + '"]');
  const el = document.createElement("div");
  el.className = "ui-check";
  Object.assign(el.dataset, { id: r.id, level: r.level, section: r.section, outcome: r.outcome });
  const items = r.rules.map((x) => "<li>" + esc(x) + "</li>").join("");
  const rules = r.rules.length === 0 ? "<span></span>" : r.rules.length <= 2
    ? '<div class="rules">API: <ul>' + items + "</ul></div>"
    : '<details class="rules"><summary>API: the ' + r.rules.length + " rules it verifies</summary><ul>" + items + "</ul></details>";
  el.innerHTML = r.html + '<div class="ui-tools">' + rules + '<button class="small rerun" type="button">Re-run</button></div>';
  el.querySelector(".rerun").addEventListener("click", () => rerun([r.id]));
  if (old) old.replaceWith(el);
  else {
    const box = sectionBox(r.section);
    const list = box.querySelector(".checks");
    if (r.outcome === "fail") {
      list.prepend(el);
      // What to fix first: a section with a failure moves above the ones without.
      if (r.level === "MUST") $("results").prepend(box);
    } else list.append(el);
  }
  applyFilters();
}

function verdict(text, ok, small) {
  const v = $("verdict");
  v.className = "verdict " + (ok === null ? "" : ok ? "ok" : "bad");
  v.innerHTML = esc(text) + "<small>" + (small ? esc(small) : "&nbsp;") + "</small>";
}

function follow(id, keep) {
  if (source) source.close();
  current = { id, total: 0, done: false, planned: null };
  // The run's id in the address: a reload follows it again (the server replays its verdicts so far).
  history.replaceState(null, "", "#run=" + encodeURIComponent(id));
  document.body.dataset.state = "running";
  if (!keep) { $("results").innerHTML = ""; $("f-section").length = 1; }
  $("run-view").hidden = false;
  $("form-box").open = false;
  $("downloads").hidden = true;
  verdict("Running…", null, "");
  source = new EventSource("/api/runs/" + encodeURIComponent(id) + "/events");
  source.addEventListener("run", (e) => {
    const run = JSON.parse(e.data);
    current.total = run.total;
    current.planned = { total: run.total, levels: run.levels };
    tally();
    $("run-meta").innerHTML = "<dt>Base URL</dt><dd><code>" + esc(run.baseUrl) + "</code></dd><dt>Agent</dt><dd><code>" + esc(run.agent) + "</code></dd><dt>Started</dt><dd>" + esc(run.startedAt) + "</dd><dt>Run</dt><dd><code>" + esc(run.id) + "</code></dd>";
  });
  source.addEventListener("result", (e) => {
    addResult(JSON.parse(e.data));
    const t = tally();
    if (!current.done) verdict("Running… " + t.done + " of " + current.total + " checks", t.mustFailed ? false : null, t.mustFailed ? t.mustFailed + " MUST check(s) failed so far" : "");
  });
  source.addEventListener("done", (e) => {
    const done = JSON.parse(e.data);
    current.done = true;
    window.__arrivals.push({ id: "(done)", at: performance.now() });
    source.close();
    $("run").disabled = false;
    const t = tally();
    if (done.verdict === "error") verdict("The run could not start", false, done.error);
    else if (t.mustFailed) verdict(t.mustFailed + " MUST check(s) failed", false, "The deployment departs from the API; the run fails. Failed checks are first in each section.");
    else verdict("All MUST checks that ran passed", true, "");
    if (done.cost) $("verdict").insertAdjacentHTML("beforeend", '<p id="run-cost" class="small">Cost to the deployment: ' + esc(done.cost) + "</p>");
    if (done.verdict !== "error") {
      for (const [a, ext] of [["dl-json", "json"], ["dl-xml", "xml"], ["dl-html", "html"]]) $(a).href = "/api/runs/" + encodeURIComponent(id) + "/report." + ext;
      $("downloads").hidden = false;
    }
    document.body.dataset.state = "done";
    loadHistory();
  });
  source.addEventListener("error", () => {
    // A run this process no longer holds (the page was kept open across a restart) answers 404: say so
    // instead of waiting for ever.
    if (current.done || source.readyState !== EventSource.CLOSED) return;
    $("run").disabled = false;
    verdict("This run is not in this process any more", false, "Its report, when it finished, is under Earlier runs.");
    document.body.dataset.state = "idle";
  });
}

async function rerun(ids) {
  if (!current) return;
  // The state leaves "done" before the request is sent, so nothing watching the page reads the
  // previous run's end as this run's.
  document.body.dataset.state = "starting";
  try {
    const { id } = await post("/api/runs/" + encodeURIComponent(current.id) + "/rerun", { "--only": ids.join(",") });
    document.body.dataset.state = "running";
    follow(id, true);
  } catch (error) {
    document.body.dataset.state = "idle";
    $("form-error").textContent = error.message;
  }
}

function applyFilters() {
  const o = $("f-outcome").value, l = $("f-level").value, s = $("f-section").value, q = $("f-id").value.trim().toUpperCase();
  for (const el of document.querySelectorAll(".ui-check")) {
    const d = el.dataset;
    el.hidden = (o && d.outcome !== o) || (l && d.level !== l) || (s && d.section !== s) || (q && !d.id.includes(q));
  }
  for (const box of document.querySelectorAll("#results section")) box.hidden = ![...box.querySelectorAll(".ui-check")].some((c) => !c.hidden);
}
for (const id of ["f-outcome", "f-level", "f-section", "f-id"]) $(id).addEventListener("input", applyFilters);

async function loadHistory() {
  const { kept } = await api("/api/runs");
  const rows = [...kept].reverse();
  $("history").innerHTML = rows.map((r) => "<tr><td>" + esc(r.startedAt) + "</td><td><code>" + esc(r.agent) + "</code> at <code>" + esc(r.baseUrl) + '</code></td><td class="n-pass">' + r.counts.passed + '</td><td class="' + (r.counts.failed ? "n-fail" : "zero") + '">' + r.counts.failed + "</td><td>" + r.counts.skipped + '</td><td><a href="/api/runs/' + encodeURIComponent(r.id) + '/report.html">report</a></td></tr>').join("");
  const options = rows.map((r) => '<option value="' + esc(r.id) + '">' + esc(r.startedAt + " " + r.agent + " at " + r.baseUrl) + "</option>").join("");
  $("cmp-from").innerHTML = options;
  $("cmp-to").innerHTML = options;
  // A comparison needs two runs: the newest against the one before it, by default.
  if (rows.length > 1) $("cmp-from").selectedIndex = 1;
  $("cmp-box").hidden = rows.length < 2;
  compareReady();
  $("history-box").hidden = rows.length === 0;
}

function compareReady() {
  $("compare").disabled = $("cmp-from").value === $("cmp-to").value;
}
$("cmp-from").addEventListener("change", compareReady);
$("cmp-to").addEventListener("change", compareReady);

$("compare").addEventListener("click", async () => {
  const c = await api("/api/compare?from=" + encodeURIComponent($("cmp-from").value) + "&to=" + encodeURIComponent($("cmp-to").value));
  const list = (title, items, cls) => items.length ? "<h3>" + title + " (" + items.length + ')</h3><ul class="chips">' + items.map((x) => '<li class="' + cls + '"><span class="id">' + esc(x.id) + "</span> " + esc(x.from) + " → " + esc(x.to) + "</li>").join("") + "</ul>" : "";
  $("comparison").innerHTML = '<div class="box" id="comparison-result">' + (list("Newly failing", c.newlyFailing, "has-fail") + list("Newly passing", c.newlyPassing, "") + list("Other changes", c.otherChanges, "") || "<p>No check changed its outcome.</p>") + '<p class="note">' + c.unchanged + " checks unchanged.</p></div>";
});

$("run-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("form-error").textContent = "";
  const body = Object.fromEntries(new FormData($("run-form")).entries());
  document.body.dataset.state = "starting";
  try {
    $("run").disabled = true;
    const { id } = await post("/api/runs", body);
    document.body.dataset.state = "running";
    follow(id, false);
  } catch (error) {
    $("run").disabled = false;
    document.body.dataset.state = "idle";
    $("form-error").textContent = error.message;
  }
});

loadHistory();
if (!TOKEN) {
  $("run").disabled = true;
  $("form-error").textContent = "Open this page at the address agent-api check --ui printed: that address carries the page's token.";
}
const followed = /^#run=(.+)$/.exec(location.hash);
if (followed) {
  $("run").disabled = true;
  follow(decodeURIComponent(followed[1]), false);
}
</script>
</body>
</html>
`;
}
