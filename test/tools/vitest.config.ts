/**
 * `npm run test:tools`: the compatibility matrix (spec/README.md, "Published forms"). Not part of `npm test`: it installs
 * third-party generators, renderers and linters (test/tools/tools-dir.ts) and runs each of them.
 */
import { defineConfig } from "vitest/config";
import { VITEST_CONDITIONS } from "../../scripts/source-condition.ts";

export default defineConfig({
  // The workspace packages resolve to their TypeScript sources (scripts/source-condition.ts says why).
  ssr: { resolve: { conditions: VITEST_CONDITIONS } },
  test: {
    include: ["test/tools/**/*.test.ts"],
    // Each file runs tools that use both cores (tsc, a browser).
    maxWorkers: 2,
    testTimeout: 180_000,
    hookTimeout: 900_000,
    reporters: ["default", "./scripts/closing-line-reporter.ts"],
    globalSetup: ["./scripts/test-tmpdir.ts", "./test/tools/tools-dir.ts", "./test/tools/python-sdk-env.ts"],
  },
});
