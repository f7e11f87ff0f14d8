/**
 * The library's promises: it judges any deployment without our server (nothing reachable from index.ts
 * imports reference-server/), and a run through `runConformance` names missing inputs by their option name.
 */
import { readFileSync, realpathSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConformanceResults, catalogue, runConformance } from "./index.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The source a workspace package's export leads to (`@agent-api/client/sse` → client/sse.ts), by its source condition. */
function packageSource(specifier: string): string {
  const [, name, subpath] = /^@agent-api\/([^/]+)(\/.*)?$/.exec(specifier) ?? [];
  const manifest = join(root, "node_modules", "@agent-api", name, "package.json");
  const exports = JSON.parse(readFileSync(manifest, "utf8")).exports as Record<
    string,
    Record<string, string>
  >;
  const target = exports[`.${subpath ?? ""}`]?.["agent-api-source"];
  if (!target) throw new Error(`${specifier}: no source export`);
  return realpathSync(join(dirname(manifest), target));
}

/** Every project file reachable from `entry` through static or dynamic relative or workspace-package imports. */
function reachable(entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(/(?:from|import\()\s*"(\.{1,2}\/[^"]+|@agent-api\/[^"]+)"/g)) {
      const target = match[1].startsWith(".") ? resolve(dirname(file), match[1]) : packageSource(match[1]);
      if (target.endsWith(".ts")) visit(target);
    }
  };
  visit(entry);
  return seen;
}

describe("conformance/index.ts", () => {
  it("reaches nothing of reference-server/ (nor the CLI, the tests or the self-test)", () => {
    const files = [...reachable(join(root, "conformance", "index.ts"))].map((f) => relative(root, f));
    expect(files.length).toBeGreaterThan(20);
    expect(files.filter((f) => !/^(conformance|generated|client)\//.test(f))).toEqual([]);
    expect(files.filter((f) => f.endsWith(".test.ts"))).toEqual([]);
  });

  describe("runConformance against a server that answers 404 to everything", () => {
    let server: Server;
    let results: ConformanceResults;

    beforeAll(async () => {
      server = createServer((req, res) => {
        req.resume();
        req.on("end", () => res.writeHead(404, { "content-type": "application/json" }).end("{}"));
      });
      await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
      const { port } = server.address() as AddressInfo;
      results = await runConformance({
        inputs: { baseUrl: `http://127.0.0.1:${port}`, agent: "a", key: "k", sessionWaitMs: 0 },
        only: ["AUTH-*", "FLOW-*"],
        concurrency: 4,
      });
    });

    afterAll(async () => {
      await new Promise((done) => server.close(done));
    });

    it("fails, and skips what needs an input with a reason naming the input as the library calls it", () => {
      expect(results.passed).toBe(false);
      const skipped = results.results.filter((r) => r.outcome === "skip" && r.reason?.startsWith("needs "));
      expect(skipped.length).toBeGreaterThan(0);
      for (const r of skipped) expect(r.reason).not.toContain("--");
      expect(skipped.map((r) => r.reason).join(" ")).toMatch(/revokedKey|flowUrl|viewerKey|memberKey/);
    });

    it("runs only from the catalogue it was given", () => {
      const ids = new Set(catalogue.map((c) => c.id));
      for (const r of results.results) expect(ids.has(r.id)).toBe(true);
    });
  });
});
