/**
 * Mutations drawn at random from rule breakers × conditions (random-mutations.ts): the sampler is the same for
 * the same seed, every pair is a mutation judged as a deployment is, and a small fixed-seed sample runs through
 * the fault proxy against a real demo server, where each drawn fault must fire and be caught by a MUST check of
 * its area. `npm run mutation-score` runs a large sample with a fresh seed and the whole suite per pair.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SpecValidator } from "../../conformance/spec-validator.ts";
import { type DemoServer, startDemoServer } from "../../reference-server/demo/index.ts";
import { runMutation } from "./harness.ts";
import { checksFor } from "./mutations.ts";
import { breakers, conditions, drawPairs, seededRandom } from "./random-mutations.ts";
import { scoreTables } from "./random-report.ts";

/** The fixed sample `npm test` runs (area checks per pair, so it stays near 10 s of the run's time). */
const TEST_SEED = 4;
const TEST_SAMPLE = 2;

describe("the random sampler", () => {
  it("draws the same pairs for the same seed, distinct pairs within a sample, others for another seed", () => {
    const names = (seed: number) => drawPairs(seed, 25).map((d) => d.mutation.name);
    expect(names(7)).toEqual(names(7));
    expect(new Set(names(7)).size).toBe(25);
    expect(names(8)).not.toEqual(names(7));
    const all = drawPairs(1, 10_000);
    expect(all.length).toBe(breakers.length * conditions.length);
  });

  it("spreads draws over every rule and condition", () => {
    const random = seededRandom(3);
    const draws = Array.from({ length: 10_000 }, random);
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...draws)).toBeLessThan(1);
    const sample = drawPairs(11, 150);
    expect(new Set(sample.map((d) => d.breaker.name)).size).toBe(breakers.length);
    expect(new Set(sample.map((d) => d.condition.name)).size).toBe(conditions.length);
  });

  it("names every rule and condition once, and judges each pair as a deployment (no check named)", () => {
    expect(new Set(breakers.map((b) => b.name)).size).toBe(breakers.length);
    expect(new Set(conditions.map((c) => c.name)).size).toBe(conditions.length);
    for (const d of drawPairs(5, 40)) expect(d.mutation.breaks).toEqual([]);
  });

  it("reports scores by rule, condition and dimension, leaving out pairs that never fired", () => {
    const text = scoreTables([
      { rule: "a", condition: "x", dimension: "route", fired: 2, caught: true, caughtBy: ["ID"] },
      { rule: "a", condition: "y", dimension: "route", fired: 1, caught: false, caughtBy: [] },
      { rule: "b", condition: "x", dimension: "route", fired: 0, caught: false, caughtBy: [] },
    ]);
    expect(text).toContain("**Score: 1 of 2 applied pairs caught (50%)**; 1 not applied");
    expect(text).toContain("| a | 1 | 2 | 0 |");
    expect(text).toContain("| b | 0 | 0 | 1 |");
    expect(text).toContain("| route | 1 | 2 | 1 |");
  });
});

describe("a fixed-seed sample through the fault proxy", () => {
  let demo: DemoServer;
  let validator: SpecValidator;
  beforeAll(async () => {
    demo = await startDemoServer(1000, { unsafeNoIsolation: true });
    validator = await SpecValidator.load();
  }, 60_000);
  afterAll(async () => {
    await demo?.close();
  });

  const draws = drawPairs(TEST_SEED, TEST_SAMPLE);
  const fired: string[] = [];
  describe.concurrent("each drawn pair that fires is caught by a MUST check of its area", () => {
    for (const draw of draws) {
      it(draw.mutation.name, async () => {
        const outcome = await runMutation(demo, draw.mutation, { validator, only: checksFor(draw.mutation) });
        // A pair nothing in the run met (say, a rule on two-block streams under a turn that makes one) says
        // nothing about the suite: the score reports it as not applied.
        if (draw.fired() === 0) return;
        fired.push(draw.mutation.name);
        expect(
          outcome.caught,
          `${draw.mutation.description}\n  failed: ${outcome.failed.join(", ") || "none"}`,
        ).toBe(true);
      }, 90_000);
    }
  });
  it("applies at least one drawn fault (the conditions meet the suite's traffic)", () => {
    expect(fired.length).toBeGreaterThan(0);
  });
});
