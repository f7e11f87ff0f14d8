#!/usr/bin/env node
// The bin is plain JS so it starts on any Node; the TypeScript it loads needs Node >= 24 (type stripping).
const [major] = process.versions.node.split(".").map(Number);
if (major < 24) {
  process.stderr.write(
    `agent-api needs Node.js >= 24 (this is ${process.version}); run it through npm (npm run agent-api -- ...) so the pinned node@24 is used.\n`,
  );
  process.exit(2);
}
await import("../cli/agent-api.ts");
