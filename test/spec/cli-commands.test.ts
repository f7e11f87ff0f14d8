/** `agent-api docs` and `agent-api lint` run the real Redocly on real files; `mock` rejects bad flags. */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main as docs, REFERENCE_LABEL, withReferenceBehaviorShown } from "../../conformance/cli/docs.ts";
import { main as lint } from "../../conformance/cli/lint.ts";
import { main as mock } from "../../conformance/cli/mock.ts";
import { projectRoot } from "../../scripts/project-root.ts";
import { chromium, renderedText } from "./browser.ts";

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
  });

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
