/**
 * Correct deployments in the field's trouble, each started as an operator runs it (`agent-api serve` and
 * `agent-api model` in child processes): the conditions test:legal-variants checks the whole suite and the
 * explorer under. Each start returns the AGENT_API_* variables of the deployment and a probe of its trouble.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmod, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServeCommand } from "../../reference-server/test/sandbox-server.ts";
import { type FlakyRates, startBusyClient, startFlakyUpstream } from "./flaky-upstream.ts";
import { startVariantsProxy } from "./variants-proxy.ts";

const BIN = fileURLToPath(new URL("../../bin/agent-api", import.meta.url));
const CLOCK = fileURLToPath(new URL("./shifted-clock.ts", import.meta.url));

/** The troubles an upstream model may give now and then: overload (both kinds) and refusals (both kinds). */
export const FLAKY_RATES: FlakyRates = {
  streamOverload: 0.04,
  refusal529: 0.04,
  modelRefusal: 0.03,
  emptyReply: 0.03,
};

export type Stop = () => Promise<void>;

export interface Condition {
  vars: Record<string, string>;
  /** What the condition did to the run (troubles injected, conversations added), for the assertions. */
  probe(): Promise<Record<string, number>>;
}

/** `agent-api model` on a free port (`--style realistic --seed N` when `realistic` is given). */
export async function startModel(stops: Stop[], realistic?: number): Promise<string> {
  const args = realistic === undefined ? [] : ["--style", "realistic", "--seed", String(realistic)];
  const child: ChildProcess = spawn(BIN, ["model", ...args, "--port", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  stops.push(async () => {
    if (!child.pid || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    process.kill(-child.pid, "SIGTERM");
    await exited;
  });
  let out = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    out += chunk.toString("utf8");
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`agent-api model did not start: ${out}`)), 30_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8");
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      if (url && (realistic === undefined || /seed \d+/.test(out))) {
        clearTimeout(timer);
        resolve(url);
      }
    });
    child.once("exit", () => {
      clearTimeout(timer);
      reject(new Error(`agent-api model exited: ${out}`));
    });
  });
}

/** The demo served by `agent-api serve` in a child process; its AGENT_API_* variables. */
export async function serveDemo(
  stops: Stop[],
  extraArgs: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<Record<string, string>> {
  const dir = await mkdtemp(join(tmpdir(), "legal-variants-"));
  stops.push(() => rm(dir, { recursive: true, force: true }));
  // Tools run as an unprivileged user, who must be able to pass through to the sandboxes.
  await chmod(dir, 0o711);
  const envFile = join(dir, "demo.env");
  const server = await startServeCommand(
    [
      BIN,
      "serve",
      "--demo",
      "--data",
      join(dir, "data"),
      "--port",
      "0",
      "--env-file",
      envFile,
      "--session-delay-ms",
      "1000",
      "--unsafe-no-isolation",
      "--log-level",
      "silent",
      ...extraArgs,
    ],
    { ...process.env, ...env },
  );
  stops.push(server.stop);
  const vars = Object.fromEntries(
    (await readFile(envFile, "utf8"))
      .trim()
      .split("\n")
      .map((line) => line.split(/=(.*)/s).slice(0, 2)),
  );
  return { ...vars, AGENT_API_SESSION_WAIT_MS: "5000" };
}

/** Behind the legal-variants proxy (framing, codings, chunking from `seed`), URLs with doubled slashes. */
export async function behindVariants(stops: Stop[], seed: number): Promise<Condition> {
  const vars = await serveDemo(stops, []);
  const proxy = await startVariantsProxy(vars.AGENT_API_BASE_URL, seed);
  stops.push(proxy.close);
  return {
    vars: { ...vars, AGENT_API_BASE_URL: `${proxy.url}//`, AGENT_API_FLOW_URL: `${proxy.url}//` },
    probe: async () => Object.fromEntries(proxy.codings),
  };
}

/**
 * On an upstream that is overloaded now and then and sometimes refuses, behind `serve --engine anthropic`;
 * `realistic` puts the realistic model (that seed) behind the trouble instead of the plain one.
 */
export async function onFlakyUpstream(
  stops: Stop[],
  seed: number,
  rates: FlakyRates = FLAKY_RATES,
  realistic?: number,
): Promise<Condition> {
  const model = await startModel(stops, realistic);
  const flaky = await startFlakyUpstream(model, seed, rates);
  stops.push(flaky.close);
  const vars = await serveDemo(stops, ["--engine", "anthropic"], {
    ANTHROPIC_BASE_URL: flaky.url,
    ANTHROPIC_API_KEY: "flaky-upstream-key",
  });
  return { vars, probe: async () => Object.fromEntries(flaky.troubles) };
}

/** `serve --engine anthropic` on the realistic model of `seed` (test/real-model/), without trouble. */
export async function onRealisticModel(stops: Stop[], seed: number): Promise<Condition> {
  const model = await startModel(stops, seed);
  const vars = await serveDemo(stops, ["--engine", "anthropic"], {
    ANTHROPIC_BASE_URL: model,
    ANTHROPIC_API_KEY: "realistic-model-key",
  });
  return { vars, probe: async () => ({}) };
}

/**
 * On a workspace where `clients` other clients of the same key start conversations throughout; the probe
 * stops them and counts their conversations.
 */
export async function onBusyWorkspace(stops: Stop[], clients = 4): Promise<Condition> {
  const vars = await serveDemo(stops, []);
  // Their conversations are left: the deployment and its data are thrown away after the run.
  const busy = Array.from({ length: clients }, () => startBusyClient(vars, 0, { keep: true }));
  let made = 0;
  const stopAll = async () => {
    for (const b of busy.splice(0)) made += await b.stop();
  };
  stops.push(stopAll);
  return {
    vars,
    probe: async () => {
      await stopAll();
      return { conversations: made };
    },
  };
}

/** With the server's clock `offsetMs` away from the suite's. */
export async function withShiftedClock(stops: Stop[], offsetMs: number): Promise<Condition> {
  const vars = await serveDemo(stops, [], {
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import=${CLOCK}`.trim(),
    AGENT_API_TEST_CLOCK_OFFSET_MS: String(offsetMs),
  });
  return { vars, probe: async () => ({}) };
}
