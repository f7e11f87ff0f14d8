/**
 * The explorer's proof, shared by explorer.test.ts (npm test: fixed seeds) and test/explore/ (npm run
 * test:explore: many seeds): the demo behind the fault proxy, the explorer run alone, and its replay script
 * run for real with sh.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { catalogue } from "../../conformance/catalogue.ts";
import { resolveInputs } from "../../conformance/inputs.ts";
import { runSuite } from "../../conformance/runner.ts";
import type { SpecValidator } from "../../conformance/spec-validator.ts";
import type { RunReport } from "../../conformance/types.ts";
import type { DemoServer } from "../../reference-server/demo/index.ts";
import { SESSION_WAIT_MS } from "./harness.ts";
import { startFaultProxy } from "./proxy.ts";
import type { Mutation } from "./proxy-calls.ts";

/** The explorer's variables for a run through `proxyUrl` (the flow URL too). */
export function proxiedEnv(demo: DemoServer, proxyUrl: string): Record<string, string> {
  return {
    ...demo.envVars,
    AGENT_API_BASE_URL: proxyUrl,
    AGENT_API_FLOW_URL: proxyUrl,
    AGENT_API_SESSION_WAIT_MS: String(SESSION_WAIT_MS),
  };
}

/**
 * The explorer alone (one quick named check beside it) through a proxy applying `mutation` (null: none);
 * `only` names more checks to run beside it.
 */
export async function exploreThrough(
  demo: DemoServer,
  mutation: Mutation | null,
  explore: { runs: number; seed: number },
  options: { only?: string[]; validator?: SpecValidator } = {},
): Promise<{ report: RunReport; env: Record<string, string> }> {
  const proxy = await startFaultProxy({ target: demo.url, mutation });
  try {
    const env = proxiedEnv(demo, proxy.url);
    const report = await runSuite({
      checks: catalogue,
      inputs: resolveInputs({}, env),
      only: options.only ?? ["AUTH-KEY-WORKS"],
      validator: options.validator,
      explore,
    });
    return { report, env };
  } finally {
    await proxy.close();
  }
}

/** Runs a replay script with sh against `env` (a proxy started for it); resolves with its output. */
export async function runScript(script: string, env: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "explorer-replay-"));
  try {
    const file = join(dir, "replay.sh");
    await writeFile(file, script);
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("AGENT_API_")));
    return await new Promise((resolve, reject) =>
      execFile(
        "sh",
        [file],
        { env: { ...base, ...env }, maxBuffer: 8 * 1024 * 1024 },
        (error, stdout, stderr) =>
          error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout),
      ),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Replays `script` against a fresh proxy applying `mutation` in front of `demo`. */
export async function replayThrough(
  demo: DemoServer,
  mutation: Mutation | null,
  script: string,
): Promise<string> {
  const proxy = await startFaultProxy({ target: demo.url, mutation });
  try {
    return await runScript(script, proxiedEnv(demo, proxy.url));
  } finally {
    await proxy.close();
  }
}
