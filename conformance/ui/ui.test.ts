/**
 * The conformance page as a person uses it, in Debian's Chromium driven by playwright-core: the form is
 * prefilled from the command's values, a run shows its verdicts as they land, a broken deployment (a
 * mutation of the self-test behind the fault proxy) shows its failing check with the API rule and the
 * evidence, that check re-runs alone, the report downloads, and two kept runs compare. Keys never reach the
 * disk or the screen.
 */
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";
import { startFaultProxy } from "../../test/selftest/proxy.ts";
import { chromium, launchChromium } from "../../test/spec/browser.ts";
import { envNameOf } from "../inputs.ts";
import { FORM_FIELDS } from "./form.ts";
import { startConformanceUi, type UiServer } from "./server.ts";

const skipReason = chromium ? undefined : "no system chromium (.ci/run installs Debian's chromium)";

let demo: DemoServer;
let proxy: { url: string; close(): Promise<void> };
let ui: UiServer;
let browser: Browser;
let reportsDir: string;
let keys: string[];

beforeAll(async () => {
  if (skipReason) return;
  demo = await startDemoServer(300, { unsafeNoIsolation: true });
  proxy = await startFaultProxy({ target: demo.url, mutation: "updated-at-frozen" });
  reportsDir = await mkdtemp(join(tmpdir(), "agent-api-ui-"));
  const defaults: Record<string, string> = {};
  for (const field of FORM_FIELDS) {
    const value = demo.envVars[envNameOf(field.flag)];
    if (value) defaults[field.flag] = value;
  }
  keys = FORM_FIELDS.filter((f) => f.secret)
    .map((f) => defaults[f.flag])
    .filter(Boolean);
  ui = await startConformanceUi({ reportsDir, defaults });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await ui?.close();
  await proxy?.close();
  await demo?.close();
  if (reportsDir) await rm(reportsDir, { recursive: true, force: true });
});

describe.skipIf(skipReason !== undefined)("agent-api check --ui in a browser", () => {
  it("runs the suite from the prefilled form, live, then on a broken deployment shows, re-runs and downloads the failing check", async () => {
    const page = await browser.newPage({ acceptDownloads: true });
    await page.goto(ui.url);
    // Prefilled from the command's values, keys masked and not in the page at all.
    expect(await page.inputValue('input[name="--base-url"]')).toBe(demo.url);
    expect(await page.getAttribute('input[name="--key"]', "type")).toBe("password");
    const html = await page.content();
    for (const key of keys) expect(html).not.toContain(key);

    // A run against the demo: verdicts arrive one by one, well before the run ends.
    await page.fill('input[name="--only"]', "CONSIST-*,MEANING-*,GET-TURN-COUNT");
    await page.click("#run");
    await page.waitForSelector(".ui-check");
    await page.waitForSelector('body[data-state="done"]', { timeout: 60_000 });
    const arrivals = await page.evaluate(
      () => (globalThis as unknown as { __arrivals: Array<{ id: string; at: number }> }).__arrivals,
    );
    const done = arrivals.find((a) => a.id === "(done)")?.at ?? 0;
    expect(arrivals.length).toBeGreaterThan(5);
    expect(done - arrivals[0].at).toBeGreaterThan(200);
    expect(await page.textContent("#verdict")).toContain("All MUST checks that ran passed");

    // The same page against a deployment that breaks one rule (updated_at never moves); the form folded
    // away when the run started, so it is opened first, as a person would.
    expect(await page.isVisible('input[name="--base-url"]')).toBe(false);
    await page.click("#form-box > summary");
    await page.fill('input[name="--base-url"]', proxy.url);
    await page.fill('input[name="--only"]', "MEANING-*,GET-TURN-COUNT");
    await page.click("#run");
    await page.waitForSelector('body[data-state="done"]', { timeout: 60_000 });
    expect(await page.textContent("#verdict")).toContain("MUST check(s) failed");
    await page.selectOption("#f-outcome", "fail");
    const visible = await page.$$eval(".ui-check:not([hidden])", (els) =>
      els.map((e) => (e as unknown as { dataset: Record<string, string> }).dataset.id),
    );
    expect(visible).toEqual(["MEANING-TIMESTAMPS-MOVE"]);
    const failing = page.locator('.ui-check[data-id="MEANING-TIMESTAMPS-MOVE"]');
    const text = await failing.textContent();
    expect(text).toContain("API: Resources/Conversation");
    expect(text).toContain("HTTP exchanges");
    expect(text).toContain("updated_at");

    // Re-run that check alone: a new run of one check, still failing.
    await failing.locator("button.rerun").click();
    await page.waitForSelector('body[data-state="done"]', { timeout: 60_000 });
    const runMeta = await page.textContent("#run-meta");
    expect(runMeta).toContain(proxy.url);
    expect(
      await page.locator('.ui-check[data-id="MEANING-TIMESTAMPS-MOVE"]').getAttribute("data-outcome"),
    ).toBe("fail");

    // The report of the re-run downloads as JSON with that one check.
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#dl-json")]);
    const report = JSON.parse(await readFile((await download.path()) as string, "utf8"));
    expect(report.results.map((r: { id: string }) => r.id)).toEqual(["MEANING-TIMESTAMPS-MOVE"]);
    expect(report.results[0].outcome).toBe("fail");

    // Earlier runs: the demo's run against the broken one shows what newly fails.
    await page.waitForFunction('document.querySelectorAll("#history tr").length >= 3');
    const options = await page.$$eval("#cmp-from option", (els) =>
      els.map((e) => ({ value: (e as unknown as { value: string }).value, text: e.textContent ?? "" })),
    );
    const passing = options.find((o) => o.text.includes(demo.url));
    const broken = options.find((o) => o.text.includes(proxy.url));
    expect(passing && broken).toBeTruthy();
    await page.selectOption("#cmp-from", (passing as { value: string }).value);
    await page.selectOption("#cmp-to", (broken as { value: string }).value);
    await page.click("#compare");
    const comparison = await page.textContent("#comparison-result");
    expect(comparison).toContain("Newly failing");
    expect(comparison).toContain("MEANING-TIMESTAMPS-MOVE");

    // What the page kept on disk holds no key.
    for (const file of await readdir(reportsDir)) {
      const saved = await readFile(join(reportsDir, file), "utf8");
      for (const key of keys) expect(saved).not.toContain(key);
    }
    await page.close();
  }, 120_000);

  it("refuses work from a page that does not carry its token, and a foreign Host", async () => {
    const run = await fetch(new URL("/api/runs", ui.url), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ "--base-url": "http://attacker.invalid" }),
    });
    expect(run.status).toBe(403);
    const { request } = await import("undici");
    const rebound = await request(ui.url, { headers: { host: "attacker.invalid" } });
    expect(rebound.statusCode).toBe(421);
    await rebound.body.dump();
  });
});
