/**
 * The explorer finds a fault no named check enumerates (a Viewer key refused on the agent's route but let
 * through on the model-routed send with the routing prefix), shrinks it to one step, and prints a script whose
 * curl lines replay it; against the unbroken demo the same seeds find nothing. Fixed seeds: the same sample
 * on every run. The explorer's other proofs (values wrong under one combination, load taken as legal trouble,
 * seed 29 unbroken) are test/explore/explorer-faults.test.ts, in npm run test:explore.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SpecValidator } from "../../conformance/spec-validator.ts";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";
import { combinationMutation } from "./combination-mutations.ts";
import { exploreThrough, replayThrough } from "./explorer-harness.ts";

let demo: DemoServer;
let validator: SpecValidator;

beforeAll(async () => {
  demo = await startDemoServer(1_000);
  validator = await SpecValidator.load();
});

afterAll(async () => {
  await demo?.close();
});

describe.concurrent("the explorer against the fault proxy", () => {
  it("finds a Viewer key let through only on the prefixed routed send, shrinks it, and its script replays it", async () => {
    const mutation = combinationMutation("viewer-routed-send-runs");
    const { report } = await exploreThrough(demo, mutation, { runs: 40, seed: 1 }, { validator });
    const explorer = report.explorer;
    expect(explorer?.findings).toHaveLength(1);
    const finding = explorer?.findings[0];
    expect(finding).toMatchObject({
      check: "AUTH-403-VIEWER-SEND",
      rule: "ids.viewerSend403",
      reproduced: true,
    });
    expect(finding?.steps).toHaveLength(1);
    expect(finding?.steps[0]).toMatch(/^viewer sends .* via the routed send \(prefix\)/);
    // The failure is the owning check's, with the sequence attached.
    const owner = report.results.find((r) => r.id === "AUTH-403-VIEWER-SEND");
    expect(owner?.outcome).toBe("fail");
    expect(owner?.sequences?.[0].script).toBe(finding?.script);
    // The printed curl lines, run for real: the deployment answers 200 where the API says 403.
    const broken = await replayThrough(demo, mutation, finding?.script ?? "");
    expect(broken).toMatch(/HTTP 200\s*$/);
    const correct = await replayThrough(demo, null, finding?.script ?? "");
    expect(correct).toMatch(/HTTP 403\s*$/);
  }, 120_000);

  // The seed the fault above is found with (npm run test:explore runs seed 29 and draws many more).
  it.each([1])(
    "finds nothing on the unbroken demo for seed %i",
    async (seed) => {
      const { report } = await exploreThrough(demo, null, { runs: 40, seed }, { validator });
      expect(report.explorer?.findings.map((f) => `${f.check}: ${f.actual}\n${f.steps.join("\n")}`)).toEqual(
        [],
      );
      expect(report.explorer?.turns).toBeGreaterThan(10);
    },
    120_000,
  );
});
