/**
 * The import graph's rules (test/import-graph.test.ts checks them; `npx depcruise --config
 * .dependency-cruiser.cjs client conformance reference-server bench test scripts spec` shows them).
 * Type-only imports count too: a circle of types is still two modules that cannot be read apart.
 */

/** A package's tests and test helpers, which may reach further than what the package ships. */
const TESTS = ["\\.test\\.ts$", "/test/", "(^|/)testing\\.ts$", "\\.testing\\.ts$", "(^|/)testing/"];

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "no import circle: each module can be read, tested and moved without the ones that import it",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "no-suite-in-server",
      comment:
        "the reference server does not use the conformance suite's library: the suite judges any deployment, the server is one of them (its tests may run the suite)",
      severity: "error",
      from: { path: "^reference-server/", pathNot: TESTS },
      to: { path: "^conformance/" },
    },
    {
      name: "no-server-in-suite",
      comment:
        "the conformance suite's library does not use the reference server: it judges any deployment. Only the agent-api command (conformance/cli/) wires the server's demo in for `check` without a URL, and the server's own commands",
      severity: "error",
      from: { path: "^conformance/", pathNot: [...TESTS, "^conformance/cli/"] },
      to: { path: "^reference-server/" },
    },
    {
      name: "packages-by-name",
      comment:
        "a package imports another by its package name (@agent-api/client/protocol), never by a relative path out of its folder: what it ships then resolves where it is installed, with nothing rewritten after the build",
      severity: "error",
      from: { path: "^(conformance|reference-server)/", pathNot: TESTS },
      to: { dependencyTypes: ["local"], pathNot: "^$1/" },
    },
    {
      name: "client-by-name",
      comment:
        "the same for the client, whose own build includes generated/ (its protocol and api-types exports)",
      severity: "error",
      from: { path: "^client/", pathNot: TESTS },
      to: { dependencyTypes: ["local"], pathNot: ["^client/", "^generated/[^/]+\\.ts$"] },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)(node_modules|dist|\\.tmp)/" },
    tsPreCompilationDeps: true,
    // The workspace packages resolve to their sources, as tsc and Node do in the repository
    // (scripts/source-condition.ts): a package-name import is then an edge to the file it reaches.
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["agent-api-source", "import", "types", "node", "default"],
    },
  },
};
