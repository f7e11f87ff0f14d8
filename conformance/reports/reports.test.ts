/** The four report renderers over a hand-built run: pass, fail and skip at every level, hostile text. */
import { readFile } from "node:fs/promises";
import { Ajv2020 } from "ajv/dist/2020.js";
import { XMLValidator } from "fast-xml-parser";
import { describe, expect, it } from "vitest";
import type { CheckResult, Level, Outcome, RunReport } from "../types.ts";
import { progressLine, summarize, summaryText, timelineLines } from "./console.ts";
import { htmlReport } from "./html.ts";
import { jsonReport } from "./json.ts";
import { junitReport } from "./junit.ts";

const HOSTILE = `<script>alert("x")</script> ]]> & 'q' \u0001\u001b[31m`;

function result(id: string, level: Level, outcome: Outcome, section: string): CheckResult {
  const r: CheckResult = {
    id,
    level,
    section,
    title: `${level} ${outcome} title & <b>bold</b>`,
    outcome,
    ms: 1234,
    details: [],
    notes: [],
    exchanges: [],
  };
  if (outcome === "skip") r.reason = "needs --revoked-key";
  if (outcome === "fail") {
    r.reason = `expected 401, got 200 ${HOSTILE}`;
    r.details.push({
      message: `schema says no ${HOSTILE}`,
      pointer: "/data/0/id",
      schemaPath: "/paths/~1v1~1models/get #/required",
      evidence: `event: message_start\ndata: {"x":"${HOSTILE}"}\n\n`,
    });
    r.exchanges.push({
      method: "POST",
      url: "http://127.0.0.1:9/v1/agents/demo/conversations?x=1&y=<2>",
      requestHeaders: { "x-api-key": "sk-…abcd", "content-type": "application/json" },
      requestBody: '{"message":"hi"}',
      status: 200,
      responseHeaders: { "content-type": "text/event-stream" },
      responseBody: `data: ${HOSTILE}\n\n`,
      ms: 42,
    });
  }
  return r;
}

const levels: Level[] = ["MUST", "SHOULD", "INFO"];
const outcomes: Outcome[] = ["pass", "fail", "skip"];
const results = levels.flatMap((level, i) =>
  outcomes.map((outcome) =>
    result(
      `${level}-${outcome.toUpperCase()}-${i}`,
      level,
      outcome,
      i === 0 ? "Authentication" : `Events ${HOSTILE}`,
    ),
  ),
);
results[0].notes.push(`ping frames seen ${HOSTILE}`);

const report: RunReport = {
  runId: "r1x2",
  baseUrl: "http://127.0.0.1:9/?a=<b>&c",
  agent: `demo ${HOSTILE}`,
  startedAt: "2025-06-01T10:20:30.123Z",
  ms: 5678,
  results,
  warnings: [`cleanup: DELETE conversation acc-1 gave 500 ${HOSTILE}`],
};

// biome-ignore lint/suspicious/noControlCharactersInRegex: looking for raw control characters
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f]/;

describe("console", () => {
  it("prints one line per check in the documented format", () => {
    const by = (id: string) => results.find((r) => r.id === id) as CheckResult;
    expect(progressLine(by("MUST-FAIL-0"), false)).toMatch(/^FAIL MUST +MUST-FAIL-0 +1234 ms +expected 401/);
    expect(progressLine(by("MUST-SKIP-0"), false)).toMatch(
      /^SKIP MUST +MUST-SKIP-0 +1234 ms +needs --revoked-key$/,
    );
    expect(progressLine(by("SHOULD-PASS-1"), false)).toMatch(/^PASS SHOULD +SHOULD-PASS-1 +1234 ms$/);
    expect(progressLine(by("INFO-FAIL-2"), false)).toMatch(/does not fail the run/);
    for (const r of results) {
      const line = progressLine(r, false);
      expect(line).not.toContain("\n");
      expect(line).not.toMatch(CONTROL);
    }
    expect(progressLine(by("MUST-FAIL-0"), false)).toContain("\\u0001\\u001b[31m");
    expect(progressLine(by("MUST-PASS-0"), true)).toBe(
      `\u001b[32mPASS\u001b[0m MUST   ${"MUST-PASS-0".padEnd(36)}   1234 ms`,
    );
  });

  it("counts per outcome and level; INFO and SHOULD failures are not MUST failures", () => {
    const s = summarize(report);
    expect(s).toMatchObject({ total: 9, passed: 3, failed: 3, skipped: 3, mustFailed: 1 });
    expect(s.byLevel.INFO).toMatchObject({ passed: 1, failed: 1, skipped: 1 });
    const clean = summarize({ ...report, results: results.filter((r) => r.level !== "MUST") });
    expect(clean.mustFailed).toBe(0);
  });

  it("summarizes in a few lines", () => {
    const text = summaryText(report);
    expect(text).toContain("9 checks in 5.7 s: 3 passed, 3 failed, 3 skipped");
    expect(text).toMatch(/INFO +1 passed, 1 failed, 1 skipped/);
    expect(text).toContain("1 MUST check failed: MUST-FAIL-0");
    expect(text).toMatch(/^warning: cleanup/m);
    expect(text).not.toMatch(CONTROL);
    expect(summaryText({ ...report, results: [], warnings: [] })).toContain(
      "all MUST checks that ran passed",
    );
  });
});

