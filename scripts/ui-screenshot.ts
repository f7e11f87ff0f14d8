/**
 * Makes the README's picture of the conformance page (conformance/ui/screenshot.png): the page in Debian's
 * Chromium after a run against the demo behind the self-test's fault proxy with one rule broken, so the
 * picture shows a verdict, a failing check with its evidence, and passing ones. Run by hand when the page
 * changes (`node scripts/ui-screenshot.ts`), not by the tests.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { envNameOf } from "../conformance/inputs.ts";
import { FORM_FIELDS } from "../conformance/ui/form.ts";
import { startConformanceUi } from "../conformance/ui/server.ts";
import { startDemoServer } from "../reference-server/demo/index.ts";
import { startFaultProxy } from "../test/selftest/proxy.ts";
import { launchChromium } from "../test/spec/browser.ts";

const out = new URL("../conformance/ui/screenshot.png", import.meta.url).pathname;
const demo = await startDemoServer(300, { unsafeNoIsolation: true });
const proxy = await startFaultProxy({ target: demo.url, mutation: "updated-at-frozen" });
const reportsDir = await mkdtemp(join(tmpdir(), "agent-api-ui-shot-"));
const defaults: Record<string, string> = {};
for (const field of FORM_FIELDS) {
  const value = demo.envVars[envNameOf(field.flag)];
  if (value) defaults[field.flag] = value;
}
defaults["--base-url"] = proxy.url;
const ui = await startConformanceUi({ reportsDir, defaults });
const browser = await launchChromium();
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 1500 } });
  await page.goto(ui.url);
  await page.fill('input[name="--only"]', "MEANING-*,GET-*,CONSIST-ROUTES-AGREE,CONSIST-FORK-READBACK");
  await page.click("#run");
  await page.waitForSelector('body[data-state="done"]', { timeout: 120_000 });
  await page.evaluate("window.scrollTo(0, 0)");
  await page.screenshot({ path: out, fullPage: false, clip: { x: 0, y: 0, width: 1200, height: 1500 } });
  process.stdout.write(`wrote ${out}\n`);
} finally {
  await browser.close();
  await ui.close();
  await proxy.close();
  await demo.close();
  await rm(reportsDir, { recursive: true, force: true });
}
