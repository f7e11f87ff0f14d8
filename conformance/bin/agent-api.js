#!/usr/bin/env node
// The package's `agent-api`. An installed package runs its compiled CLI. npm links this file into the
// repository's node_modules/.bin as well (the package is a workspace), where the TypeScript CLI runs and
// the packages import each other's sources: the resolve hook asks for them by their export condition, as
// `node --conditions=agent-api-source` would (scripts/source-condition.ts).
import { existsSync } from "node:fs";
import * as nodeModule from "node:module";

const source = new URL("../cli/agent-api.ts", import.meta.url);
if (existsSync(source)) {
  nodeModule.registerHooks({
    resolve: (specifier, context, nextResolve) =>
      nextResolve(specifier, { ...context, conditions: [...context.conditions, "agent-api-source"] }),
  });
  await import(source.href);
} else {
  await import(new URL("../dist/conformance/cli/agent-api.js", import.meta.url).href);
}
