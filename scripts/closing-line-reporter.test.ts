/**
 * The closing line CI reads counts a test file that fails before its tests run (an import that does not
 * resolve): such a run printed "0 failed" while vitest failed it.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const VITEST = join(import.meta.dirname, "..", "node_modules", "vitest", "vitest.mjs");
const REPORTER = join(import.meta.dirname, "closing-line-reporter.ts");

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "closing-line-"));
  await writeFile(join(dir, "vitest.config.mjs"), "export default {};\n");
  await writeFile(join(dir, "passes.test.ts"), 'import { it } from "vitest";\nit("passes", () => {});\n');
  await writeFile(
    join(dir, "unresolved.test.ts"),
    'import { it } from "vitest";\nimport { gone } from "./not-there.ts";\nit("never runs", () => gone());\n',
  );
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the closing line", () => {
  it("names a test file that failed before its tests ran", async () => {
    const result = await run(
      process.execPath,
      [VITEST, "run", "--root", dir, "--reporter=default", `--reporter=${REPORTER}`],
      { cwd: dir },
    ).catch((error: { stdout: string; code: number }) => error);
    expect(result).toMatchObject({ code: 1 });
    expect(result.stdout).toContain(
      "tests: 1 passed, 0 failed, 0 skipped, 1 test files failed before their tests ran",
    );
  }, 60_000);
});
