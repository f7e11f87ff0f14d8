/**
 * `npm run test:legal-variants`: the whole suite against correct deployments in trouble a deployment owner
 * meets in the field (every legal framing and coding, a flaky upstream, a busy workspace, a clock an hour
 * off). A suite run per case, so it stays out of `npm test`; `.ci/run` runs it after.
 */
import { defineConfig } from "vitest/config";
import base from "../../vitest.config.ts";

// Spread, not mergeConfig: mergeConfig concatenates arrays, and the base's include would add every unit test.
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ["test/legal-variants/**/*.e2e.ts"],
    testTimeout: 400_000,
    hookTimeout: 120_000,
  },
});
