#!/usr/bin/env node
// The package's `agent-api`. npm links it into the repository's node_modules/.bin as well (the package is a
// workspace), where the TypeScript CLI with every command runs; an installed package runs its compiled
// CLI, which carries every command but `serve` and `model` (those come with @agent-api/reference-server).
import { existsSync } from "node:fs";

const source = new URL("../cli/agent-api.ts", import.meta.url);
const compiled = new URL("../dist/conformance/cli/agent-api.js", import.meta.url);
await import(existsSync(source) ? source.href : compiled.href);
