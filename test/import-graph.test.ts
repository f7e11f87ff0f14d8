/**
 * The import graph of the whole repository against .dependency-cruiser.cjs: no import circle anywhere; no
 * import of the conformance suite's library from the reference server's sources nor of the server from the
 * suite's library (tests, and the agent-api command's wiring of the demo, may); the packages import each
 * other by package name, never by a relative path out of their folder.
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
  it("has no circle, keeps the suite and the server apart, and the packages import each other by name", async () => {
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
    // Every import of a workspace package reached its source: an edge left unresolved would escape the rules.
    const unresolved = output.modules.flatMap((m) =>
      m.dependencies
        .filter((d) => d.couldNotResolve && d.module.startsWith("@agent-api/"))
        .map((d) => `${m.source} → ${d.module}`),
    );
    expect(unresolved).toEqual([]);
    // The graph was read: a cruise that found nothing would pass for the wrong reason.
    expect(output.summary.totalCruised).toBeGreaterThan(250);
  });
});
