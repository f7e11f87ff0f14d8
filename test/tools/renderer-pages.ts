/**
 * Docs renderers as a publisher embeds them: one HTML page per renderer loading its standalone bundle from
 * the tools directory and a published form of the spec, served over loopback; read in headless Chromium.
 */
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { extname, join, normalize } from "node:path";
import { projectRoot } from "../../scripts/tool-bin.ts";
import { toolsDir } from "./tools-dir.ts";

export type Renderer = "swagger-ui" | "scalar" | "redoc" | "elements";

/** Each renderer's page, as its documentation shows it, for the spec at `specUrl`. */
const PAGES: Record<Renderer, (specUrl: string) => string> = {
  "swagger-ui": (spec) => `<link rel="stylesheet" href="/m/swagger-ui-dist/swagger-ui.css">
<div id="ui"></div>
<script src="/m/swagger-ui-dist/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({ url: ${JSON.stringify(spec)}, dom_id: "#ui", docExpansion: "full", defaultModelsExpandDepth: -1 });</script>`,
  scalar: (spec) => `<div id="app"></div>
<script src="/m/@scalar/api-reference/dist/browser/standalone.js"></script>
<script>Scalar.createApiReference("#app", { url: ${JSON.stringify(spec)}, defaultOpenAllTags: true, expandAllResponses: true });</script>`,
  redoc: (spec) => `<redoc spec-url=${JSON.stringify(spec)} expand-responses="all"></redoc>
<script src="/m/redoc/bundles/redoc.standalone.js"></script>`,
  elements: (spec) => `<link rel="stylesheet" href="/m/@stoplight/elements/styles.min.css">
<elements-api apiDescriptionUrl=${JSON.stringify(spec)} router="hash" layout="sidebar"></elements-api>
<script src="/m/@stoplight/elements/web-components.min.js"></script>`,
};

const TYPES: Record<string, string> = {
  ".js": "text/javascript",
  ".css": "text/css",
  ".json": "application/json",
  ".html": "text/html",
};

/** Serves /page/<renderer>/<form>, /spec/<form> (generated/) and /m/<package file> (the tools directory). */
export async function rendererServer(): Promise<{ server: Server; url: string }> {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname));
    try {
      const page = path.match(/^\/page\/([\w-]+)\/([\w.-]+\.json)$/);
      if (page && page[1] in PAGES) {
        const html = `<!doctype html><html><head><meta charset="utf-8"><title>API</title></head><body>${PAGES[page[1] as Renderer](`/spec/${page[2]}`)}</body></html>`;
        res.writeHead(200, { "content-type": "text/html" }).end(html);
        return;
      }
      const file = path.startsWith("/spec/")
        ? join(projectRoot, "generated", path.slice("/spec/".length))
        : path.startsWith("/m/")
          ? join(toolsDir, "node_modules", path.slice("/m/".length))
          : null;
      if (!file) throw new Error("not found");
      const body = await readFile(file);
      res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}
