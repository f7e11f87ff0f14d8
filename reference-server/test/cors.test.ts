/**
 * Browser consoles (a docs page's "Try it") against the reference server: with `corsOrigins` (serve --cors),
 * a page of an allowed origin sends a turn from headless Chromium: the preflight is answered, the stream is
 * read and X-Conversation-Id is exposed; a page of another origin is refused by the browser, and without the
 * setting no CORS header is sent at all.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium, launchChromium } from "../../test/spec/browser.ts";
import { KEYS, raw, startTestServer, type TestServer } from "./helpers.ts";
import { startServeCommand } from "./sandbox-server.ts";

const SEND = "/api/agents/demo-agent/v1/messages";

/** A blank page served from its own loopback port: its own origin. */
async function pageServer(): Promise<{ server: Server; origin: string }> {
  const server = createServer((_req, res) =>
    res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>console</title>"),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

let allowed: Awaited<ReturnType<typeof pageServer>>;
let other: Awaited<ReturnType<typeof pageServer>>;
let withCors: TestServer;
let browser: Browser | undefined;

beforeAll(async () => {
  allowed = await pageServer();
  other = await pageServer();
  withCors = await startTestServer({ corsOrigins: [allowed.origin] });
  if (chromium) browser = await launchChromium();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await withCors?.close();
  allowed?.server.close();
  other?.server.close();
});

interface PageResult {
  status?: number;
  conversationId?: string | null;
  text?: string;
  error?: string;
}

/** Runs a fetch from a page of `origin` to the API and returns what the page's script could read. */
async function fetchFromPage(
  origin: string,
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string },
): Promise<PageResult> {
  if (!browser) throw new Error("no chromium");
  const page = await browser.newPage();
  try {
    await page.goto(origin);
    return await page.evaluate(
      async ([url, init]) => {
        try {
          const response = await fetch(url, init);
          return {
            status: response.status,
            conversationId: response.headers.get("x-conversation-id"),
            text: await response.text(),
          };
        } catch (error) {
          return { error: String(error) };
        }
      },
      [url, init] as const,
    );
  } finally {
    await page.close();
  }
}

const turn = (prompt: string) => ({
  method: "POST",
  headers: { "content-type": "application/json", "x-api-key": KEYS.admin },
  body: JSON.stringify({ stream: true, messages: [{ role: "user", content: prompt }] }),
});

describe("CORS for browser consoles", () => {
  it.skipIf(!chromium)("a page of an allowed origin streams a turn and reads X-Conversation-Id", async () => {
    const result = await fetchFromPage(
      allowed.origin,
      `${withCors.url}${SEND}`,
      turn("Hello from a docs page"),
    );
    expect(result.error).toBeUndefined();
    expect(result.status).toBe(200);
    expect(result.conversationId).toMatch(/.+/);
    expect(result.text).toContain("event: message_stop");
    // A JSON route, and an error a console must be able to show.
    const models = await fetchFromPage(allowed.origin, `${withCors.url}/api/agents/demo-agent/v1/models`, {
      method: "GET",
      headers: { "x-api-key": KEYS.admin },
    });
    expect(models.status).toBe(200);
    expect(JSON.parse(models.text ?? "")).toHaveProperty("data");
    const unauthorized = await fetchFromPage(allowed.origin, `${withCors.url}${SEND}`, {
      ...turn("x"),
      headers: { "content-type": "application/json", "x-api-key": "no-such-key" },
    });
    expect(unauthorized.status).toBe(401);
  });

  it.skipIf(!chromium)("a page of another origin is refused by the browser", async () => {
    const result = await fetchFromPage(other.origin, `${withCors.url}${SEND}`, turn("Hello from elsewhere"));
    expect(result.error).toMatch(/TypeError/);
  });

  it("the preflight is answered for the allowed origin, with the headers a console sends", async () => {
    const preflight = await raw(withCors.url, "OPTIONS", SEND, {
      headers: {
        origin: allowed.origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,x-api-key",
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe(allowed.origin);
    expect(preflight.headers.get("access-control-allow-methods")).toContain("POST");
    expect(preflight.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("x-api-key");
  });

  it("agent-api serve --cors takes several origins", async () => {
    const dir = await mkdtemp(join(tmpdir(), "serve-cors-"));
    const bin = fileURLToPath(new URL("../../bin/agent-api", import.meta.url));
    const served = await startServeCommand([
      bin,
      "serve",
      "--demo",
      "--data",
      dir,
      "--port",
      "0",
      "--cors",
      "https://docs.example.com",
      allowed.origin,
      "--unsafe-no-isolation",
    ]);
    try {
      for (const origin of ["https://docs.example.com", allowed.origin]) {
        const preflight = await raw(served.url, "OPTIONS", SEND, {
          headers: {
            origin,
            "access-control-request-method": "POST",
            "access-control-request-headers": "x-api-key",
          },
        });
        expect(preflight.status, origin).toBe(204);
        expect(preflight.headers.get("access-control-allow-origin")).toBe(origin);
      }
      const refused = await raw(served.url, "OPTIONS", SEND, {
        headers: { origin: other.origin, "access-control-request-method": "POST" },
      });
      expect(refused.headers.get("access-control-allow-origin")).toBeNull();
    } finally {
      await served.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("without the setting no CORS header is sent and a preflight is not found", async () => {
    const plain = await startTestServer();
    try {
      const preflight = await raw(plain.url, "OPTIONS", SEND, {
        headers: { origin: allowed.origin, "access-control-request-method": "POST" },
      });
      expect(preflight.status).toBe(404);
      const models = await raw(plain.url, "GET", "/api/agents/demo-agent/v1/models", {
        key: KEYS.admin,
        headers: { origin: allowed.origin },
      });
      expect(models.status).toBe(200);
      expect(models.headers.get("access-control-allow-origin")).toBeNull();
    } finally {
      await plain.close();
    }
  });
});
