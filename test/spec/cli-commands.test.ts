/** `agent-api docs` and `agent-api lint` run the real Redocly on real files; `mock` rejects bad flags. */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main as docs, REFERENCE_LABEL, withReferenceBehaviorShown } from "../../conformance/cli/docs.ts";
import { main as lint } from "../../conformance/cli/lint.ts";
import { main as mock } from "../../conformance/cli/mock.ts";
import { projectRoot } from "../../scripts/project-root.ts";
import { chromium, launchChromium, renderedText, servePage } from "./browser.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agent-api-cli-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("agent-api docs", () => {
  // One Redocly build (the slow part) for both tests that read the page.
  let built: Promise<string> | undefined;
  const page = () => {
    built ??= (async () => {
      const output = join(dir, "site", "api.html");
      expect(await docs(["--output", output])).toBe(0);
      return readFile(output, "utf8");
    })();
    return built;
  };

  it("writes one self-contained HTML page of the API", async () => {
    const html = await page();
    expect(html).toContain("<title>Agent Conversation API</title>");
    expect(html).toContain("sendMessage");
    // Self-contained: the Redoc script is embedded, not loaded from a CDN.
    expect(html).not.toMatch(/<script[^>]+src=/);
    expect(html).not.toMatch(/import[^;]*from\s*"https:/);
    expect(html).not.toContain("cdn.redoc.ly");
  }, 180_000);

  it("shows every reference choice (x-reference-behavior) in the description beside it", async () => {
    const html = await page();
    const bundle = JSON.parse(
      await readFile(join(projectRoot, "generated", "openapi.json"), "utf8"),
    ) as unknown;
    const choices: string[] = [];
    (function walk(node: unknown) {
      if (Array.isArray(node)) return node.forEach(walk);
      if (node === null || typeof node !== "object") return;
      const choice = (node as Record<string, unknown>)["x-reference-behavior"];
      if (typeof choice === "string") choices.push(choice.trim());
      Object.values(node).forEach(walk);
    })(bundle);
    expect(choices.length).toBeGreaterThan(30);
    // Redocly drops x- extensions from the page; each choice goes into a description, after the label.
    const shown = JSON.stringify(withReferenceBehaviorShown(bundle));
    for (const choice of choices) {
      expect(shown.includes(JSON.stringify(`**${REFERENCE_LABEL}** ${choice}`).slice(1, -1)), choice).toBe(
        true,
      );
    }
    expect(html.split(`**${REFERENCE_LABEL}**`).length - 1).toBe(choices.length);
  }, 60_000);

  it.skipIf(!chromium)(
    "a browser shows those choices on the operation's page (skipped without a system chromium: .ci/run installs it)",
    async () => {
      const output = join(dir, "rendered", "api.html");
      expect(await docs(["--output", output])).toBe(0);
      const text = await renderedText(await readFile(output, "utf8"), "#operation/sendMessage");
      // The operation's own choice and its request fields' choices, each after the label.
      expect(text.split(REFERENCE_LABEL).length - 1).toBeGreaterThanOrEqual(4);
      expect(text).toContain("The reference server answers 400 with a message naming the models route");
    },
    180_000,
  );

  it.skipIf(!chromium)(
    "in a browser the page asks nothing of another host, its SSE examples wrap, and metadata has no empty row (skipped without a system chromium)",
    async () => {
      const served = await servePage(await page());
      const browser = await launchChromium();
      try {
        const tab = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
        const elsewhere: string[] = [];
        tab.on("request", (request) => {
          const url = request.url();
          if (!url.startsWith(served.url) && !/^(blob|data):/.test(url)) elsewhere.push(url);
        });
        await tab.goto(`${served.url}#/messages/sendmessage`);
        await tab.waitForSelector('[id="messages/sendmessage/t=request&path=metadata"]', { timeout: 60_000 });
        await tab.waitForLoadState("networkidle");
        expect(elsewhere).toEqual([]);
        // Every code block of the operation (the SSE example of the 200 among them) fits its panel.
        const blocks = await tab.evaluate(`[...document.querySelectorAll("pre")].map((pre) => ({
          text: pre.textContent.slice(0, 60), overflow: pre.scrollWidth - pre.clientWidth }))`);
        const sse = (blocks as Array<{ text: string; overflow: number }>).filter((b) =>
          b.text.startsWith("event:"),
        );
        expect(sse.length).toBeGreaterThan(0);
        for (const block of blocks as Array<{ text: string; overflow: number }>)
          expect(block.overflow, block.text).toBeLessThanOrEqual(1);
        // Redocly draws `additionalProperties: true` as a field named "property name*" of type any.
        const rows = await tab.evaluate(
          `[...document.querySelectorAll('[id^="messages/sendmessage/t=request"]')].map((e) => e.id)`,
        );
        expect(rows).toContain("messages/sendmessage/t=request&path=metadata");
        expect((rows as string[]).filter((id) => id.includes("property name"))).toEqual([]);
      } finally {
        await browser.close();
        served.close();
      }
    },
    180_000,
  );

  it("fails with exit 1 on a spec Redocly cannot read", async () => {
    expect(await docs(["--spec", join(dir, "missing.yaml"), "--output", join(dir, "x.html")])).toBe(1);
  });
});

describe("agent-api lint", () => {
  it("passes the project's spec", async () => {
    expect(await lint(["--format", "summary"])).toBe(0);
  });

  it("passes Redocly's failure through", async () => {
    const broken = join(dir, "broken.yaml");
    await writeFile(
      broken,
      "openapi: 3.1.0\ninfo: {title: x, version: '1'}\npaths:\n  /a:\n    get:\n      responses: {}\n",
    );
    expect(await lint(["--spec", broken, "--format", "summary"])).not.toBe(0);
  });
});

describe("agent-api mock", () => {
  it("rejects a port that is not a port, without starting Prism", async () => {
    expect(await mock(["--port", "http"])).toBe(2);
  });
});
