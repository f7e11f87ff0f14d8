/**
 * Docs renderers on the published spec, in headless Chromium: Swagger UI, Scalar, Redoc 2 and Stoplight
 * Elements each show the 11 operations from the 3.2 document and from the docs form, and from the docs form
 * the stream's events on the send-message response (none of them reads `itemSchema`/`contentSchema`, so
 * from the 3.2 document they show at most the examples: spec/README.md's table). The pages and the command
 * copying the spec beside them are the guide "Publishing the docs", read from docs/renderers.md and run as
 * written (test/tools/renderer-pages.ts); the 3.2 document is tried under the file name the pages load.
 */
import { readFileSync } from "node:fs";
import type { Server } from "node:http";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { projectRoot } from "../../scripts/project-root.ts";
import { chromium, launchChromium } from "../spec/browser.ts";
import { guideSteps, type PublishedForm, runStep, userProject } from "./readme.ts";
import { DOCS_GUIDE, type Renderer, rendererServer, serveCdnFromTools } from "./renderer-pages.ts";
import { toolsUnavailable } from "./tools-dir.ts";

const bundle = JSON.parse(readFileSync(join(projectRoot, "generated", "openapi.json"), "utf8")) as {
  paths: Record<string, Record<string, { operationId?: string; summary?: string }>>;
};
const summaries = Object.values(bundle.paths).flatMap((item) =>
  Object.values(item).flatMap((op) => (op?.operationId ? [String(op.summary)] : [])),
);

interface RendererCase {
  /** What a reader does to see every operation, and then the send-message response's body. */
  reveal(page: Page): Promise<void>;
  openEvents?(page: Page): Promise<void>;
  /** The docs form's events on the send-message response, as the renderer's text shows them. */
  events: RegExp;
}

const scrollThrough = async (page: Page) => {
  // Scalar renders sections as they scroll into view.
  for (let i = 0; i < 40; i++) {
    await page.mouse.wheel(0, 3000);
    await page.waitForTimeout(100);
  }
};

const CASES: Record<Renderer, RendererCase> = {
  "swagger-ui": {
    reveal: async () => {},
    // The 200 response shows its example; the schema is behind the "Schema" tab.
    openEvents: async (page) => {
      await page
        .locator("#operations-Messages-sendMessage tr.response[data-code='200'] button", {
          hasText: "Schema",
        })
        .click();
    },
    events: /Schema\s*Server-sent events[\s\S]{0,80}The body is a stream of server-sent events[\s\S]*One of/,
  },
  scalar: {
    reveal: scrollThrough,
    events: /The body is a stream of server-sent events[\s\S]{0,600}One of\s*·\s*message_start/,
  },
  redoc: {
    reveal: async () => {},
    events:
      /RESPONSE SCHEMA: text\/event-stream\s*One of\s*message_start\s*content_block_start\s*content_block_delta\s*content_block_stop\s*message_delta\s*message_stop\s*error/,
  },
  elements: {
    // The sidebar's endpoint groups start closed.
    reveal: async (page) => {
      for (const tag of ["Conversations", "Flows", "Messages", "Models"])
        await page.getByText(tag, { exact: true }).first().click();
    },
    openEvents: async (page) => {
      await page.getByText("Send a message (run one agent turn)", { exact: true }).first().click();
    },
    events: /Body\s*text\/event-stream[\s\S]{0,100}message_start\s*\(one of\)\s*type/,
  },
};

const skip = !chromium ? "no chromium installed" : toolsUnavailable();
let pages: { server: Server; url: string };
let browser: Browser;

/** The README's command filling `site/`, run in a project whose `openapi-docs.json` is the form under test. */
async function site(form: PublishedForm): Promise<string> {
  const steps = guideSteps(DOCS_GUIDE);
  if (steps.length !== 1) throw new Error(`docs/${DOCS_GUIDE} should have one shell command`);
  const dir = userProject(`site-${form}`, { "openapi-docs.json": form });
  const copied = await runStep(steps[0] as (typeof steps)[0], dir);
  if (copied.code !== 0) throw new Error(`the README's command failed: ${copied.stderr}`);
  return join(dir, "site");
}

beforeAll(async () => {
  if (skip) return;
  pages = await rendererServer({
    "openapi.json": await site("openapi.json"),
    "openapi-docs.json": await site("openapi-docs.json"),
  });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  pages?.server.close();
});

/** The page's text once every summary is on it (polled: the renderers build the page in the browser). */
async function textWith(page: Page, needles: string[], timeoutMs = 60_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let text = "";
  while (Date.now() < deadline) {
    // biome-ignore lint/performance/useDomNodeTextContent: the text as rendered (closed sections left out) is the point.
    text = await page.innerText("body");
    if (needles.every((needle) => text.includes(needle))) break;
    await page.waitForTimeout(250);
  }
  return text;
}

async function open(renderer: Renderer, form: string): Promise<Page> {
  const page = await browser.newPage();
  const refused: string[] = [];
  await serveCdnFromTools(page, refused);
  await page.goto(`${pages.url}/page/${renderer}/${form}/`);
  // The page is built: its title is shown.
  await textWith(page, ["Agent Conversation API"]);
  expect(refused, "the README's page loads a version other than the matrix's (tools-dir.ts)").toEqual([]);
  await CASES[renderer].reveal(page);
  return page;
}

describe.skipIf(skip !== null)(`docs renderers${skip ? ` (skipped: ${skip})` : ""}`, () => {
  describe.each(Object.keys(CASES) as Renderer[])("%s", (renderer) => {
    it.each(["openapi.json", "openapi-docs.json"])("shows the 11 operations from %s", async (form) => {
      const page = await open(renderer, form);
      try {
        const text = await textWith(page, summaries);
        expect(summaries).toHaveLength(11);
        expect(summaries.filter((summary) => !text.includes(summary))).toEqual([]);
      } finally {
        await page.close();
      }
    });

    it("shows the stream's events on the send-message response from the docs form", async () => {
      const page = await open(renderer, "openapi-docs.json");
      try {
        await textWith(page, summaries);
        await CASES[renderer].openEvents?.(page);
        const deadline = Date.now() + 30_000;
        let text = "";
        while (Date.now() < deadline) {
          // biome-ignore lint/performance/useDomNodeTextContent: the text as rendered (closed sections left out) is the point.
          text = await page.innerText("body");
          if (CASES[renderer].events.test(text)) break;
          await page.waitForTimeout(250);
        }
        const at = text.indexOf("text/event-stream");
        expect(text, text.slice(Math.max(0, at - 300), at + 600)).toMatch(CASES[renderer].events);
      } finally {
        await page.close();
      }
    });
  });
});
