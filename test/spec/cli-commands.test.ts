/** `agent-api docs` and `agent-api lint` run the real Redocly on real files; `mock` rejects bad flags. */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main as docs } from "../../cli/commands/docs.ts";
import { main as lint } from "../../cli/commands/lint.ts";
import { main as mock } from "../../cli/commands/mock.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agent-api-cli-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("agent-api docs", () => {
  it("writes one self-contained HTML page of the API", async () => {
    const output = join(dir, "site", "api.html");
    expect(await docs(["--output", output])).toBe(0);
    const html = await readFile(output, "utf8");
    expect(html).toContain("<title>Agent Conversation API</title>");
    expect(html).toContain("sendMessage");
    // Self-contained: the Redoc script is embedded, not loaded from a CDN.
    expect(html).not.toMatch(/<script[^>]+src=/);
    expect(html).not.toMatch(/import[^;]*from\s*"https:/);
  });

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
