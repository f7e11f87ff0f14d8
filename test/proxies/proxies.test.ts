/**
 * The deployment guide, proven: README.md's "Behind a reverse proxy" configs, pasted from the page, run in
 * Debian's nginx, HAProxy and Caddy with TLS from a CA made here, and `agent-api check` (the command, as an
 * operator runs it, trusting the CA through NODE_EXTRA_CA_CERTS) against `agent-api serve`'s demo through them.
 *
 * - through the guide's nginx, HAProxy and Caddy configs every MUST check passes (the streaming checks
 *   included, the 10 MiB attachment and the flow route too);
 * - through nginx told to buffer (`proxy_buffering on; proxy_ignore_headers X-Accel-Buffering;`) the run
 *   exits 1 naming SSE-STREAMED-INCREMENTAL and SSE-HEADERS-BEFORE-END, and so it does through Caddy told to
 *   buffer (`buffer_responses`): the guide's Caddy block streams without `flush_interval`;
 * - with nginx's idle (read) time-out at 3 s, a turn quiet for 8 s survives when the server's keep-alive
 *   interval is 1 s and is cut, failing SSE-IDLE-SURVIVES, when it is 30 s: the guide's rule
 *   "proxy idle time-out > keep-alive interval".
 *
 * Run by `npm run test:proxies` (its own step in CI, after `npm test`): it takes about a minute.
 */
import { execFile } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mustVerdict } from "../../conformance/reference-verdict.ts";
import { makeTestCa, type TestCa } from "../../conformance/testing/front-server.ts";
import type { RunReport } from "../../conformance/types.ts";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";
import { type ServeCommand, startServeCommand } from "../../reference-server/test/sandbox-server.ts";
import { SOURCE_CONDITION_FLAG } from "../../scripts/source-condition.ts";
import { freePort, type RunningProxy, startCaddy, startHaproxy, startNginx } from "./proxy-processes.ts";
import { caddyfile, haproxyConfig, nginxSite, readmeBlock, replaceOnce } from "./readme-configs.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const BIN = join(ROOT, "bin/agent-api");
const STREAMING_IDS = ["SSE-STREAMED-INCREMENTAL", "SSE-HEADERS-BEFORE-END"];
/** nginx's idle limit in the idle proof, and how long the turn stays quiet (past it, under the tool limit). */
const PROXY_IDLE_S = 3;
const QUIET_S = 3;

let dir: string;
let certs: TestCa;
/** The server certificate then its key, in one file (HAProxy's `crt`). */
let pemFile: string;
/** `agent-api serve` (the command) with a 1 s keep-alive interval and a 20 s tool limit. */
let server: ServeCommand;
let serverEnv: Record<string, string>;
/** An in-process demo whose keep-alive interval (30 s) is longer than the proxy's idle limit. */
let slowKeepAlive: DemoServer;
const proxies: RunningProxy[] = [];

function parseEnvFile(text: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line.trim());
    if (!match) continue;
    const value = match[2];
    vars[match[1]] = /^'.*'$/.test(value) ? value.slice(1, -1).replaceAll("'\\''", "'") : value;
  }
  return vars;
}

interface CheckRun {
  code: number;
  stdout: string;
  stderr: string;
  report: RunReport;
}

/** `agent-api check` through `proxyUrl` against the demo whose variables are `env`, trusting the test's CA. */
function check(proxyUrl: string, env: Record<string, string>, args: string[]): Promise<CheckRun> {
  const reportFile = join(dir, `report-${Math.random().toString(36).slice(2)}.json`);
  // A clean environment: no AGENT_API_* of the developer's shell, no proxy variable for loopback.
  const base = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith("AGENT_API_") && !/^(https?|all)_proxy$/i.test(k),
    ),
  );
  const childEnv = {
    ...base,
    ...env,
    AGENT_API_BASE_URL: proxyUrl,
    AGENT_API_FLOW_URL: proxyUrl,
    AGENT_API_SESSION_WAIT_MS: "8000",
    // A fixed sample of the explorer behind each proxy: the same sequences on every run, never a fresh flake.
    AGENT_API_EXPLORE: "10",
    AGENT_API_SEED: "29",
    NODE_EXTRA_CA_CERTS: certs.caFile,
  };
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [
        SOURCE_CONDITION_FLAG,
        "conformance/cli/agent-api.ts",
        "check",
        "--no-color",
        "--json",
        reportFile,
        ...args,
      ],
      { cwd: ROOT, env: childEnv, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? Number(error.code ?? 1) : 0;
        readFile(reportFile, "utf8").then(
          (text) => resolve({ code, stdout, stderr, report: JSON.parse(text) as RunReport }),
          () => reject(new Error(`no report (exit ${code}):\n${stdout}\n${stderr}`)),
        );
      },
    );
  });
}

