/**
 * `npm run test:explore`: the explorer over many seeds against the correct demo (no departure found), and the
 * planted depth fault (turn_count stops at two) that no named check enumerates, found, shrunk and replayed;
 * values wrong under one combination only, and load taken as legal trouble (explorer-faults.test.ts).
 * A few minutes of sequences: out of `npm test`, in `.ci/run` after it.
 */
import { defineConfig } from "vitest/config";
import base from "../../vitest.config.ts";

// Spread, not mergeConfig: mergeConfig concatenates arrays, and the base's include would add every unit test.
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ["test/explore/**/*.test.ts"],
    exclude: ["node_modules/**"],
    testTimeout: 600_000,
    hookTimeout: 120_000,
  },
});
