/**
 * The import graph's rules (test/import-graph.test.ts checks them; `npx depcruise --config
 * .dependency-cruiser.cjs client conformance reference-server cli bench test scripts spec` shows them).
 * Type-only imports count too: a circle of types is still two modules that cannot be read apart.
 */
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
      from: {
        path: "^reference-server/",
        pathNot: ["\\.test\\.ts$", "^reference-server/test/", "(^|/)testing\\.ts$", "\\.testing\\.ts$"],
      },
      to: { path: "^conformance/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)(node_modules|dist|\\.tmp)/" },
    tsPreCompilationDeps: true,
  },
};
