import { defineConfig } from "vitest/config";
import { VITEST_CONDITIONS } from "../../scripts/source-condition.ts";

// `npm run test:noisy-neighbour`: one workspace pushes a pool to its share while another workspace's
// requests and turns are timed, against `agent-api serve` in a child process (minutes; kept out of npm test).
export default defineConfig({
  ssr: { resolve: { conditions: VITEST_CONDITIONS } },
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/noisy-neighbour/*.noisy.ts"],
    // The PostgreSQL pool's noise runs on a cluster of the run's own (skipped where PostgreSQL is missing).
    globalSetup: ["./scripts/test-tmpdir.ts", "./scripts/postgres-cluster.ts"],
    maxWorkers: 1,
    testTimeout: 300_000,
    hookTimeout: 120_000,
    execArgv: ["--single-threaded-gc"],
    reporters: ["default", "./scripts/closing-line-reporter.ts"],
  },
});
