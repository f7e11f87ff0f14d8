/**
 * The suite against deployments that go wrong in front of the API, all real servers on loopback: the demo
 * behind a proxy that serves it under a prefix, answers HTML 404 for /apps/ and HTML 413 past 1 MB; a
 * proxy with no upstream (HTML 502); TLS from a private CA; HTTP/2. Each mistake must be named, with its
 * cause and fix, and fail the checks it prevented; the JSON report of a real run must match its schema.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
// ajv-formats is CommonJS: Node's default import is its module.exports, the plugin itself, which the package
// also names `.default` (the name its types give it), so `.default` is right at run time and for tsc.
import ajvFormats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { catalogue } from "../../conformance/catalogue.ts";
import { reachability } from "../../conformance/http.ts";
import { resolveInputs } from "../../conformance/inputs.ts";
import { summarize } from "../../conformance/reports/console.ts";
import { jsonReport } from "../../conformance/reports/json.ts";
import { runSuite } from "../../conformance/runner.ts";
import { SpecValidator } from "../../conformance/spec-validator.ts";
import {
  type FrontServer,
  makeTestCa,
  startFront,
  type TestCa,
} from "../../conformance/testing/front-server.ts";
import type { CheckResult, RunReport } from "../../conformance/types.ts";
import type { DemoServer } from "../../reference-server/demo/index.ts";

let demo: DemoServer;
let validator: SpecValidator;
let dir: string;
let ca: TestCa;
const fronts: FrontServer[] = [];

beforeAll(async () => {
  const { startDemoServer } = await import("../../reference-server/demo/index.ts");
  demo = await startDemoServer(1000, { unsafeNoIsolation: true });
  validator = await SpecValidator.load();
  dir = await mkdtemp(join(tmpdir(), "acc-deploy-"));
  ca = makeTestCa(dir);
}, 60_000);

afterAll(async () => {
  await Promise.all(fronts.map((f) => f.close()));
  await demo?.close();
  await rm(dir, { recursive: true, force: true });
});

async function front(options: Parameters<typeof startFront>[0]): Promise<FrontServer> {
  const f = await startFront(options);
  fronts.push(f);
  return f;
}

/** The demo's inputs, aimed at `baseUrl` (and its flow route at `flowUrl`). */
function inputsAt(baseUrl: string, flowUrl = baseUrl) {
  return resolveInputs(
    {},
    {
      ...demo.envVars,
      AGENT_API_BASE_URL: baseUrl,
      AGENT_API_FLOW_URL: flowUrl,
      AGENT_API_SESSION_WAIT_MS: "5000",
    },
  );
}

function byId(report: RunReport, id: string): CheckResult {
  const r = report.results.find((x) => x.id === id);
  if (!r) throw new Error(`${id} did not run`);
  return r;
}