function upstreamOf(url: string): string {
  return new URL(url).host;
}

/** nginx on the README's config (after `edit`, e.g. a variant), in front of the server at `url`. */
async function nginxFor(
  url: string,
  name: string,
  edit: (block: string) => string = (b) => b,
): Promise<RunningProxy> {
  const port = await freePort();
  const block = edit(await readmeBlock("nginx"));
  const site = nginxSite(block, {
    upstream: upstreamOf(url),
    port,
    certFile: certs.certFile,
    keyFile: certs.keyFile,
  });
  const proxy = await startNginx(join(dir, name), site, port);
  proxies.push(proxy);
  return proxy;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agent-api-proxies-"));
  // The tools' users (one per conversation) pass through to the server's data directory below.
  await chmod(dir, 0o711);
  const certDir = join(dir, "tls");
  await mkdir(certDir, { mode: 0o700 });
  certs = makeTestCa(certDir);
  pemFile = join(certDir, "server-with-key.pem");
  await writeFile(pemFile, certs.cert + certs.key, { mode: 0o600 });
  const envFile = join(dir, "demo.env");
  // The tools' sandbox where bubblewrap works; unisolated where it does not (the sandbox has its own tests).
  [server, slowKeepAlive] = await Promise.all([
    startServeCommand([
      BIN,
      "serve",
      "--port",
      "0",
      "--data",
      join(dir, "serve-data"),
      "--write-env-file",
      envFile,
      "--session-delay-ms",
      "1000",
      "--keep-alive-ms",
      "1000",
      "--tool-timeout-seconds",
      "20",
      "--unsafe-no-isolation",
      "--log-level",
      "warn",
    ]),
    startDemoServer(1000, { unsafeNoIsolation: true, keepAliveMs: 30_000 }),
  ]);
  serverEnv = parseEnvFile(await readFile(envFile, "utf8"));
}, 60_000);

