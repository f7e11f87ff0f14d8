/**
 * `prepack` of the spec package (@agent-api/spec): the bundled document as JSON and YAML and the built docs
 * page, written into spec/dist/. The JSON is generated/openapi.json itself (what the validators read), so the
 * package can never ship a bundle that differs from the one the kit was tested with.
 */
import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { stringify } from "yaml";
import { buildDocs } from "../cli/commands/docs.ts";
import { projectRoot } from "./tool-bin.ts";

const out = join(projectRoot, "spec", "dist");
await mkdir(out, { recursive: true });
const bundle = join(projectRoot, "generated", "openapi.json");
await copyFile(bundle, join(out, "openapi.json"));
await writeFile(join(out, "openapi.yaml"), stringify(JSON.parse(await readFile(bundle, "utf8"))));
// npm pack --json reads stdout: what this script says goes to stderr.
await buildDocs(join(out, "index.html"));
process.stderr.write("wrote spec/dist/openapi.json, openapi.yaml, index.html\n");
