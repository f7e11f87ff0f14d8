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
/** The command's own values (its keys among them), bound to the demo's address. */
const defaults: Record<string, string> = {};

beforeAll(async () => {
  if (skipReason) return;
  demo = await startDemoServer(300, { unsafeNoIsolation: true });
  proxy = await startFaultProxy({ target: demo.url, mutation: "updated-at-frozen" });
  reportsDir = await mkdtemp(join(tmpdir(), "agent-api-ui-"));
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
  it("fills the level bars as checks land, keeps the run's results across a reload, and compares only two runs", async () => {
    const page = await browser.newPage();
    await page.goto(ui.url);
    // Every redraw of the levels table, as it happens: how many checks had their verdict, and how full the
    // "all" bar was drawn at that moment.
    await page.evaluate(`(() => {
      window.__bars = [];
      new MutationObserver(() => {
        const rows = document.querySelectorAll("#levels tr");
        const all = rows[rows.length - 1];
        if (!all) return;
        const cells = [...all.querySelectorAll("td")].slice(2).map((td) => Number(td.textContent));
        const fill = [...all.querySelectorAll(".bar span")].reduce((sum, s) => sum + parseFloat(s.style.width), 0);
        window.__bars.push({ done: cells.reduce((a, b) => a + b, 0), fill });
      }).observe(document.getElementById("levels"), { childList: true, subtree: true });
    })()`);
    await page.fill('input[name="--only"]', "CONSIST-*,MEANING-*,GET-TURN-COUNT");
    await page.click("#run");
    await page.waitForSelector('body[data-state="done"]', { timeout: 60_000 });
    const bars = (await page.evaluate("window.__bars")) as Array<{ done: number; fill: number }>;
    const total = Math.max(...bars.map((b) => b.done));
    const partway = bars.filter((b) => b.done > 0 && b.done < total);
    expect(partway.length).toBeGreaterThan(0);
    for (const bar of partway) expect(bar.fill, `${bar.done} of ${total} done`).toBeLessThan(99.9);
    expect(bars.at(-1)?.fill).toBeGreaterThan(99.9);
    // One kept run: nothing to compare yet.
    await expect.poll(() => page.locator("#history tr").count(), { timeout: 30_000 }).toBe(1);
    expect(await page.isVisible("#cmp-box")).toBe(false);

    // A reload shows the same run again, whole.
    const shown = await page.locator(".ui-check").count();
    const verdictText = await page.textContent("#verdict");
    await page.reload();
    await page.waitForSelector('body[data-state="done"]', { timeout: 30_000 });
    expect(await page.locator(".ui-check").count()).toBe(shown);
    expect(await page.textContent("#verdict")).toBe(verdictText);

    // A second run: the comparison offers the two, and never a run with itself.
    await page.click("#form-box > summary");
    await page.fill('input[name="--only"]', "GET-TURN-COUNT");
    await page.click("#run");
    await page.waitForSelector('body[data-state="done"]', { timeout: 60_000 });
    await expect.poll(() => page.locator("#history tr").count(), { timeout: 30_000 }).toBe(2);
    expect(await page.isVisible("#cmp-box")).toBe(true);
    expect(await page.isDisabled("#compare")).toBe(false);
    const newest = await page.$eval("#cmp-to", (e) => (e as unknown as { value: string }).value);
    await page.selectOption("#cmp-from", newest);
    expect(await page.isDisabled("#compare")).toBe(true);
    const itself = await fetch(new URL(`/api/compare?from=${newest}&to=${newest}`, ui.url));
    expect(itself.status).toBe(400);
    await page.close();
  }, 180_000);

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
    // Another address: the command's keys are not sent there unless typed in (they are bound to theirs).
    for (const field of FORM_FIELDS.filter((f) => f.secret && f.flag !== "--flow-key"))
      if (defaults[field.flag]) await page.fill(`input[name="${field.flag}"]`, defaults[field.flag]);
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

  it("gives its token to no client: a plain HTTP client fetching the page gets none, and a tab opened without it cannot run", async () => {
    const token = /#token=([0-9a-f]{32})$/.exec(ui.url)?.[1] as string;
    expect(token).toMatch(/^[0-9a-f]{32}$/);
    // Every page a local process can fetch without the token: none carries it.
    for (const path of ["/", "/api/catalogue", "/api/runs"]) {
      const response = await fetch(new URL(path, ui.url));
      expect(response.status, path).toBe(200);
      const text = await response.text();
      expect(text, path).not.toContain(token);
      expect(JSON.stringify([...response.headers]), path).not.toContain(token);
    }
    // The bare address (no fragment) in a browser: the page says where the token is, and starts nothing.
    const page = await browser.newPage();
    await page.goto(new URL("/", ui.url).toString());
    await page.waitForFunction(`document.getElementById("form-error").textContent !== ""`);
    expect(await page.textContent("#form-error")).toContain("printed");
    expect(await page.isDisabled("#run")).toBe(true);
    await page.close();
  }, 60_000);

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
