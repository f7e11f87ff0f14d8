/**
 * `agent-api docs`: builds one self-contained HTML page of the API with Redocly (`redocly build-docs`), from
 * the bundled spec with every reference choice (`x-reference-behavior`) shown in its description and the
 * stream's events (JSON in each event's `data`, `contentSchema`) shown as schemas.
 */
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { Command } from "commander";
import {
  inCheckout,
  MissingToolError,
  packageRoot,
  runTool,
  specPackageFile,
  specPath,
  tools,
} from "./tool-bin.ts";

/** Where `agent-api docs` writes the page unless `--output` says otherwise (never into node_modules). */
export const defaultDocsPath = inCheckout
  ? join(packageRoot, "dist", "docs", "index.html")
  : resolve("agent-api-docs", "index.html");

/** What the page says before each reference choice (`x-reference-behavior`). */
export const REFERENCE_LABEL = "Reference server's choice:";

/**
 * Redocly renders descriptions, not `x-` extensions, so a reference choice would be invisible on the page:
 * each `x-reference-behavior` is appended to the description beside it (created when there is none).
 */
export function withReferenceBehaviorShown(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withReferenceBehaviorShown);
  if (node === null || typeof node !== "object") return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) out[key] = withReferenceBehaviorShown(value);
  const choice = out["x-reference-behavior"];
  if (typeof choice === "string" && choice.trim() !== "") {
    const before = typeof out.description === "string" ? `${out.description.trimEnd()}\n\n` : "";
    out.description = `${before}**${REFERENCE_LABEL}** ${choice.trim()}`;
  }
  return out;
}

/**
 * Redocly renders a string's `contentSchema` as a bare `string`, which would hide the SSE events (the data of
 * each event of the stream's `itemSchema` is JSON text described by `contentSchema`): a JSON-encoded string is
 * shown as the schema of its JSON instead, its description saying it travels as JSON text.
 */
export function withJsonContentShown(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withJsonContentShown);
  if (node === null || typeof node !== "object") return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) out[key] = withJsonContentShown(value);
  const content = out.contentSchema;
  const mediaType = out.contentMediaType;
  if (
    out.type === "string" &&
    content !== null &&
    typeof content === "object" &&
    typeof mediaType === "string" &&
    /^application\/(.+\+)?json$/.test(mediaType)
  ) {
    const note = `Sent as JSON text (\`${mediaType}\`) of the schema below.`;
    // allOf, not a $ref with a sibling description: Redocly drops a description beside a $ref.
    return {
      description: typeof out.description === "string" ? `${out.description.trimEnd()} ${note}` : note,
      allOf: [content],
    };
  }
  return out;
}

/**
 * `additionalProperties: true` says what JSON Schema assumes anyway, and Redocly draws it as an empty
 * "property name* any" row among the real fields (under `metadata`, for one): the page's form drops it.
 * A schema for the additional properties (a flow's named inputs) is kept.
 */
export function withoutDefaultAdditionalProperties(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutDefaultAdditionalProperties);
  if (node === null || typeof node !== "object") return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "additionalProperties" && value === true) continue;
    out[key] = withoutDefaultAdditionalProperties(value);
  }
  return out;
}

/** Where Redocly's bundle fetches its badge's logo from (the page would otherwise reach out to it). */
const REDOCLY_CDN_ASSET = /https:\/\/cdn\.redoc\.ly\/[^`"'\s)]+/g;

/**
 * Lines of an SSE example (one `data:` line holds a whole JSON event) ran off the right edge of the example
 * panel: the page's code blocks wrap, breaking a long token where they must.
 */
export const PAGE_STYLE =
  "<style>pre, pre code { white-space: pre-wrap !important; overflow-wrap: anywhere; }</style>";

/**
 * The page as Redocly writes it, made self-contained: its badge's logo is a CDN image, replaced by a data URI
 * that is no image (the badge's own error handler then drops the picture and keeps its words), and the style
 * that wraps code blocks goes into the head.
 */
export function selfContainedPage(html: string): string {
  const withoutCdn = html.replace(REDOCLY_CDN_ASSET, "data:,");
  return withoutCdn.includes("</head>")
    ? withoutCdn.replace("</head>", `${PAGE_STYLE}</head>`)
    : PAGE_STYLE + withoutCdn;
}

/** Builds the HTML page of `spec` into `output`; throws with Redocly's output when it fails. */
export async function buildDocs(output: string = defaultDocsPath, spec: string = specPath): Promise<string> {
  const target = resolve(output);
  await mkdir(dirname(target), { recursive: true });
  const work = await mkdtemp(join(tmpdir(), "agent-api-docs-"));
  try {
    // The page is built from the bundle with the reference choices written into the descriptions and the
    // JSON carried in strings shown as its schema.
    const shown = join(work, "openapi.json");
    // Resolved here: Redocly runs in the project root, where a relative path from the caller would miss.
    const source = resolve(spec);
    const bundled = await runTool(tools.redocly("agent-api docs"), [
      "bundle",
      source,
      "--output",
      shown,
      "--ext",
      "json",
    ]);
    if (bundled.code !== 0) throw new Error(`redocly bundle failed:\n${bundled.stderr}${bundled.stdout}`);
    const doc = JSON.parse(await readFile(shown, "utf8")) as unknown;
    await writeFile(
      shown,
      JSON.stringify(
        withoutDefaultAdditionalProperties(withJsonContentShown(withReferenceBehaviorShown(doc))),
      ),
    );
    await render(shown, target);
    await writeFile(target, selfContainedPage(await readFile(target, "utf8")));
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return target;
}

async function render(spec: string, target: string): Promise<void> {
  const result = await runTool(tools.redocly("agent-api docs"), [
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
  // Installed packages: the page of the kit's own spec is prebuilt in @agent-api/spec, no Redocly needed.
  const prebuilt =
    inCheckout || program.getOptionValueSource("spec") !== "default" ? null : specPackageFile("index.html");
  try {
    let path: string;
    if (prebuilt) {
      path = resolve(opts.output);
      await mkdir(dirname(path), { recursive: true });
      await copyFile(prebuilt, path);
    } else {
      path = await buildDocs(opts.output, opts.spec);
    }
    process.stdout.write(`API documentation written to ${path}\n`);
    return 0;
  } catch (error) {
    if (
      error instanceof MissingToolError &&
      !inCheckout &&
      program.getOptionValueSource("spec") === "default"
    ) {
      process.stderr.write(
        "agent-api docs: the built page comes with @agent-api/spec (npm install @agent-api/spec), or is built by @redocly/cli (npm install --save-dev @redocly/cli)\n",
      );
      return 2;
    }
    process.stderr.write(`${(error as Error).message}\n`);
    return error instanceof MissingToolError ? 2 : 1;
  }
}
