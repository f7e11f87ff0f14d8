/**
 * No regular expression in the server's, the client's, the suite's or the CLI's sources can backtrack
 * super-linearly: every regex literal, and every `new RegExp` whose source is known from the file, goes
 * through recheck (a ReDoS checker doing automaton analysis, with fuzzing where the automaton is too large).
 * A pattern recheck calls vulnerable fails the test with its attack string; a `new RegExp` built from text
 * this file cannot see must be listed below with the reason it is linear.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { checkSync } from "recheck";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SOURCES = ["reference-server", "client", "conformance"];

/** `new RegExp(...)` calls whose source is not a literal, by file and source text, with why each is linear. */
const DYNAMIC_ALLOWED: Record<string, string> = {
  // The model name is escaped (escapeRegExp): a literal anchored at the start, then one character class.
  "conformance/checks/common.ts: new RegExp(`^${escapeRegExp(model)}[-@:.]`)": "escaped literal",
  // The same escaped literal between two fixed look-arounds: no quantifier is left to backtrack.
  "conformance/checks/common.ts: new RegExp(`(?<![A-Za-z0-9._-])${escapeRegExp(model)}(?![A-Za-z0-9_-]|\\\\.[A-Za-z0-9])`)":
    "escaped literal",
  // A copy of a rule's pattern, each a literal this test checks.
  "reference-server/scripted-model/phrases.ts: new RegExp(rule.pattern)": "a checked literal",
  // The stem is a regex literal of the checks (this test checks each), only given the `g` flag.
  "conformance/checks/replies.ts: new RegExp(stem.source, flags)": "a checked literal's source",
};

interface Found {
  where: string;
  source?: string;
  flags?: string;
  dynamic?: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".test.ts"))
    .map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)))
    .filter((f) => !f.split(path.sep).includes("node_modules"));
}

/** The string value of `node` when the file states it: a literal, or a template of consts declared as literals. */
function staticString(node: ts.Node, consts: Map<string, ts.Expression>): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isIdentifier(node)) {
    const value = consts.get(node.text);
    return value ? staticString(value, consts) : undefined;
  }
  if (ts.isTemplateExpression(node)) {
    let out = node.head.text;
    for (const span of node.templateSpans) {
      const part = staticString(span.expression, consts);
      if (part === undefined) return undefined;
      out += part + span.literal.text;
    }
    return out;
  }
  return undefined;
}

function regexesIn(file: string): Found[] {
  const source = ts.createSourceFile(
    file,
    readFileSync(path.join(ROOT, file), "utf8"),
    ts.ScriptTarget.Latest,
    true,
  );
  const consts = new Map<string, ts.Expression>();
  const found: Found[] = [];
  const collect = (node: ts.Node): void => {
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer)
      consts.set(node.name.text, node.initializer);
    ts.forEachChild(node, collect);
  };
  collect(source);
  const visit = (node: ts.Node): void => {
    const line = source.getLineAndCharacterOfPosition(node.getStart()).line + 1;
    if (ts.isRegularExpressionLiteral(node)) {
      const slash = node.text.lastIndexOf("/");
      found.push({
        where: `${file}:${line}`,
        source: node.text.slice(1, slash),
        flags: node.text.slice(slash + 1),
      });
    } else if (
      (ts.isNewExpression(node) || ts.isCallExpression(node)) &&
      node.expression.getText() === "RegExp"
    ) {
      const [patternArg, flagsArg] = node.arguments ?? [];
      const pattern = patternArg && staticString(patternArg, consts);
      const flags = flagsArg ? staticString(flagsArg, consts) : "";
      if (pattern !== undefined && flags !== undefined)
        found.push({ where: `${file}:${line}`, source: pattern, flags });
      else found.push({ where: `${file}:${line}`, dynamic: `${file}: ${node.getText()}` });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const all = SOURCES.flatMap(sourceFiles).flatMap(regexesIn);

describe("regular expressions in the sources", () => {
  it("finds the sources' patterns (the scan itself works)", () => {
    expect(all.length).toBeGreaterThan(50);
    expect(
      all.some((f) => f.where.startsWith(path.join("reference-server", "scripted-model", "phrases.ts"))),
    ).toBe(true);
  });

  it("builds no pattern from text it cannot see, except the listed linear ones", () => {
    const unknown = all.flatMap((f) => (f.dynamic && !(f.dynamic in DYNAMIC_ALLOWED) ? [f.dynamic] : []));
    expect(unknown).toEqual([]);
  });

  it("has no pattern that recheck finds super-linear", { timeout: 600_000 }, () => {
    const problems: string[] = [];
    for (const f of all) {
      if (f.source === undefined) continue;
      // A fixed seed: the fuzzing half of recheck gives the same verdict on every run.
      const result = checkSync(f.source, f.flags ?? "", { timeout: 60_000, randomSeed: 1 });
      if (result.status === "vulnerable")
        problems.push(
          `${f.where} /${f.source}/${f.flags}: ${result.complexity.type}, attack ${result.attack.pattern}`,
        );
      else if (result.status === "unknown") problems.push(`${f.where} /${f.source}/${f.flags}: not decided`);
    }
    expect(problems).toEqual([]);
  });
});