afterAll(async () => {
  for (const proxy of proxies) await proxy.stop();
  await server?.stop();
  await slowKeepAlive?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the README's reverse-proxy guide, run for real", () => {
  it("nginx with the guide's config: every MUST check passes over TLS, the streaming checks included", async () => {
    const proxy = await nginxFor(server.url, "nginx-guide");
    const run = await check(proxy.url, serverEnv, ["--idle-seconds", "2"]);
    expect(mustVerdict(run.report), run.stdout.slice(-3000)).toEqual({
      failures: [],
      unexpectedSkips: [],
      warnings: [],
    });
    expect(run.code, run.stdout.slice(-2000)).toBe(0);
    const outcome = (id: string) => run.report.results.find((r) => r.id === id)?.outcome;
    // The rules the guide's settings exist for ran and passed: streaming, body size, flows under /apps/.
    for (const id of [...STREAMING_IDS, "SSE-IDLE-SURVIVES", "LIMIT-ATTACHMENT-SIZE", "FLOW-INVOKE"]) {
      expect(outcome(id), id).toBe("pass");
    }
    // The console shows the judged turn's timeline under its line.
    expect(run.stdout).toMatch(
      /PASS MUST +SSE-STREAMED-INCREMENTAL.*\n +turn with a slow tool command: headers \d/,
    );
  }, 240_000);

  it("nginx told to buffer: the run exits 1 naming the streaming checks", async () => {
    // What many gateways do unless configured: buffer, whatever the API server asks.
    const proxy = await nginxFor(server.url, "nginx-buffering", (block) =>
      replaceOnce(
        block,
        "proxy_buffering off;",
        "proxy_buffering on;\n        proxy_ignore_headers X-Accel-Buffering;",
      ),
    );
    const run = await check(proxy.url, serverEnv, [
      "--only",
      [...STREAMING_IDS, "SSE-CONTENT-TYPE"].join(","),
    ]);
    expect(run.code, run.stdout).toBe(1);
    for (const id of STREAMING_IDS) {
      expect(run.stdout, id).toMatch(new RegExp(`FAIL MUST +${id} `));
    }
    expect(run.stdout).toMatch(/PASS MUST +SSE-CONTENT-TYPE/);
    expect(run.stdout).toMatch(/2 MUST checks failed: SSE-STREAMED-INCREMENTAL, SSE-HEADERS-BEFORE-END/);
  }, 120_000);

  it(`an idle time-out of ${PROXY_IDLE_S} s: a quiet turn survives a 1 s keep-alive interval and is cut with a 30 s one`, async () => {
    const shortIdle = (block: string) =>
      replaceOnce(block, "proxy_read_timeout 300s;", `proxy_read_timeout ${PROXY_IDLE_S}s;`);
    const [kept, cut] = await Promise.all([
      nginxFor(server.url, "nginx-idle-kept", shortIdle),
      nginxFor(slowKeepAlive.url, "nginx-idle-cut", shortIdle),
    ]);
    const args = ["--only", "SSE-IDLE-SURVIVES", "--idle-seconds", String(PROXY_IDLE_S + QUIET_S)];
    const [survived, wasCut] = await Promise.all([
      check(kept.url, serverEnv, args),
      check(cut.url, slowKeepAlive.envVars, args),
    ]);
    expect(survived.code, survived.stdout).toBe(0);
    expect(survived.stdout).toMatch(/PASS MUST +SSE-IDLE-SURVIVES/);
    expect(wasCut.code, wasCut.stdout).toBe(1);
    expect(wasCut.stdout).toMatch(/FAIL MUST +SSE-IDLE-SURVIVES .*(cut|keep the connection alive)/i);
  }, 120_000);

  it("HAProxy with the guide's config: every MUST check passes over TLS", async () => {
    const port = await freePort();
    const config = haproxyConfig(
      await readmeBlock("haproxy"),
      { upstream: upstreamOf(server.url), port },
      pemFile,
    );
    const proxy = await startHaproxy(join(dir, "haproxy"), config, port);
    proxies.push(proxy);
    const run = await check(proxy.url, serverEnv, []);
    expect(mustVerdict(run.report), run.stdout.slice(-3000)).toEqual({
      failures: [],
      unexpectedSkips: [],
      warnings: [],
    });
    expect(run.code, run.stdout.slice(-2000)).toBe(0);
    for (const id of [...STREAMING_IDS, "LIMIT-ATTACHMENT-SIZE", "FLOW-INVOKE"]) {
      expect(run.report.results.find((r) => r.id === id)?.outcome, id).toBe("pass");
    }
  }, 240_000);

  it("Caddy with the guide's config: every MUST check passes over TLS", async () => {
    const port = await freePort();
    const config = caddyfile(await readmeBlock("caddy"), {
      upstream: upstreamOf(server.url),
      port,
      certFile: certs.certFile,
      keyFile: certs.keyFile,
    });
    const proxy = await startCaddy(join(dir, "caddy"), config, port);
    proxies.push(proxy);
    const run = await check(proxy.url, serverEnv, ["--idle-seconds", "2"]);
    expect(mustVerdict(run.report), run.stdout.slice(-3000)).toEqual({
      failures: [],
      unexpectedSkips: [],
      warnings: [],
    });
    expect(run.code, run.stdout.slice(-2000)).toBe(0);
    for (const id of [...STREAMING_IDS, "SSE-IDLE-SURVIVES", "LIMIT-ATTACHMENT-SIZE", "FLOW-INVOKE"]) {
      expect(run.report.results.find((r) => r.id === id)?.outcome, id).toBe("pass");
    }
  }, 240_000);

  it("Caddy with a 1 MB body limit: the large-attachment check names the limit, though Caddy answers 502", async () => {
    const port = await freePort();
    const limited = replaceOnce(await readmeBlock("caddy"), "max_size 32MB", "max_size 1MB");
    const config = caddyfile(limited, {
      upstream: upstreamOf(server.url),
      port,
      certFile: certs.certFile,
      keyFile: certs.keyFile,
    });
    const proxy = await startCaddy(join(dir, "caddy-limited"), config, port);
    proxies.push(proxy);
    const run = await check(proxy.url, serverEnv, ["--only", "LIMIT-ATTACHMENT-SIZE"]);
    expect(run.code, run.stdout).toBe(1);
    expect(run.stdout).toMatch(
      /FAIL MUST +LIMIT-ATTACHMENT-SIZE .*502.*request body size limit.*request_body \{ max_size 16MB \}/s,
    );
  }, 120_000);

  it("Caddy told to buffer responses: the run exits 1 naming the streaming checks", async () => {
    const port = await freePort();
    const buffering = replaceOnce(
      await readmeBlock("caddy"),
      "reverse_proxy @agent_api 127.0.0.1:3001\n",
      "reverse_proxy @agent_api 127.0.0.1:3001 {\n        buffer_responses\n    }\n",
    );
    const config = caddyfile(buffering, {
      upstream: upstreamOf(server.url),
      port,
      certFile: certs.certFile,
      keyFile: certs.keyFile,
    });
    const proxy = await startCaddy(join(dir, "caddy-buffering"), config, port);
    proxies.push(proxy);
    const run = await check(proxy.url, serverEnv, [
      "--only",
      [...STREAMING_IDS, "SSE-CONTENT-TYPE"].join(","),
    ]);
    expect(run.code, run.stdout).toBe(1);
    for (const id of STREAMING_IDS) {
      expect(run.stdout, id).toMatch(new RegExp(`FAIL MUST +${id} `));
    }
    expect(run.stdout).toMatch(/PASS MUST +SSE-CONTENT-TYPE/);
  }, 120_000);
});
