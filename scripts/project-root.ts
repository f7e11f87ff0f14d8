/**
 * The repository's root folder (the one holding the workspace's package.json), for the repository's own
 * scripts, tests and benchmarks. The shipped `agent-api` command has its own notion of where it runs from
 * (conformance/cli/tool-bin.ts: a checkout or an installed package); nothing shipped imports this file.
 */
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..");
