/**
 * `npm run test:attacks`: the sandbox's attack proofs, each of real bubblewrap, git and processes pushed to
 * their limits (reference-server/sandbox/README.md lists the attack each one answers): hostile commands and
 * links swapped mid-operation, a hostile repository, the host's process and memory limits, the server killed
 * or frozen mid-command. Out of `npm test` for their minutes of sandboxes and sleeps; `.ci/run` runs them after.
 */
import { defineConfig } from "vitest/config";
import base from "../../vitest.config.ts";
import { ATTACK_TESTS } from "../heavy-tests.ts";

// Spread, not mergeConfig: mergeConfig concatenates arrays, and the base's include would add every unit test.
export default defineConfig({
  ...base,
  test: { ...base.test, include: [...ATTACK_TESTS], exclude: ["node_modules/**"], maxWorkers: 2 },
});