describe("behind a proxy that serves the API under /agentapi, forwards only /api/, and limits bodies to 1 MB", () => {
  let proxy: FrontServer;
  let report: RunReport;

  beforeAll(async () => {
    proxy = await front({
      upstream: demo.url,
      prefix: "/agentapi",
      forward: ["/api/"],
      bodyLimit: 1_000_000,
    });
    report = await runSuite({
      checks: catalogue,
      only: ["LIMIT-ATTACHMENT-SIZE", "FLOW-INVOKE", "AUTH-401-MISSING", "SSE-CONTENT-TYPE"],
      inputs: inputsAt(proxy.url),
      validator,
    });
  }, 60_000);

  it("probes reachability under the base address's prefix", async () => {
    proxy.seen.length = 0;
    expect(await reachability(`${proxy.url}/`)).toBeNull();
    expect(proxy.seen).toEqual(["HTTP/1.1 GET /agentapi/api/agents"]);
  });

  it("fails the attachment check the proxy's HTML 413 prevented, naming the body limit and the size to allow", () => {
    const r = byId(report, "LIMIT-ATTACHMENT-SIZE");
    expect(r.outcome).toBe("fail");
    expect(r.prevented).toBe(true);
    expect(r.reason).toContain("HTML 413 page");
    expect(r.reason).toMatch(/body size limit is below this request's 14\.7 MB body/);
    expect(r.reason).toContain("client_max_body_size 16m");
  });

  it("fails the flow check the proxy's HTML 404 prevented, saying to forward /apps/", () => {
    const r = byId(report, "FLOW-INVOKE");
    expect(r).toMatchObject({ outcome: "fail", prevented: true });
    expect(r.reason).toContain("HTML 404 page");
    expect(r.reason).toContain("forward paths beginning /apps/ to the API");
  });

  it("still passes what the proxy forwards", () => {
    expect(byId(report, "AUTH-401-MISSING").outcome).toBe("pass");
    expect(byId(report, "SSE-CONTENT-TYPE").outcome).toBe("pass");
  });

  it("writes a JSON report that validates against the published schema", async () => {
    const schema = JSON.parse(
      await readFile(new URL("../../conformance/report.schema.json", import.meta.url), "utf8"),
    );
    const ajv = new Ajv2020({ allErrors: true });
    ajvFormats.default(ajv);
    const validate = ajv.compile(schema);
    const parsed = JSON.parse(jsonReport(report));
    expect(validate(parsed), JSON.stringify(validate.errors)).toBe(true);
    expect(parsed.summary).toMatchObject({ prevented: 2, verdict: "fail" });
    // A report that breaks it is refused: the schema says something.
    expect(validate({ ...parsed, results: [{ ...parsed.results[0], outcome: "maybe" }] })).toBe(false);
  });
});

it("fails a check with the upstream named when a proxy with no upstream answers its own HTML 502", async () => {
  const proxy = await front({});
  const report = await runSuite({
    checks: catalogue,
    only: ["AUTH-401-MISSING"],
    inputs: inputsAt(proxy.url),
    validator,
  });
  const r = byId(report, "AUTH-401-MISSING");
  expect(r).toMatchObject({ outcome: "fail", prevented: true });
  expect(r.reason).toContain("HTML 502 page");
  expect(r.reason).toContain("the proxy got no answer from the API upstream");
  expect(summarize(report).prevented).toBe(1);
});

it("fails (not skips) the attachment check when the API's own body limit refuses 10 MiB of attachments", async () => {
  const api = await front({ upstream: demo.url, bodyLimit: 1_000_000, bodyLimitAsApi: true });
  const report = await runSuite({
    checks: catalogue,
    only: ["LIMIT-ATTACHMENT-SIZE"],
    inputs: inputsAt(api.url),
    validator,
  });
  const r = byId(report, "LIMIT-ATTACHMENT-SIZE");
  expect(r.outcome).toBe("fail");
  expect(r.prevented).toBeUndefined();
  expect(r.reason).toContain("its body limit is below what 10 MiB of attachments need");
});

describe("TLS from a private CA", () => {
  let proxy: FrontServer;

  beforeAll(async () => {
    proxy = await front({ upstream: demo.url, tls: { key: ca.key, cert: ca.cert } });
  });

  it("names a certificate from an unknown CA, and a self-signed one, with the fix: --ca or NODE_EXTRA_CA_CERTS", async () => {
    const said = await reachability(proxy.url);
    expect(said).toContain("(UNABLE_TO_VERIFY_LEAF_SIGNATURE): it is not signed by a CA this machine trusts");
    expect(said).toContain("--ca FILE (or NODE_EXTRA_CA_CERTS=FILE)");
    const selfSigned = await front({ upstream: demo.url, tls: { key: ca.caKey, cert: ca.caCert } });
    const saidSelf = await reachability(selfSigned.url);
    expect(saidSelf).toContain("(DEPTH_ZERO_SELF_SIGNED_CERT)");
    expect(saidSelf).toContain("--ca FILE");
  });

  it("fails (prevented) a check whose request TLS refused", async () => {
    const report = await runSuite({
      checks: catalogue,
      only: ["AUTH-401-MISSING"],
      inputs: inputsAt(proxy.url),
      validator,
    });
    const r = byId(report, "AUTH-401-MISSING");
    expect(r).toMatchObject({ outcome: "fail", prevented: true });
    expect(r.reason).toContain("not signed by a CA this machine trusts");
  });

  it("trusts the CA given as `ca`, on top of the public ones", async () => {
    expect(await reachability(proxy.url, undefined, { ca: ca.caCert })).toBeNull();
    const report = await runSuite({
      checks: catalogue,
      only: ["AUTH-*"],
      inputs: inputsAt(proxy.url),
      connection: { ca: ca.caCert },
      validator,
    });
    expect(report.results.filter((r) => r.outcome === "fail").map((r) => `${r.id}: ${r.reason}`)).toEqual([]);
  });
});

describe("over HTTP/2", () => {
  it("sends every request as h2 and passes every MUST check but the one its proxy's 413 prevented", async () => {
    const proxy = await front({
      upstream: demo.url,
      tls: { key: ca.key, cert: ca.cert },
      bodyLimit: 1_000_000,
    });
    const report = await runSuite({
      checks: catalogue,
      level: "MUST",
      inputs: inputsAt(proxy.url),
      connection: { ca: ca.caCert, http2: true },
      validator,
    });
    const failed = report.results.filter((r) => r.outcome === "fail").map((r) => `${r.id}: ${r.reason}`);
    // The upload is refused before it is read: over h2 the stream is reset mid-body, and the client sees the
    // reset rather than the 413 (as through nginx). Either way the body limit is named, and only this check fails.
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatch(
      /^LIMIT-ATTACHMENT-SIZE: .*(HTML 413 page|connection was cut while the 14\.7 MB request body was being sent)/,
    );
    expect(failed[0]).toContain("client_max_body_size 16m");
    expect(proxy.seen.length).toBeGreaterThan(100);
    expect(proxy.seen.filter((line) => !line.startsWith("HTTP/2.0 "))).toEqual([]);
  }, 120_000);
});
