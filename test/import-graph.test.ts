/**
 * The import graph of the whole repository against .dependency-cruiser.cjs: no import circle anywhere; no
 * import of the conformance suite's library from the reference server's sources nor of the server from the
 * suite's library (tests, and the agent-api command's wiring of the demo, may); the packages import each
 * other by package name, never by a relative path out of their folder; inside the reference server, a layer
 * imports only the layers below it. Each rule is also run on a planted violation, so a rule that no longer
 * matches anything (a renamed folder, a wrong pattern) fails here instead of passing for good.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { cruise, type ICruiseOptions, type IForbiddenRuleType } from "dependency-cruiser";
import { afterAll, describe, expect, it } from "vitest";
import { projectRoot } from "../scripts/project-root.ts";

const rules = createRequire(import.meta.url)("../.dependency-cruiser.cjs") as {
  forbidden: IForbiddenRuleType[];
  options: ICruiseOptions;
};

const SOURCES = ["client", "conformance", "reference-server", "bench", "test", "scripts", "spec"];

describe("the import graph", () => {
  // The whole repository is cruised: about 20 s on an idle machine, far more on a loaded one.
  it("has no circle, keeps the suite and the server apart, and the packages import each other by name", {
    timeout: 180_000,
  }, async () => {
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

/** The server's layers in the rules' order, highest first (read back from the rules' names). */
const serverLayers = [
  "cli",
  ...rules.forbidden.flatMap((rule) => (rule.name?.startsWith("server-layer-") ? [rule.name.slice(13)] : [])),
];

/**
 * A planted file and what it imports; `breaks` is the rule it must trip (undefined: a lawful import; null:
 * not judged, the other end of a circle, which the cruise reports from one end only).
 */
interface Plant {
  file: string;
  imports: string;
  breaks?: string | null;
}

/** One planted violation per rule, plus lawful imports the rules must let through. */
function plants(): Plant[] {
  const layerPlants = serverLayers.slice(1).flatMap((layer, index): Plant[] => [
    // The layer just above: the tightest edge the order forbids.
    {
      file: `reference-server/${layer}/up.ts`,
      imports: `../${serverLayers[index]}/target.ts`,
      breaks: `server-layer-${layer}`,
    },
    // The layer just below, when there is one: allowed.
    ...(serverLayers[index + 2]
      ? [{ file: `reference-server/${layer}/down.ts`, imports: `../${serverLayers[index + 2]}/target.ts` }]
      : []),
  ]);
  return [
    ...layerPlants,
    { file: "reference-server/store/wiring.ts", imports: "../index.ts", breaks: "server-layer-store" },
    { file: "reference-server/demo/wiring.ts", imports: "../index.ts" },
    {
      file: "reference-server/store/sqlite/reach.ts",
      imports: "../postgres/target.ts",
      breaks: "store-engines-apart",
    },
    {
      file: "reference-server/store/postgres/reach.ts",
      imports: "../sqlite/target.ts",
      breaks: "store-engines-apart",
    },
    { file: "reference-server/store/postgres/own.ts", imports: "./target.ts" },
    { file: "reference-server/store/sqlite/shared.ts", imports: "../conversation-row.ts" },
    {
      file: "reference-server/unplaced/x.ts",
      imports: "../config/target.ts",
      breaks: "server-folder-placed",
    },
    { file: "client/circle-a.ts", imports: "./circle-b.ts", breaks: "no-circular" },
    { file: "client/circle-b.ts", imports: "./circle-a.ts", breaks: null },
    {
      file: "reference-server/config/suite.ts",
      imports: "../../conformance/target.ts",
      breaks: "no-suite-in-server",
    },
    {
      file: "conformance/server.ts",
      imports: "../reference-server/config/target.ts",
      breaks: "no-server-in-suite",
    },
    { file: "conformance/client-by-path.ts", imports: "../client/target.ts", breaks: "packages-by-name" },
    { file: "client/suite-by-path.ts", imports: "../conformance/target.ts", breaks: "client-by-name" },
    { file: "client/generated.ts", imports: "../generated/target.ts" },
  ];
}

describe("the import rules on planted violations", () => {
  const root = mkdtempSync(join(tmpdir(), "import-rules-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("each rule catches its planted violation, and lawful imports pass", async () => {
    const planted = plants();
    const write = (file: string, text: string) => {
      mkdirSync(dirname(join(root, file)), { recursive: true });
      writeFileSync(join(root, file), text);
    };
    for (const { file, imports } of planted) {
      write(file, `import { target } from "${imports}";\nexport const planted = target;\n`);
      const targetFile = join(dirname(file), imports);
      if (!planted.some((p) => p.file === targetFile)) write(targetFile, "export const target = 1;\n");
    }
    const { output } = await cruise(["client", "conformance", "reference-server", "generated"], {
      ...rules.options,
      baseDir: root,
      validate: true,
      ruleSet: { forbidden: rules.forbidden },
    });
    if (typeof output === "string") throw new Error("expected a cruise result");
    const tripped = (file: string) => [
      ...new Set(output.summary.violations.filter((v) => v.from === file).map((v) => v.rule.name)),
    ];
    const seen = planted.map(({ file, breaks }) => ({ file, breaks, tripped: tripped(file) }));
    for (const { file, breaks, tripped } of seen) {
      if (breaks) expect(tripped, file).toContain(breaks);
      else if (breaks === undefined) expect(tripped, file).toEqual([]);
    }
    // Every rule of the configuration has a planted violation.
    const plantedRules = new Set(planted.flatMap((p) => (p.breaks ? [p.breaks] : [])));
    expect(
      rules.forbidden.map((rule) => rule.name ?? "(unnamed)").filter((name) => !plantedRules.has(name)),
    ).toEqual([]);
  });
});

/** The first-column paths of every table row in CONTRIBUTING.md that names a part of reference-server/. */
function contributingRows(): string[] {
  const text = readFileSync(join(projectRoot, "CONTRIBUTING.md"), "utf8");
  return [...text.matchAll(/^\| `(reference-server\/[^`]*)`/gm)].map((match) => match[1]);
}

describe("CONTRIBUTING's table of the server's folders", () => {
  it("names every folder of reference-server/ and no folder that is gone, the layers in the rules' order", () => {
    const rows = contributingRows();
    const folders = readdirSync(join(projectRoot, "reference-server"), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && !["node_modules", "dist"].includes(entry.name))
      .map((entry) => `reference-server/${entry.name}/`);
    expect(folders.filter((folder) => !rows.includes(folder))).toEqual([]);
    const named = rows.filter((row) => row.endsWith("/") && row !== "reference-server/");
    expect(named.filter((row) => !folders.includes(row))).toEqual([]);
    // The layers, in the order the import rules enforce.
    const layerRows = named
      .map((row) => row.slice("reference-server/".length, -1))
      .filter((name) => serverLayers.includes(name));
    expect(layerRows).toEqual(serverLayers);
  });
});
