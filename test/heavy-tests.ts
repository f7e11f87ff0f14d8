/**
 * Test files that run as npm scripts of their own after `npm test` (.ci/run calls each), named once here so
 * that `npm test` leaves out exactly what those scripts run.
 */

/** `npm run test:attacks`: the sandbox's attack proofs. */
export const ATTACK_TESTS = [
  "reference-server/sandbox/hostile.test.ts",
  "reference-server/sandbox/repo-hostile.test.ts",
  "reference-server/sandbox/host-limits.test.ts",
  "reference-server/sandbox/server-death.test.ts",
] as const;

/** `npm run test:external`: the long runs of tools we did not write. */
export const EXTERNAL_TESTS = [
  "test/external/prism-proxy.test.ts",
  "test/external/fuzz.test.ts",
  "test/external/stream-schema.test.ts",
  // agent-api docs and lint run the real Redocly, and a browser reads the page it builds (about 15 s).
  "test/spec/cli-commands.test.ts",
] as const;
