/**
 * `prepack` of the spec package (@agent-api/spec): the published forms of the bundled document as JSON and
 * YAML (the 3.2 document, its 3.1.1 form and the docs form; spec/README.md says which tool takes which) and
 * the built docs page, written into spec/dist/. The JSON files are generated/'s own, so the package can never
 * ship a document that differs from the one the kit was tested with.
 */
import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { stringify } from "yaml";
import { buildDocs } from "../conformance/cli/docs.ts";
import { projectRoot } from "./project-root.ts";

const out = join(projectRoot, "spec", "dist");
await mkdir(out, { recursive: true });
for (const name of ["openapi", "openapi-3.1", "openapi-docs"]) {
  const json = join(projectRoot, "generated", `${name}.json`);
  await copyFile(json, join(out, `${name}.json`));
  await writeFile(join(out, `${name}.yaml`), stringify(JSON.parse(await readFile(json, "utf8"))));
}
// npm pack --json reads stdout: what this script says goes to stderr.
await buildDocs(join(out, "index.html"));
process.stderr.write("wrote spec/dist/: openapi, openapi-3.1 and openapi-docs (.json, .yaml), index.html\n");
