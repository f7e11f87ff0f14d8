/**
 * The docs page as a reader sees it: Redocly's page renders in the browser (the HTML holds only the script and
 * the spec), so tests read the DOM that headless Chromium (Debian's `chromium`, installed by .ci/run) builds.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/** The system Chromium, or undefined where none is installed (the tests that need it then say so). */
export const chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));

/**
 * One HTML page served over loopback, not file://: the page's script runs the same as on a real site, and
 * every request it makes elsewhere is one a reader's browser would make too.
 */
export async function servePage(html: string): Promise<{ url: string; close(): void }> {
  const server = createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end(html));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/`, close: () => server.close() };
}

/** The rendered page's visible text (scripts dropped, tags and runs of white space made one space). */
export async function renderedText(html: string, fragment: string): Promise<string> {
  if (!chromium) throw new Error("no chromium installed");
  const browser = chromium;
  const served = await servePage(html);
  try {
    const dom = await new Promise<string>((resolve, reject) =>
      execFile(
        browser,
        [
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-background-networking",
          "--virtual-time-budget=8000",
          "--dump-dom",
          `${served.url}${fragment}`,
        ],
        { maxBuffer: 64 << 20, timeout: 120_000 },
        (error, stdout) => (error ? reject(error) : resolve(stdout)),
      ),
    );
    return dom
      .replace(/<script[\s\S]*?<\/script>/g, "")
      .replace(/<[^>]+>/g, " ")
      .replaceAll("&#x27;", "'")
      .replaceAll("&quot;", '"')
      .replace(/\s+/g, " ");
  } finally {
    served.close();
  }
}

/**
 * Debian's Chromium driven by playwright-core (never Playwright's own browser download), with the flags this
 * machine needs: no sandbox as root, no GPU, and no background networking, whose connections the closed
 * network here refuses many at a time.
 */
export async function launchChromium(): Promise<import("playwright-core").Browser> {
  if (!chromium) throw new Error("no chromium installed");
  const { chromium: playwright } = await import("playwright-core");
  return playwright.launch({
    executablePath: chromium,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
    ],
  });
}
