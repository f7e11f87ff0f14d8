/**
 * The suite through a real nginx with TLS (a CA made in the test) and HTTP/2, in front of the demo, with two
 * mistakes operators make: nginx's default 1 MB body limit, and only `/api/` forwarded. Every request goes
 * over h2; the two mistakes fail exactly the checks they prevent, named with the fix, and the large upload
 * nginx refuses does not take the other checks' h2 session down with it.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { catalogue } from "../../conformance/catalogue.ts";
import { resolveInputs } from "../../conformance/inputs.ts";
import { runSuite } from "../../conformance/runner.ts";
import { makeTestCa } from "../../conformance/testing/front-server.ts";
import { freePort, type Nginx, nginxAvailable, startNginx } from "../../conformance/testing/nginx.ts";
import type { RunReport } from "../../conformance/types.ts";
import type { DemoServer } from "../../reference-server/demo/index.ts";

const available = nginxAvailable();
let demo: DemoServer | undefined;
let nginx: Nginx | undefined;
let dir: string | undefined;
let report: RunReport;

beforeAll(async () => {
  if (!available) return;
  const { startDemoServer } = await import("../../reference-server/demo/index.ts");
  demo = await startDemoServer(1000, { unsafeNoIsolation: true });
  dir = await mkdtemp(join(tmpdir(), "acc-nginx-"));
  const ca = makeTestCa(dir);
  const port = await freePort();
  nginx = await startNginx(
    dir,
    port,
    `server {
    listen 127.0.0.1:${port} ssl http2;
    ssl_certificate ${ca.certFile};
    ssl_certificate_key ${ca.keyFile};
    location /api/ {
      proxy_pass ${demo.url};
      proxy_http_version 1.1;
      proxy_buffering off;
      proxy_read_timeout 120s;
    }
  }`,
  );
  const base = `https://127.0.0.1:${port}`;
  report = await runSuite({
    checks: catalogue,
    level: "MUST",
    inputs: resolveInputs(
      {},
      {
        ...demo.envVars,
        AGENT_API_BASE_URL: base,
        AGENT_API_FLOW_URL: base,
        AGENT_API_SESSION_WAIT_MS: "5000",
      },
    ),
    connection: { ca: ca.caCert, http2: true },
  });
}, 180_000);

afterAll(async () => {
  await nginx?.close();
  await demo?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

it.skipIf(!available)(
  "over h2 through nginx: only the body-limit and /apps/ checks (the flow's, keyed and unkeyed) fail, each as prevented with its fix",
  () => {
    const failed = report.results.filter((r) => r.outcome === "fail");
    expect(failed.map((r) => r.id).sort()).toEqual(["FLOW-INVOKE", "FLOW-NO-KEY", "LIMIT-ATTACHMENT-SIZE"]);
    for (const r of failed) expect(r.prevented, `${r.id}: ${r.reason}`).toBe(true);
    const byId = (id: string) => failed.find((r) => r.id === id)?.reason ?? "";
    expect(byId("LIMIT-ATTACHMENT-SIZE")).toContain("client_max_body_size 16m");
    expect(byId("FLOW-INVOKE")).toContain("forward paths beginning /apps/ to the API");
    expect(byId("FLOW-INVOKE")).toContain("HTML 404 page");
    expect(byId("FLOW-NO-KEY")).toContain("forward paths beginning /apps/ to the API");
  },
);
