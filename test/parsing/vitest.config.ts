import { defineConfig } from "vitest/config";
import { VITEST_CONDITIONS } from "../../scripts/source-condition.ts";

// `npm run test:linear`: the worst-case parsing proofs, CPU-heavy (every parser at 32 MiB), kept out of
// `npm test`. Two files at a time, each case in its own child process.
export default defineConfig({
  // The workspace packages resolve to their TypeScript sources (scripts/source-condition.ts says why).
  ssr: { resolve: { conditions: VITEST_CONDITIONS } },
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/parsing/*.linear.ts"],
    maxWorkers: 2,
    maxConcurrency: 2,
    testTimeout: 600_000,
    execArgv: ["--single-threaded-gc"],
    reporters: ["default", "./scripts/closing-line-reporter.ts"],
  },
});
