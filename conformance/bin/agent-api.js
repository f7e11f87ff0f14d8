#!/usr/bin/env node
// The package's `agent-api`. An installed package runs its compiled CLI. npm links this file into the
// repository's node_modules/.bin as well (the package is a workspace), where the TypeScript CLI runs and
// the packages import each other's sources: the resolve hook asks for them by their export condition, as
// `node --conditions=agent-api-source` would (scripts/source-condition.ts).
//
// First of all, an old Node is refused in one line: the CLI (and `serve`, through node:sqlite) needs 22.13,
// and on an older one its first import would die with a stack trace naming a built-in module. Only syntax
// and built-ins every Node since 14 has come before this check.
const NEEDED = [22, 13];
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < NEEDED[0] || (major === NEEDED[0] && minor < NEEDED[1])) {
  process.stderr.write(
    `agent-api needs Node.js ${NEEDED.join(".")} or later (this is ${process.version}): install Node.js 24 LTS (https://nodejs.org/en/download, or \`nvm install 24\`) and run it again\n`,
  );
  process.exit(2);
}

const { existsSync } = await import("node:fs");
const nodeModule = await import("node:module");

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
