/**
 * The suite against the reference server's demo on `--engine anthropic`, whose upstream is the scripted
 * model served over HTTP on loopback (what `agent-api model` runs): the one agent loop, real SDK, real
 * sockets, keep-alive comment lines in the streams. Every MUST check that runs must pass, as on the default
 * engine (reference.test.ts).
 */
import { existsSync } from "node:fs";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { DemoServer } from "../reference-server/demo/index.ts";
import { catalogue } from "./catalogue.ts";
import { resolveInputs } from "./inputs.ts";
import { mustVerdict } from "./reference-verdict.ts";
import { runSuite } from "./runner.ts";
import type { RunReport } from "./types.ts";

const serverPresent = existsSync(new URL("../reference-server/index.ts", import.meta.url));

let demo: DemoServer | undefined;
let model: { url: string; close(): Promise<void> } | undefined;
let report: RunReport;
let restoreEnv = () => {};

beforeAll(async () => {
  if (!serverPresent) return;
  const { serveScriptedModel } = await import("../reference-server/scripted-model/scripted-transport.ts");
  // 100 ms per model call and a keep-alive every 40 ms: the suite also reads streams with comment lines.
  model = await serveScriptedModel({ deltasPerBlock: 3, latencyMs: 100 });
  // The engine reads them when the server starts; they are put back afterwards (test files share a worker).
  const { setEnv } = await import("../reference-server/test/helpers.ts");
  restoreEnv = setEnv({ ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: "scripted-upstream-key" });
  const { startDemoServer } = await import("../reference-server/demo/index.ts");
  // The suite asks for tools: they run unisolated where bubblewrap does not work (the sandbox has its own tests).
  demo = await startDemoServer(1000, { engine: "anthropic", keepAliveMs: 40, unsafeNoIsolation: true });
  report = await runSuite({
    checks: catalogue,
    inputs: resolveInputs({}, { ...demo.envVars, AGENT_API_SESSION_WAIT_MS: "5000" }),
  });
}, 180_000);

afterAll(async () => {
  restoreEnv();
  await demo?.close();
  await model?.close();
});

it.skipIf(!serverPresent)(
  "passes every MUST check against the demo on --engine anthropic with the scripted model as upstream",
  () => {
    expect(mustVerdict(report)).toEqual({ failures: [], unexpectedSkips: [], warnings: [] });
  },
  180_000,
);
