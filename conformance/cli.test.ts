/** `agent-api check` as users run it: a real child process, real flags and environment, real exit codes. */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SOURCE_CONDITION_FLAG } from "../scripts/source-condition.ts";
import { envNameOf, resolveInputs, UsageError } from "./inputs.ts";

const root = new URL("..", import.meta.url).pathname;
const node = join(root, "node_modules/.bin/node");

function runCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // A clean environment: a stray AGENT_API_* of the developer's shell must not leak into the test.
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("AGENT_API_")));
    execFile(
      node,
      [SOURCE_CONDITION_FLAG, "conformance/cli/agent-api.ts", "check", ...args],
      { cwd: root, env: { ...base, ...env } },
      (error, stdout, stderr) => {
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

describe("inputs from flags and environment", () => {
  it("maps flags to AGENT_API_* names", () => {
    expect(envNameOf("--base-url")).toBe("AGENT_API_BASE_URL");
    expect(envNameOf("--member-key")).toBe("AGENT_API_MEMBER_KEY");
  });

  it("reads the environment, lets flags win, and splits flow inputs", () => {
    const inputs = resolveInputs(
      { key: "from-flag" },
      {
        AGENT_API_BASE_URL: "http://127.0.0.1:3001/",
        AGENT_API_FLOW_URL: "http://127.0.0.1:3001/flows//",
        AGENT_API_AGENT: "demo-agent",
        AGENT_API_KEY: "from-env",
        AGENT_API_FLOW_INPUT: "topic=testing",
        AGENT_API_SESSION_WAIT_MS: "2000",
      },
    );
    expect(inputs).toMatchObject({
      baseUrl: "http://127.0.0.1:3001",
      flowUrl: "http://127.0.0.1:3001/flows",
      agent: "demo-agent",
      key: "from-flag",
      flowInput: ["topic=testing"],
      sessionWaitMs: 2000,
    });
  });

  it("refuses missing and malformed values with a usage error", () => {
    expect(() => resolveInputs({}, { AGENT_API_BASE_URL: "http://x" })).toThrow(UsageError);
    expect(() => resolveInputs({ baseUrl: "not a url", agent: "a", key: "k" }, {})).toThrow(/not a URL/);
    expect(() =>
      resolveInputs({ baseUrl: "http://x", agent: "a", key: "k", sessionWaitMs: "soon" }, {}),
    ).toThrow(/session-wait-ms/);
  });

  it("--idle-seconds is opt-in: absent skips its check, bare means 60, a bad value is a usage error", () => {
    const required = { baseUrl: "http://x", agent: "a", key: "k" };
    expect(resolveInputs(required, {}).idleSeconds).toBeUndefined();
    expect(resolveInputs({ ...required, idleSeconds: true }, {}).idleSeconds).toBe(60);
    expect(resolveInputs({ ...required, idleSeconds: "90" }, {}).idleSeconds).toBe(90);
    expect(resolveInputs(required, { AGENT_API_IDLE_SECONDS: "30" }).idleSeconds).toBe(30);
    for (const bad of ["soon", "0", "-5", "1.5", "99999"]) {
      expect(() => resolveInputs({ ...required, idleSeconds: bad }, {}), bad).toThrow(/--idle-seconds/);
    }
  });
});

describe("agent-api check (child process)", () => {
  let server: Server;
  let url: string;
  let dir: string;

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(200).end());
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    dir = await mkdtemp(join(tmpdir(), "acc-cli-"));
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  it("--list prints the catalogue and exits 0", async () => {
    const { code, stdout } = await runCli(["--list"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/SSE-FIRST-MESSAGE-START +MUST +Events/);
    expect(stdout).toMatch(/needs --viewer-key/);
  });

  it("exits 2 on an unknown flag, a bad level, or a missing key", async () => {
    expect((await runCli(["--bogus"])).code).toBe(2);
    expect((await runCli(["--level", "MAYBE"])).code).toBe(2);
    const missing = await runCli(["--base-url", url, "--agent", "a"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("AGENT_API_KEY");
  });

  it("exits 2 when AGENT_API_BASE_URL is set but empty (a CI variable nobody defined), never checking the demo", async () => {
    const empty = await runCli([], { AGENT_API_BASE_URL: "", AGENT_API_AGENT: "a", AGENT_API_KEY: "k" });
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain("AGENT_API_BASE_URL is set but empty");
    expect(empty.stdout).not.toContain("demo");
  });

  it("exits 2 with one clear line when the base URL cannot be reached at all", async () => {
    const closed = await runCli(["--base-url", "http://127.0.0.1:1", "--agent", "a", "--key", "k"]);
    expect(closed.code).toBe(2);
    expect(closed.stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:1: .*ECONNREFUSED/);
    expect(closed.stdout).not.toMatch(/FAIL/);
  });

  it("exits 1 against a server that does nothing, with progress lines and the reports written", async () => {
    // In a folder that does not exist yet, as a CI job's reports/ in a fresh checkout.
    const junit = join(dir, "reports", "new", "r.xml");
    const html = join(dir, "r.html");
    const { code, stdout } = await runCli(
      ["--only", "AUTH-*,SSE-FIRST-MESSAGE-START", "--junit", junit, "--html", html],
      {
        AGENT_API_BASE_URL: url,
        AGENT_API_AGENT: "demo-agent",
        AGENT_API_KEY: "some-key",
      },
    );
    expect(code).toBe(1);
    expect(stdout).toMatch(/FAIL MUST +AUTH-401-MISSING +\d+ ms/);
    expect(stdout).toMatch(/SKIP MUST +AUTH-401-REVOKED/);
    expect(await readFile(junit, "utf8")).toContain("<testsuites");
    expect(await readFile(html, "utf8")).toContain("<h2>Authentication");
  });

  /**
   * A forward proxy as squid is one: clients tunnel through it with CONNECT host:port, which it records.
   * It tunnels the first `tunnels` CONNECTs and cuts the rest (0: it refuses them all, with no CONNECT
   * handler, so Node closes the connection).
   */
  async function startProxy(tunnels = Number.POSITIVE_INFINITY) {
    const seen: string[] = [];
    const proxy = createServer((_req, res) => res.writeHead(405).end());
    if (tunnels > 0)
      proxy.on("connect", (req: IncomingMessage, client: Socket, head: Buffer) => {
        seen.push(`CONNECT ${req.url}`);
        if (seen.length > tunnels) return client.destroy();
        const [host, port] = (req.url ?? "").split(":");
        const upstream = connect(Number(port), host, () => {
          client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
          upstream.write(head);
          upstream.pipe(client);
          client.pipe(upstream);
        });
        upstream.on("error", () => client.destroy());
        client.on("error", () => upstream.destroy());
      });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    return {
      seen,
      /** The environment of a check run against `url` through this proxy. */
      env: {
        AGENT_API_BASE_URL: url,
        AGENT_API_AGENT: "demo-agent",
        AGENT_API_KEY: "some-key",
        HTTP_PROXY: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
        NO_PROXY: "",
        no_proxy: "",
      },
      close: async () => {
        proxy.closeAllConnections();
        await new Promise((resolve) => proxy.close(resolve));
      },
    };
  }

  it("sends through the proxy HTTP_PROXY names, and past it to the hosts NO_PROXY names", async () => {
    const proxy = await startProxy();
    try {
      const proxied = await runCli(["--only", "AUTH-401-MISSING"], proxy.env);
      expect(proxied.stderr).not.toContain("cannot reach");
      expect(proxy.seen).toContain(`CONNECT ${new URL(url).host}`);
      proxy.seen.length = 0;
      const past = { ...proxy.env, NO_PROXY: "127.0.0.1", no_proxy: "127.0.0.1" };
      await runCli(["--only", "AUTH-401-MISSING"], past);
      expect(proxy.seen).toEqual([]);
    } finally {
      await proxy.close();
    }
  });

  it("exits 2 in one line, within its time-out, behind a proxy that refuses to tunnel", async () => {
    // undici waited for ever there (nodejs/undici#3897).
    const proxy = await startProxy(0);
    try {
      const refused = await runCli(["--only", "AUTH-401-MISSING", "--timeout-ms", "1000"], proxy.env);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:\d+: /);
    } finally {
      await proxy.close();
    }
  });

  it("gives a check up at its time-out when the proxy stops tunnelling mid-run, and ends the run", async () => {
    // The first tunnel (the reachability probe's) goes through; every later CONNECT is cut.
    const proxy = await startProxy(1);
    try {
      const cut = await runCli(["--only", "AUTH-401-MISSING", "--timeout-ms", "1000"], proxy.env);
      expect(proxy.seen.length).toBeGreaterThan(1);
      expect(cut.code).toBe(1);
      expect(cut.stdout).toMatch(/FAIL MUST +AUTH-401-MISSING/);
      expect(cut.stdout).toContain("no complete answer within 1000 ms");
    } finally {
      await proxy.close();
    }
  });

  it("exits 2, naming the flag and the file, when a report cannot be written", async () => {
    await writeFile(join(dir, "a-file"), "");
    const blocked = join(dir, "a-file", "inside-a-file.xml");
    const { code, stderr } = await runCli(["--only", "AUTH-401-MISSING", "--junit", blocked], {
      AGENT_API_BASE_URL: url,
      AGENT_API_AGENT: "demo-agent",
      AGENT_API_KEY: "some-key",
    });
    expect(code).toBe(2);
    expect(stderr).toContain(`could not write --junit ${blocked}`);
  });
});
