/**
 * `npm run test:real-model`: the whole suite against `agent-api serve --engine anthropic` whose upstream is
 * `agent-api model --style realistic`, for a few seeds. Slow enough (a deployment and a suite run per seed)
 * to stay out of `npm test`; `.ci/run` runs it after.
 */
import { defineConfig } from "vitest/config";
import base from "../../vitest.config.ts";

// Spread, not mergeConfig: mergeConfig concatenates arrays, and the base's include would add every unit test.
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ["test/real-model/**/*.e2e.ts"],
    testTimeout: 300_000,
    hookTimeout: 120_000,
  },
});
