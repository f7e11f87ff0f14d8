import { defineConfig } from "vitest/config";
import { SANDBOX_ENV, sandboxUnavailable } from "./scripts/sandbox-probe.ts";
import { SOURCE_CONDITION_FLAG, VITEST_CONDITIONS } from "./scripts/source-condition.ts";
import { ATTACK_TESTS, EXTERNAL_TESTS } from "./test/heavy-tests.ts";

// Asked once here rather than in every file: tests that run tools in bubblewrap carry the `sandbox` tag and
// are skipped where it does not work; scripts/closing-line-reporter.ts says why, in one line.
const unavailable = await sandboxUnavailable();
if (unavailable) process.env[SANDBOX_ENV] = unavailable;
else delete process.env[SANDBOX_ENV];

export default defineConfig({
  // The workspace packages resolve to their TypeScript sources (scripts/source-condition.ts says why).
  ssr: { resolve: { conditions: VITEST_CONDITIONS } },
  test: {
    include: ["**/*.test.ts"],
    // test/tools/ (the compatibility matrix, npm run test:tools), test/proxies (real nginx and HAProxy for a
    // minute, npm run test:proxies) and test/packages (packed, installed and run on two Node versions, npm run
    // test:packages) are their own runs.
    // test/explore (the explorer over many seeds, npm run test:explore) is its own run too, and so are the
    // sandbox's attack proofs and the long runs of outside tools (test/heavy-tests.ts names them).
    exclude: [
      "node_modules/**",
      ".tmp/**",
      "test/tools/**",
      "test/proxies/**",
      "test/packages/**",
      "test/explore/**",
      ...ATTACK_TESTS,
      ...EXTERNAL_TESTS,
    ],
    // Vitest's default on a 2-core machine is one file at a time (cores - 1), yet most files spend their time
    // waiting on servers, child processes and session delays rather than on a core. Measured on 2 cores: 3 at
    // once 158 s, 4 130 s, 5 121 s (the machine ~95% busy from 4 on); 4 leaves the timing tests some room.
    maxWorkers: 4,
    // Files share their worker's modules: each file no longer loads Fastify, Ajv, the SDKs and the spec anew
    // (a third of the CPU of the small files). Files put back what they change in process.env (setEnv), and
    // spies are restored after every test.
    isolate: false,
    // V8's parallel and concurrent GC threads in every worker fight over two cores with everything else:
    // measured back to back, 88 s and 153 CPU-s with them, 74 s and 105 CPU-s without. The source condition
    // for what Node itself loads there (worker threads and forked children inherit the flags).
    execArgv: ["--single-threaded-gc", SOURCE_CONDITION_FLAG],
    restoreMocks: true,
    // Tests of a describe.concurrent at once (vitest's default is 5): the mutation self-test's runs each wait
    // on the demo's 1 s session delay, not on a core (12.7 s at 5, 6.8 s at 12).
    maxConcurrency: 12,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ["default", "./scripts/closing-line-reporter.ts"],
    // Temporary files on a tmpfs where there is one (scripts/test-tmpdir.ts says why); then one PostgreSQL
    // cluster for the run's PostgreSQL store tests (scripts/postgres-cluster.ts), in that temporary directory.
    globalSetup: ["./scripts/test-tmpdir.ts", "./scripts/postgres-cluster.ts"],
    tags: [
      {
        name: "sandbox",
        description: "runs tools in a bubblewrap sandbox; skipped where bubblewrap does not work",
        skip: unavailable !== null,
      },
    ],
  },
});