describe("json", () => {
  it("round-trips every result with a summary", () => {
    const parsed = JSON.parse(jsonReport(report));
    expect(Object.keys(parsed).slice(0, 9)).toEqual([
      "formatVersion",
      "runId",
      "baseUrl",
      "agent",
      "startedAt",
      "ms",
      "summary",
      "findings",
      "warnings",
    ]);
    expect(parsed.summary.mustFailed).toBe(1);
    expect(parsed.results).toEqual(results);
    expect(Object.keys(parsed.results[1]).slice(0, 7)).toEqual([
      "id",
      "level",
      "section",
      "title",
      "outcome",
      "ms",
      "reason",
    ]);
    expect(jsonReport(report)).toBe(jsonReport(structuredClone(report)));
  });
});

describe("junit", () => {
  const xml = junitReport(report);

  it("is well-formed XML with nothing raw from the run", () => {
    expect(XMLValidator.validate(xml)).toBe(true);
    expect(xml).not.toMatch(CONTROL);
    expect(xml).not.toContain("<script>");
    expect(xml).not.toContain("]]>");
    expect(xml).toContain("&lt;script&gt;");
    expect(xml).toContain("&amp;");
    expect(xml).toContain("\uFFFD");
  });

  it("has a suite per section and a case per result", () => {
    expect(xml).toContain("<testsuites ");
    expect(xml.match(/<testsuite /g)).toHaveLength(2);
    expect(xml.match(/<testcase /g)).toHaveLength(results.length);
    expect(xml).toMatch(
      /<testcase classname="Authentication" name="MUST-FAIL-0 MUST fail title &amp; &lt;b&gt;/,
    );
    expect(xml).toContain('time="1.234"');
    // MUST and SHOULD failures are failures; the INFO one is reported in system-out.
    expect(xml.match(/<failure /g)).toHaveLength(2);
    expect(xml).toMatch(/<failure message="expected 401[^"]*" type="MUST">/);
    expect(xml).toMatch(/<system-out>INFO check did not hold/);
    expect(xml.match(/<skipped message="needs --revoked-key"\/>/g)).toHaveLength(3);
    expect(xml).toContain('<testsuites name="agent-api check" tests="9" failures="2" errors="0" skipped="3"');
  });
});

describe("html", () => {
  const html = htmlReport(report);

  it("escapes everything from the run", () => {
    expect(html).not.toContain("<script");
    expect(html).not.toContain("<b>bold");
    expect(html).not.toMatch(CONTROL);
    expect(html).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
    expect(html).toContain("?x=1&amp;y=&lt;2&gt;");
    expect(html).not.toMatch(/https?:\/\/(?!127\.0\.0\.1)/);
    expect(html).not.toMatch(/\b(src|href)="(?!#)/);
  });

  it("shows each check, sections by name, failures open and first", () => {
    for (const r of results) expect(html).toContain(`>${r.id}<`);
    expect(html).toContain("<h2>Authentication");
    expect(html.match(/<details open class="result/g)).toHaveLength(3);
    const auth = html.slice(html.indexOf("<h2>Authentication"));
    expect(auth.indexOf("MUST-FAIL-0")).toBeLessThan(auth.indexOf("MUST-SKIP-0"));
    expect(auth.indexOf("MUST-SKIP-0")).toBeLessThan(auth.indexOf("MUST-PASS-0"));
    expect(html).toContain("1 MUST check failed");
    expect(html).toContain("skipped: needs --revoked-key");
    expect(html).toContain("/data/0/id");
  });
});

describe("timelines of judged turns", () => {
  const timeline = {
    headersMs: 4,
    firstByteMs: 5,
    blocks: [
      { index: 0, type: "tool_use", startMs: 6, stopMs: 6 },
      { index: 1, type: "tool_result", startMs: 3012, stopMs: 3012 },
    ],
    finalEventMs: 3020,
    endMs: 3021,
  };
  const passed: CheckResult = {
    ...result("SSE-STREAMED-INCREMENTAL", "MUST", "pass", "What the service does"),
    timelines: [{ label: `slow turn ${HOSTILE}`, timeline }],
  };
  const failed: CheckResult = {
    ...result("SSE-HEADERS-BEFORE-END", "MUST", "fail", "What the service does"),
  };
  failed.timelines = [{ label: "slow turn", timeline }];
  failed.exchanges = failed.exchanges.map((e) => ({ ...e, timeline }));
  const withTimelines: RunReport = { ...report, results: [passed, failed] };
  const text =
    "headers 4 ms · first byte 5 ms · #0 tool_use 6 ms · #1 tool_result 3,012 ms · final event 3,020 ms · end 3,021 ms";

  it("console: one indented line per judged turn under the check's line, for a pass too", () => {
    const lines = timelineLines(passed, false);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^ +slow turn /);
    expect(lines[0]).toContain(text);
    expect(lines[0]).not.toMatch(CONTROL);
    expect(timelineLines(results[0], false)).toEqual([]);
  });

  it("html: the judged turns' timelines on passing and failing checks, and each stream exchange's arrivals", () => {
    const html = htmlReport(withTimelines);
    expect(html.match(new RegExp(text, "g"))?.length).toBeGreaterThanOrEqual(3);
    expect(html).toContain("arrived: headers 4 ms");
    expect(html).not.toContain("<script");
  });

  it("json: the timelines as data, as the published schema describes them", async () => {
    const parsed = JSON.parse(jsonReport(withTimelines));
    expect(parsed.results[0].timelines[0].timeline).toEqual(timeline);
    expect(parsed.results[1].exchanges[0].timeline.blocks[1].type).toBe("tool_result");
    const schema = JSON.parse(await readFile(new URL("../report.schema.json", import.meta.url), "utf8"));
    const validate = new Ajv2020({ allErrors: true, strict: false }).compile(schema);
    expect(validate(parsed), JSON.stringify(validate.errors)).toBe(true);
    const broken = structuredClone(parsed);
    broken.results[0].timelines[0].timeline.headersMs = "soon";
    expect(validate(broken)).toBe(false);
  });
});
