/** `agent-api docs`: builds one self-contained HTML page of the API with Redocly (`redocly build-docs`). */
import { mkdir } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { Command } from "commander";
import { projectRoot, runTool, specPath, tools } from "../../scripts/tool-bin.ts";

/** Where `agent-api docs` writes the page unless `--output` says otherwise. */
export const defaultDocsPath = join(projectRoot, "dist", "docs", "index.html");

/** Builds the HTML page of `spec` into `output`; throws with Redocly's output when it fails. */
export async function buildDocs(output: string = defaultDocsPath, spec: string = specPath): Promise<string> {
  const target = resolve(output);
  await mkdir(dirname(target), { recursive: true });
  const result = await runTool(tools.redocly(), [
    "build-docs",
    spec,
    "--output",
    target,
    "--title",
    "Agent Conversation API",
    // Embeds the Redoc script so the page works offline instead of loading it from Redocly's CDN.
    "--inlineBundle",
  ]);
  if (result.code !== 0) throw new Error(`redocly build-docs failed:\n${result.stderr}${result.stdout}`);
  return target;
}

/** CLI entry: builds the page and prints its path; resolves to 0, or 1 when the build fails. */
export async function main(args: string[]): Promise<number> {
  const program = new Command("agent-api docs")
    .description("build one self-contained HTML page of the API (Redocly)")
    .option("-o, --output <file>", "HTML file to write", defaultDocsPath)
    .option("--spec <path>", "OpenAPI document to render", specPath)
    .exitOverride();
  try {
    program.parse(args, { from: "user" });
  } catch (error) {
    return (error as { exitCode?: number }).exitCode ?? 2;
  }
  const opts = program.opts<{ output: string; spec: string }>();
  try {
    const path = await buildDocs(opts.output, opts.spec);
    process.stdout.write(`API documentation written to ${path}\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return 1;
  }
}
