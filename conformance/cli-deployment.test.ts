/**
 * `agent-api check` as an operator runs it against a deployment behind a proxy: a child process, real
 * flags, real exit codes, the demo behind real loopback fronts (a 1 MB body limit; TLS from a private CA).
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DemoServer } from "../reference-server/demo/index.ts";
import { SOURCE_CONDITION_FLAG } from "../scripts/source-condition.ts";
import { type FrontServer, makeTestCa, startFront, type TestCa } from "./testing/front-server.ts";

const root = new URL("..", import.meta.url).pathname;
/** Each test starts one to three CLI processes; on a loaded 2-core machine one can take 20 s. */
const CLI_TEST_MS = 120_000;
const node = join(root, "node_modules/.bin/node");

function runCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const base = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith("AGENT_API_") && k !== "NODE_EXTRA_CA_CERTS"),
    );
    // The explorer's own budget: these runs judge the fronts, not a fresh random sample.
    base.AGENT_API_EXPLORE = "0";
    execFile(
      node,
      [SOURCE_CONDITION_FLAG, "conformance/cli/agent-api.ts", "check", "--no-color", ...args],
      { cwd: root, env: { ...base, ...env } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

let demo: DemoServer;
let dir: string;
let ca: TestCa;
let limited: FrontServer;
let tls: FrontServer;

beforeAll(async () => {
  const { startDemoServer } = await import("../reference-server/demo/index.ts");
  demo = await startDemoServer(500, { unsafeNoIsolation: true });
  dir = await mkdtemp(join(tmpdir(), "acc-cli-deploy-"));
  ca = makeTestCa(dir);
  limited = await startFront({ upstream: demo.url, bodyLimit: 1_000_000 });
  tls = await startFront({ upstream: demo.url, tls: { key: ca.key, cert: ca.cert } });
}, 60_000);

afterAll(async () => {
  await limited?.close();
  await tls?.close();
  await demo?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The demo's agent and key, at `baseUrl`. */
function at(baseUrl: string): Record<string, string> {
  return {
    AGENT_API_BASE_URL: baseUrl,
    AGENT_API_AGENT: demo.envVars.AGENT_API_AGENT,
    AGENT_API_KEY: demo.envVars.AGENT_API_KEY,
  };
}

async function baseline(name: string, text: string): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, text);
  return file;
}

it(
  "documents its exit codes in --help",
  async () => {
    const { code, stdout } = await runCli(["--help"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/Exit codes:\n +0 +every MUST check that ran passed/);
    expect(stdout).toMatch(/ +1 +a MUST check failed, including one the deployment prevented/);
    expect(stdout).toMatch(/ +2 +the run could not be made/);
    expect(stdout).toContain("--expected-failures <file>");
    expect(stdout).toContain("--ca <file>");
    expect(stdout).toContain("--http2");
  },
  CLI_TEST_MS,
);

describe.concurrent("behind a proxy whose body limit is 1 MB", () => {
  const only = ["--only", "LIMIT-ATTACHMENT-SIZE,AUTH-401-MISSING"];

  it(
    "exits 1 on the proxy's 413, saying it is the proxy's, and the body size to allow",
    async () => {
      const { code, stdout } = await runCli(only, at(limited.url));
      expect(code).toBe(1);
      expect(stdout).toMatch(/FAIL MUST +LIMIT-ATTACHMENT-SIZE .*HTML 413 page.*client_max_body_size 16m/);
      expect(stdout).toContain("1 failure came from the deployment answering instead of the API");
      expect(stdout).toMatch(/verdict: FAIL\n/);
    },
    CLI_TEST_MS,
  );

  it(
    "exits 0 when the baseline lists that failure, showing it as an expected failure",
    async () => {
      const file = await baseline(
        "known.yaml",
        "- id: LIMIT-ATTACHMENT-SIZE\n  reason: CDN body limit, ticket OPS-7\n",
      );
      const { code, stdout } = await runCli([...only, "--expected-failures", file], at(limited.url));
      expect(code).toBe(0);
      expect(stdout).toMatch(/XFAIL MUST +LIMIT-ATTACHMENT-SIZE .*expected: CDN body limit, ticket OPS-7; /);
      expect(stdout).toContain("1 expected failure listed in the baseline (not failing the run)");
    },
    CLI_TEST_MS,
  );

  it(
    "exits 1 when a listed check passes (stale baseline), and 2 when the baseline names no check",
    async () => {
      const stale = await baseline(
        "stale.json",
        JSON.stringify([{ id: "AUTH-401-MISSING", reason: "was broken" }]),
      );
      const ran = await runCli(["--only", "AUTH-401-MISSING", "--expected-failures", stale], at(limited.url));
      expect(ran.code).toBe(1);
      expect(ran.stdout).toContain(
        "1 listed expected failure passed (stale baseline; remove it): AUTH-401-MISSING",
      );
      const unknown = await baseline("unknown.yaml", "- {id: AUTH-401-NOPE, reason: typo}\n");
      const refused = await runCli(["--expected-failures", unknown], at(limited.url));
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain("AUTH-401-NOPE is not a check id");
      expect(refused.stdout).not.toMatch(/PASS|FAIL/);
    },
    CLI_TEST_MS,
  );
});

describe.concurrent("TLS from a private CA", () => {
  it(
    "exits 2 naming the fix when the CA is not trusted",
    async () => {
      const { code, stderr } = await runCli(["--only", "AUTH-401-MISSING"], at(tls.url));
      expect(code).toBe(2);
      expect(stderr).toContain("not signed by a CA this machine trusts");
      expect(stderr).toContain("--ca FILE (or NODE_EXTRA_CA_CERTS=FILE)");
    },
    CLI_TEST_MS,
  );

  it(
    "passes with --ca over HTTP/2, and with NODE_EXTRA_CA_CERTS",
    async () => {
      // A front of its own: the other tests here run at the same time.
      const h2Front = await startFront({ upstream: demo.url, tls: { key: ca.key, cert: ca.cert } });
      try {
        const h2 = await runCli(
          ["--only", "AUTH-401-MISSING", "--ca", ca.caFile, "--http2"],
          at(h2Front.url),
        );
        expect(h2.code, h2.stdout + h2.stderr).toBe(0);
        expect(h2Front.seen.length).toBeGreaterThan(1);
        expect(h2Front.seen.filter((line) => !line.startsWith("HTTP/2.0 "))).toEqual([]);
      } finally {
        await h2Front.close();
      }
      const extra = await runCli(["--only", "AUTH-401-MISSING"], {
        ...at(tls.url),
        NODE_EXTRA_CA_CERTS: ca.caFile,
      });
      expect(extra.code, extra.stdout + extra.stderr).toBe(0);
    },
    CLI_TEST_MS,
  );

  it(
    "exits 2 when --ca names a file that holds no certificate",
    async () => {
      const { code, stderr } = await runCli(["--ca", join(dir, "server.ext")], at(tls.url));
      expect(code).toBe(2);
      expect(stderr).toContain("holds no PEM certificate");
    },
    CLI_TEST_MS,
  );
});
