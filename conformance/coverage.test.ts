/** COVERAGE.md stays true: the map names only catalogue ids, every check verifies a rule, the file is current. */
import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { catalogue } from "./catalogue.ts";
import {
  coverageProblems,
  explorerRules,
  fieldTableProblems,
  modelRuleProblems,
  renderCoverage,
  seedRules,
} from "./coverage.ts";

describe("coverage map of the API", () => {
  it("names only catalogue ids, and every check of the catalogue", () => {
    expect(coverageProblems(catalogue)).toEqual([]);
  });

  it("reports an unknown id, a check never named, and a row with neither checks nor a reason", () => {
    const rules = [
      { section: "S", rule: "a", checks: ["NO-SUCH-CHECK"] },
      { section: "S", rule: "b" },
    ];
    const problems = coverageProblems(catalogue.slice(0, 1), rules);
    expect(problems).toEqual([
      '"a" (S) names NO-SUCH-CHECK, which the catalogue lacks',
      '"b" (S) needs either checks or a reason for none, not both or neither',
      `${catalogue[0].id} verifies no API rule of the coverage map`,
    ]);
  });

  it("names only catalogue ids in the fields × routes table", () => {
    expect(fieldTableProblems(catalogue)).toEqual([]);
    expect(fieldTableProblems(catalogue.filter((c) => c.id !== "GET-TURN-COUNT"))).toEqual([
      "the fields × routes table names GET-TURN-COUNT, which the catalogue lacks",
    ]);
  });

  it("gives every rule of the executable model an owning check of the catalogue", () => {
    expect(modelRuleProblems(catalogue)).toEqual([]);
    expect(explorerRules.length).toBeGreaterThan(40);
    const broken = [{ ...explorerRules[0], check: "NO-SUCH-CHECK" }, explorerRules[0]];
    expect(modelRuleProblems(catalogue, broken)).toEqual([
      `model rule ${explorerRules[0].id} names NO-SUCH-CHECK, which the catalogue lacks`,
      `model rule ${explorerRules[0].id} is defined twice`,
    ]);
  });

  it("quotes each rule once per section", () => {
    const keys = seedRules.map((r) => `${r.section}|${r.rule}`);
    expect(keys.length).toBe(new Set(keys).size);
  });

  it("COVERAGE.md is current (npm run coverage rewrites it)", async () => {
    const file = await readFile(new URL("./COVERAGE.md", import.meta.url), "utf8");
    expect(file).toBe(renderCoverage(catalogue));
  });
});
