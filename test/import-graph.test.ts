/**
 * The import graph of the whole repository against .dependency-cruiser.cjs: no import circle anywhere, and
 * no import of the conformance suite's library from the reference server's sources (its tests and the
 * CLI's demo wiring, which live outside those sources, may).
 */
import { createRequire } from "node:module";
import { cruise, type ICruiseOptions, type IForbiddenRuleType } from "dependency-cruiser";
import { describe, expect, it } from "vitest";
import { projectRoot } from "../conformance/cli/tool-bin.ts";

const rules = createRequire(import.meta.url)("../.dependency-cruiser.cjs") as {
  forbidden: IForbiddenRuleType[];
  options: ICruiseOptions;
};

const SOURCES = ["client", "conformance", "reference-server", "bench", "test", "scripts", "spec"];

describe("the import graph", () => {
  it("has no circle and no import of the suite's library into the reference server", async () => {
    const { output } = await cruise(SOURCES, {
      ...rules.options,
      baseDir: projectRoot,
      validate: true,
      ruleSet: { forbidden: rules.forbidden },
    });
    if (typeof output === "string") throw new Error("expected a cruise result");
    const violations = output.summary.violations.map(
      (v) =>
        `${v.rule.name}: ${v.from} → ${v.to}${v.cycle ? ` (${v.cycle.map((c) => c.name).join(" → ")})` : ""}`,
    );
    expect(violations).toEqual([]);
    // The graph was read: a cruise that found nothing would pass for the wrong reason.
    expect(output.summary.totalCruised).toBeGreaterThan(250);
  });
});
