/**
 * A suite that passes against a server doing nothing proves nothing: against a server answering 200 with
 * an empty body to every request, (almost) every MUST check that runs must fail.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { catalogue } from "./catalogue.ts";
import { runSuite } from "./runner.ts";
import type { RunReport } from "./types.ts";

let server: Server;
let report: RunReport;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  report = await runSuite({
    checks: catalogue,
    inputs: {
      baseUrl: `http://127.0.0.1:${port}`,
      agent: "demo-agent",
      key: "key-admin",
      memberKey: "key-member",
      viewerKey: "key-viewer",
      revokedKey: "key-revoked",
      foreignAgent: "other-agent",
      automation: "nightly-summary",
      storageAgent: "notes-agent",
      flowUrl: `http://127.0.0.1:${port}`,
      flowId: "demo-flow",
      flowKey: "flow-key",
      flowInput: ["topic=testing"],
      routingPrefix: "acme",
      sessionWaitMs: 300,
    },
  });
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

it("fails (almost) every MUST check against a server that answers 200 with an empty body", () => {
  const must = report.results.filter((r) => r.level === "MUST" && r.outcome !== "skip");
  const passed = must.filter((r) => r.outcome === "pass").map((r) => r.id);
  expect(must.length).toBeGreaterThan(60);
  // No MUST check may pass on nothing; the bound leaves room for none, listed when it is broken.
  expect(passed).toEqual([]);
});
