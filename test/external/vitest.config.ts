/**
 * `npm run test:external`: the kit judged at length by tools we did not write (test/external/README.md): the
 * whole suite three times through Stoplight Prism, the spec-driven fuzz run, Redocly's page in Chromium and
 * @hey-api/openapi-ts's client. Out of `npm test` for their minutes; the official SDK and the AI SDK clients stay
 * there. `.ci/run` runs these after.
 */
import { defineConfig } from "vitest/config";
import base from "../../vitest.config.ts";
import { EXTERNAL_TESTS } from "../heavy-tests.ts";

// Spread, not mergeConfig: mergeConfig concatenates arrays, and the base's include would add every unit test.
export default defineConfig({
  ...base,
  test: { ...base.test, include: [...EXTERNAL_TESTS], exclude: ["node_modules/**"], maxWorkers: 2 },
});
