/**
 * The import graph's rules (test/import-graph.test.ts checks them; `npx depcruise --config
 * .dependency-cruiser.cjs client conformance reference-server bench test scripts spec` shows them).
 * Type-only imports count too: a circle of types is still two modules that cannot be read apart.
 */

/** A package's tests and test helpers, which may reach further than what the package ships. */
const TESTS = ["\\.test\\.ts$", "/test/", "(^|/)testing\\.ts$", "\\.testing\\.ts$", "(^|/)testing/"];

/**
 * The reference server's layers, highest first: a layer may import the layers below it, never one above
 * (CONTRIBUTING.md, "The reference server's layers"). A request's data goes down (http → service → turn →
 * engine → sandbox → store) and comes back as return values and events. The root's index.ts and the demo
 * wire the layers together, and the commands start them; config and the error catalogue are the bottom
 * every layer reads.
 */
const SERVER_LAYERS = [
  "cli",
  "demo",
  "http",
  "service",
  "turn",
  "engine",
  "scripted-model",
  "sandbox",
  "coordination",
  "store",
  "config",
  "errors",
];

/** One rule a layer: nothing in it imports a layer above it, nor the root's wiring (index.ts). */
const layerRules = SERVER_LAYERS.slice(1).map((layer, index) => {
  const above = SERVER_LAYERS.slice(0, index + 1);
  return {
    name: `server-layer-${layer}`,
    comment: `reference-server/${layer}/ imports only the layers below it (${SERVER_LAYERS.slice(index + 2).join(", ") || "none"}), never ${above.join(", ")}${layer === "demo" ? "" : " nor the root's wiring"}`,
    severity: "error",
    from: { path: `^reference-server/${layer}/`, pathNot: TESTS },
    // The demo starts the whole server (the root's startServer); below it, no layer reaches the wiring.
    to: {
      path: [
        `^reference-server/(${above.join("|")})/`,
        ...(layer === "demo" ? [] : ["^reference-server/[^/]+\\.ts$"]),
      ],
    },
  };
});

/** Every folder of the server's sources is a layer of SERVER_LAYERS (a new folder takes its place in the order). */
const unplacedFolder = {
  name: "server-folder-placed",
  comment: `a folder of reference-server/ that is not one of the layers (${SERVER_LAYERS.join(", ")}) or its tests: give it a place in SERVER_LAYERS`,
  severity: "error",
  from: {
    path: "^reference-server/[^/]+/",
    pathNot: [...TESTS, `^reference-server/(${SERVER_LAYERS.join("|")})/`],
  },
  to: {},
};

/**
 * The store's two engines stand apart: what they share (the contract, the row mappings, the list query) sits
 * in store/ itself, so a change to one engine never reaches into the other.
 */
const storeEnginesApart = {
  name: "store-engines-apart",
  comment:
    "reference-server/store/sqlite/ and store/postgres/ never import each other: what both use lives in store/ (types.ts, conversation-row.ts, transcript-rows.ts, list-query.ts)",
  severity: "error",
  from: { path: "^reference-server/store/(sqlite|postgres)/", pathNot: TESTS },
  to: { path: "^reference-server/store/(sqlite|postgres)/", pathNot: "^reference-server/store/$1/" },
};

module.exports = {
  forbidden: [
    ...layerRules,
    unplacedFolder,
    storeEnginesApart,
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
