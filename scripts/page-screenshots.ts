/**
 * The pictures of the two pages in the docs (docs/images/): the API's docs page (`agent-api docs`) at its
 * send-message operation, and the suite's page (`agent-api check --ui`) after a run against the demo behind
 * the self-test's fault proxy with one rule broken (a verdict, a failing check with its evidence, passing
 * ones). Each is taken in Debian's Chromium once the rendered page shows what the picture is of, and fails
 * when it does not. `npm run screenshots`; .ci/run runs it after the tests.
 */
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildDocs } from "../conformance/cli/docs.ts";
import { envNameOf } from "../conformance/inputs.ts";
import { FORM_FIELDS } from "../conformance/ui/form.ts";
import { startConformanceUi } from "../conformance/ui/server.ts";
import { startDemoServer } from "../reference-server/demo/index.ts";
import { startFaultProxy } from "../test/selftest/proxy.ts";
import { launchChromium, servePage } from "../test/spec/browser.ts";

const images = new URL("../docs/images/", import.meta.url).pathname;
const VIEWPORT = { width: 1280, height: 900 };

async function docsPage(browser: import("playwright-core").Browser, work: string): Promise<void> {
  const served = await servePage(await readFile(await buildDocs(join(work, "docs.html")), "utf8"));
  try {
    const page = await browser.newPage({ viewport: VIEWPORT });
    await page.goto(`${served.url}#/messages/sendmessage`);
    await page.waitForSelector('[id="messages/sendmessage/t=request&path=metadata"]', { timeout: 60_000 });
    await page.waitForLoadState("networkidle");
    await page.screenshot({ path: join(images, "docs-page.png") });
  } finally {
    served.close();
  }
}

async function suitePage(browser: import("playwright-core").Browser, work: string): Promise<void> {
  const demo = await startDemoServer(300, { unsafeNoIsolation: true });
  const proxy = await startFaultProxy({ target: demo.url, mutation: "updated-at-frozen" });
  const defaults: Record<string, string> = {};
  for (const field of FORM_FIELDS) {
    const value = demo.envVars[envNameOf(field.flag)];
    if (value) defaults[field.flag] = value;
  }
  defaults["--base-url"] = proxy.url;
  const ui = await startConformanceUi({ reportsDir: work, defaults });
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 1500 } });
    await page.goto(ui.url);
    await page.fill('input[name="--only"]', "MEANING-*,GET-*,CONSIST-ROUTES-AGREE,CONSIST-FORK-READBACK");
    await page.click("#run");
    await page.waitForSelector('body[data-state="done"]', { timeout: 120_000 });
    const verdict = (await page.textContent("#verdict")) ?? "";
    if (!verdict.includes("MUST check(s) failed"))
      throw new Error(`the suite's page did not show the broken rule's failure: ${verdict}`);
    await page.evaluate("window.scrollTo(0, 0)");
    await page.screenshot({ path: join(images, "suite-page.png") });
  } finally {
    await ui.close();
    await proxy.close();
    await demo.close();
  }
}

await mkdir(images, { recursive: true });
const work = await mkdtemp(join(tmpdir(), "agent-api-screenshots-"));
const browser = await launchChromium();
try {
  await docsPage(browser, work);
  await suitePage(browser, work);
  process.stdout.write(`wrote ${join(images, "docs-page.png")} and ${join(images, "suite-page.png")}\n`);
} finally {
  await browser.close();
  await rm(work, { recursive: true, force: true });
}
