/**
 * `npm run test:packages`: the packages packed, installed into an empty directory and run on Node 22 and 24.
 * Each file packs and installs tarballs (half a minute of one core on a quiet 2-core machine), so it stays out
 * of `npm test`; `.ci/run` runs it after.
 */
import { defineConfig } from "vitest/config";
import base from "../../vitest.config.ts";

// Spread, not mergeConfig: mergeConfig concatenates arrays, and the base's include would add every unit test.
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ["test/packages/**/*.test.ts"],
    exclude: ["node_modules/**", ".tmp/**"],
  },
});
