/**
 * Docs renderers as a publisher embeds them: the pages are the guide's ("Publishing the docs"), read
 * from docs/renderers.md, each served as `index.html` of a site directory its copy command filled (so the page's
 * relative spec URL is what it loads), over loopback; read in headless Chromium. The pages load their
 * renderer from a CDN: the browser's requests to it are answered from the tools directory's installed
 * package of the same name, and a URL naming another version than the one installed is refused.
 */
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { extname, join, normalize } from "node:path";
import type { Page } from "playwright-core";
import { guideBlocks } from "./readme.ts";
import { TOOL_PACKAGES, toolsDir } from "./tools-dir.ts";

export type Renderer = "swagger-ui" | "scalar" | "redoc" | "elements";

export const DOCS_GUIDE = "renderers.md";

/** The package each renderer's page loads: how its README block is told apart from the others. */
const RENDERER_PACKAGE: Record<Renderer, keyof typeof TOOL_PACKAGES> = {
  "swagger-ui": "swagger-ui-dist",
  scalar: "@scalar/api-reference",
  redoc: "redoc",
  elements: "@stoplight/elements",
};

export const CDN = "https://cdn.jsdelivr.net/npm/";

/** Each renderer's page, the README's HTML block loading that renderer's package from the CDN. */
export function readmePages(): Record<Renderer, string> {
  const html = guideBlocks(DOCS_GUIDE).filter((block) => block.lang === "html");
  const pages = {} as Record<Renderer, string>;
  for (const [renderer, pkg] of Object.entries(RENDERER_PACKAGE) as [Renderer, string][]) {
    const found = html.filter((block) => block.code.includes(`${CDN}${pkg}@`));
    if (found.length !== 1)
      throw new Error(`docs/${DOCS_GUIDE} has ${found.length} pages loading ${CDN}${pkg}@..., not 1`);
    pages[renderer] = (found[0] as { code: string }).code;
  }
  if (html.length !== Object.keys(pages).length)
    throw new Error(`docs/${DOCS_GUIDE} has a page for a renderer the matrix does not run`);
  return pages;
}

/**
 * Answers the page's CDN requests from the installed packages; a request for a version other than the
 * installed one is answered 404 and recorded in `refused`.
 */
export async function serveCdnFromTools(page: Page, refused: string[]): Promise<void> {
  await page.route(`${CDN}**`, async (route) => {
    const url = route.request().url();
    const match = url.slice(CDN.length).match(/^((?:@[\w.-]+\/)?[\w.-]+)@([^/]+)\/(.+)$/);
    const name = match?.[1] as keyof typeof TOOL_PACKAGES | undefined;
    if (!match || !name || TOOL_PACKAGES[name] !== match[2]) {
      refused.push(url);
      await route.fulfill({ status: 404 });
      return;
    }
    const file = join(toolsDir, "node_modules", name, normalize(`/${match[3]}`));
    await route.fulfill({
      status: 200,
      contentType: TYPES[extname(file)] ?? "application/octet-stream",
      body: await readFile(file),
    });
  });
}

const TYPES: Record<string, string> = {
  ".js": "text/javascript",
  ".css": "text/css",
  ".json": "application/json",
  ".html": "text/html",
};

/**
 * Serves /page/<renderer>/<form>/ (the README's page as index.html) and the other files of that form's site
 * directory under it (`sites[form]`: the copy command's `site/`, run where the spec file is that form).
 */
export async function rendererServer(
  sites: Record<string, string>,
): Promise<{ server: Server; url: string }> {
  const pages = readmePages();
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname));
    try {
      const match = path.match(/^\/page\/([\w-]+)\/([\w.-]+\.json)\/(.*)$/);
      const site = match && sites[match[2] as string];
      if (!match || !site || !((match[1] as string) in pages)) throw new Error("not found");
      if (match[3] === "" || match[3] === "index.html") {
        res.writeHead(200, { "content-type": "text/html" }).end(pages[match[1] as Renderer]);
        return;
      }
      const file = join(site, normalize(`/${match[3]}`));
      const body = await readFile(file);
      res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}
