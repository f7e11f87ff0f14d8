/**
 * Build step of the conformance and reference-server packages, after `tsc`: their sources import the
 * protocol (generated/) and the SSE reader (client/sse.ts) by relative path, which tsc compiles into each
 * package's dist/ as a private copy. Here those imports are pointed at @agent-api/client, which exports the
 * same modules, and the copies are deleted: an installation holds one protocol definition, not three.
 * An import of a client or generated module the client package does not export fails the build.
 *
 * Usage (from a package folder): node ../scripts/link-client.ts dist
 */
import { readdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";

/** dist-relative module (without extension) → the @agent-api/client export that carries it. */
const EXPORTS: Record<string, string> = {
  "client/index": "@agent-api/client",
  "client/sse": "@agent-api/client/sse",
  "generated/protocol": "@agent-api/client/protocol",
  "generated/api-types": "@agent-api/client/api-types",
};

const dist = resolve(process.argv[2] ?? "dist");
const copies = ["client", "generated"].map((folder) => join(dist, folder));
const inCopies = (file: string) => copies.some((dir) => file.startsWith(`${dir}/`));

async function* files(dir: string): AsyncGenerator<string> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(full);
    else if (/\.(js|d\.ts)$/.test(entry.name)) yield full;
  }
}

// `from "…"`, `import("…")` and a bare `import "…"`: the three shapes tsc emits for a relative import.
const SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)"(\.{1,2}\/[^"]+)"/g;

let rewritten = 0;
for await (const file of files(dist)) {
  if (inCopies(file)) continue;
  const text = await readFile(file, "utf8");
  const next = text.replace(SPECIFIER, (whole, lead: string, specifier: string) => {
    const target = resolve(dirname(file), specifier);
    if (!inCopies(target)) return whole;
    const module = relative(dist, target).replace(/\.(js|ts|d\.ts)$/, "");
    const exported = EXPORTS[module];
    if (!exported) {
      throw new Error(
        `${relative(dist, file)} imports ${specifier}, which @agent-api/client does not export`,
      );
    }
    rewritten++;
    return `${lead}"${exported}"`;
  });
  if (next !== text) await writeFile(file, next);
}
// The build copies generated/openapi.json (the spec document the validators read) in after this step.
for (const dir of copies) await rm(dir, { recursive: true, force: true });
process.stderr.write(`link-client: ${rewritten} imports now name @agent-api/client\n`);
