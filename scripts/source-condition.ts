/**
 * The workspace packages import each other by package name (`@agent-api/client/protocol`, …). Their
 * `exports` name this condition first, for the TypeScript sources, then the compiled dist/ that an
 * installation gets. In the repository every run of the sources asks for it, so nothing needs building:
 * `node --conditions=agent-api-source` (the npm scripts, bin/agent-api, tests that start a child), Vitest's
 * resolver (vitest.config.ts) and tsc (`customConditions` in tsconfig.json). npm's workspace symlinks in
 * node_modules/@agent-api/ lead to the package folders; Node follows them to the real path, outside
 * node_modules, where it strips types as for any other source file.
 */
export const SOURCE_CONDITION = "agent-api-source";

/** Node's flag for it, for a child process that runs the repository's TypeScript. */
export const SOURCE_CONDITION_FLAG = `--conditions=${SOURCE_CONDITION}`;

/**
 * Vite's resolver conditions for the tests: the source condition, then Vite's defaults for a server
 * environment (setting the option replaces them; vitest does not re-export Vite's `defaultServerConditions`).
 */
export const VITEST_CONDITIONS = [SOURCE_CONDITION, "module", "node", "development|production"];
