/**
 * A seeded fuzz run of every operation of the spec against the reference server in a child process
 * (test/external/fuzz/index.ts says what is generated and judged). `npm run fuzz` (bench/fuzz.ts) is the long run.
 *
 * A second, short run goes through a fault-injecting proxy that breaks the server in three ways (a 500, a
 * response missing a required field, a change to the protected data): the fuzzer must report each, so a
 * green run means something.
 */
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ChildServer, errorLines, startChildServer } from "./child-server.ts";
import {
  demoFuzzOptions,
  type FuzzReport,
  formatReport,
  knownSpecGap,
  runFuzz,
  SpecModel,
} from "./fuzz/index.ts";

const SEED = Number(process.env.FUZZ_SEED ?? 20261123);
const RUNS = Number(process.env.FUZZ_RUNS ?? 400);

/**
 * In front of the real server: after the fuzzer's set-up, answers 500 to one in 20 POSTs (never to the
 * set-up's or the snapshots' requests), drops `has_more` from every models list, and, on the first share
 * toggle the server refuses with 400, unshares the protected shared conversation behind the fuzzer's back
 * (a server that changes data on a refused request).
 */
async function startFaultyProxy(upstream: string, memberKey: string): Promise<Server & { faults: string[] }> {
  const to = new URL(upstream);
  let count = 0; // POSTs after the set-up
  let sharedId: string | undefined;
  let tampered = false;
  const faults: string[] = [];
  const server = createServer((req, res) => {
    const url = req.url ?? "";
    const shareOfProtected = /\/conversations\/(fz-prot-shared-[^/?]+)$/.exec(url);
    if (req.method === "POST" && shareOfProtected && !sharedId) sharedId = shareOfProtected[1];
    if (sharedId && req.method === "POST" && !url.includes("fz-prot-") && ++count % 20 === 0) {
      faults.push(`500 ${req.method} ${url.slice(0, 80)}`);
      req.resume();
      res.writeHead(500, { "content-type": "application/json" }).end('{"message":"injected"}');
      return;
    }
    const up = httpRequest(
      { host: to.hostname, port: to.port, method: req.method, path: url, headers: req.headers },
      (answer) => {
        const isModels = /\/v1\/models$/.test(url.split("?")[0]) && answer.statusCode === 200;
        const refusedShare =
          req.method === "POST" &&
          /\/conversations\/[^/]+$/.test(url.split("?")[0]) &&
          answer.statusCode === 400;
        if (refusedShare && sharedId && !tampered) {
          tampered = true;
          faults.push(`unshared ${sharedId}`);
          const side = httpRequest({
            host: to.hostname,
            port: to.port,
            method: "POST",
            path: `/api/agents/demo-agent/conversations/${sharedId}`,
            headers: { "x-api-key": memberKey, "content-type": "application/json" },
          });
          side.on("response", (r) => r.resume());
          side.end('{"shared":false}');
        }
        if (!isModels) {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          return;
        }
        const chunks: Buffer[] = [];
        answer.on("data", (c: Buffer) => chunks.push(c));
        answer.on("end", () => {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
          delete body.has_more;
          const text = JSON.stringify(body);
          if (sharedId) faults.push("models without has_more");
          const headers = { ...answer.headers, "content-length": String(Buffer.byteLength(text)) };
          res.writeHead(200, headers).end(text);
        });
      },
    );
    up.on("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    // A client gone mid-request takes its upstream request with it: left half-sent, the server would hold
    // it open until its shutdown grace period (seen: a 30 s close).
    res.on("close", () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return Object.assign(server, { faults });
}

let server: ChildServer;
let report: FuzzReport;
let faultyReport: FuzzReport;
let faults: string[];

beforeAll(async () => {
  server = await startChildServer();
  report = await runFuzz(demoFuzzOptions(server.envVars, server.url, RUNS, SEED));
  // The canary: the same fuzzer against a deliberately broken deployment must say so.
  const proxy = await startFaultyProxy(server.url, server.envVars.AGENT_API_MEMBER_KEY);
  try {
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    faultyReport = await runFuzz({
      ...demoFuzzOptions(server.envVars, proxyUrl, 160, SEED + 1),
      probeEvery: 1_000_000,
    });
    faults = proxy.faults;
  } finally {
    proxy.closeAllConnections();
    await new Promise((resolve) => proxy.close(resolve));
  }
}, 120_000);

afterAll(async () => {
  await server?.close();
});

describe(`spec-driven fuzzing (seed ${SEED}, ${RUNS} requests; FUZZ_SEED/FUZZ_RUNS override)`, () => {
  it("sends requests to every operation of the spec, valid and invalid ones", () => {
    const spec = SpecModel.load();
    expect(Object.keys(report.operations).sort()).toEqual(spec.operations.map((op) => op.id).sort());
    expect(spec.operations).toHaveLength(11);
    for (const [id, stats] of Object.entries(report.operations)) {
      expect(stats.requests, id).toBeGreaterThan(RUNS / 40);
      const op = spec.operations.find((o) => o.id === id);
      if (op?.body || op?.params.some((p) => p.in === "query"))
        expect(stats.invalidSent, id).toBeGreaterThan(0);
    }
    expect(report.requests).toBeGreaterThanOrEqual(RUNS * 0.95);
    // The protected data was aimed at, by its owner and by everyone else.
    expect(report.coverage["protected-data:admin"]).toBeGreaterThan(0);
    expect(report.coverage["protected-data:member"]).toBeGreaterThan(0);
  });

  it("never gets a 5xx, a dropped connection or a hang, and the server stays up", () => {
    const text = `${formatReport(report)}\nserver errors:\n${errorLines(server.log()).slice(0, 5).join("\n")}`;
    expect(report.counts["5xx"], text).toBe(0);
    expect(report.counts["no-response"], text).toBe(0);
    expect(report.counts.hang, text).toBe(0);
    expect(report.counts.crash, text).toBe(0);
    expect(report.probes.ok).toBe(report.probes.made);
    expect(server.exit()).toBeUndefined();
  });

  it("every response matches the spec for its operation and status; nothing the spec refuses is accepted", () => {
    const text = formatReport(report);
    expect(report.counts["spec-violation"], text).toBe(0);
    expect(report.counts["accepted-invalid"], text).toBe(0);
    const unknown = Object.keys(report.classes).filter(
      (key) => key.startsWith("undocumented-status") && !knownSpecGap(report.classes[key].example),
    );
    expect(unknown, text).toEqual([]);
  });

  it("leaves the data created before fuzzing byte-identical", () => {
    expect(report.integrity).toEqual([]);
  });

  it("the canary: a 500, a spec violation and a change to protected data behind a broken proxy are all reported", () => {
    expect(faults.some((f) => f.startsWith("500"))).toBe(true);
    expect(faults).toContain("models without has_more");
    expect(faultyReport.counts["5xx"]).toBeGreaterThan(0);
    const violations = Object.keys(faultyReport.classes).filter((k) => k.startsWith("spec-violation"));
    expect(violations.some((k) => k.includes("listModels") && k.includes("has_more"))).toBe(true);
    expect(
      faults.some((f) => f.startsWith("unshared")),
      "the fuzzer sent no share toggle the server refused",
    ).toBe(true);
    const integrity = faultyReport.integrity.join("\n");
    expect(integrity).toMatch(/changed: fz-prot-shared-[^ ]+ 200 .*"shared":true/);
    expect(integrity).toMatch(/now: fz-prot-shared-[^ ]+ 200 .*"shared":false/);
  });
});
