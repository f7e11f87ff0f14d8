/**
 * The guides "Generating a client" (docs/generators.md) and "Publishing the docs" (docs/renderers.md) as the
 * matrix runs them: their fenced blocks are read from the guide, so a command edited there is the command the
 * matrix proves. A user's
 * project is a work directory whose node_modules holds `@agent-api/spec` (its `dist/` files are generated/'s, as
 * the package ships them) beside the matrix's tools, so each command runs exactly as written.
 */
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { projectRoot } from "../../scripts/project-root.ts";
import { type Ran, run, workDir } from "./matrix.ts";

export type PublishedForm = "openapi.json" | "openapi-3.1.json" | "openapi-docs.json";

export interface Block {
  lang: string;
  code: string;
}

/** The fenced code blocks of a guide in docs/ (`generators.md`, ...), in order. */
export function guideBlocks(
  guide: string,
  text = readFileSync(join(projectRoot, "docs", guide), "utf8"),
): Block[] {
  const blocks: Block[] = [];
  let open: { lang: string; lines: string[] } | null = null;
  for (const line of text.split("\n")) {
    if (line.startsWith("```")) {
      if (open) {
        blocks.push({ lang: open.lang, code: `${open.lines.join("\n")}\n` });
        open = null;
      } else open = { lang: line.slice(3).trim(), lines: [] };
    } else open?.lines.push(line);
  }
  return blocks;
}

/** The file a block is to be saved as, when its first line is a comment naming one (`// orval.config.ts`). */
export function blockFileName(block: Block): string | null {
  const first = block.code.split("\n", 1)[0] ?? "";
  return first.match(/^(?:\/\/|#)\s*([\w.-]+\.(?:ts|js|mjs|json|ya?ml))\s*$/)?.[1] ?? null;
}

/** A shell command of a section and the files (blocks naming their file) the reader saves before running it. */
export interface Step {
  command: string;
  files: Block[];
}

/** The guide's shell blocks, each with the file blocks written just before it. */
export function guideSteps(guide: string): Step[] {
  const steps: Step[] = [];
  let files: Block[] = [];
  for (const block of guideBlocks(guide)) {
    if (block.lang === "sh") {
      steps.push({ command: block.code, files });
      files = [];
    } else if (blockFileName(block)) files.push(block);
  }
  return steps;
}

/**
 * Tools the README runs with `npx` that the matrix takes from the project's own devDependencies (the others
 * are in the tools directory, which npx finds by walking up from the work directory).
 */
const PROJECT_TOOLS = { "openapi-typescript": "openapi-typescript", "@hey-api/openapi-ts": "openapi-ts" };

/**
 * A user's project: `node_modules/@agent-api/spec/dist/<name>` is the generated file `files[name]` (the form
 * the name says, or another form under that name to see what a tool does with it).
 */
export function userProject(name: string, files: Partial<Record<PublishedForm, PublishedForm>>): string {
  const dir = workDir(name);
  const dist = join(dir, "node_modules", "@agent-api", "spec", "dist");
  mkdirSync(dist, { recursive: true });
  for (const [file, form] of Object.entries(files))
    symlinkSync(join(projectRoot, "generated", form), join(dist, file));
  writeFileSync(join(dist, "..", "package.json"), '{ "name": "@agent-api/spec", "version": "0.1.0" }\n');
  // npx looks a scoped package up in the project's own tree, so the project holds these as installed.
  mkdirSync(join(dir, "node_modules", ".bin"), { recursive: true });
  for (const [pkg, bin] of Object.entries(PROJECT_TOOLS)) {
    const link = join(dir, "node_modules", pkg);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(projectRoot, "node_modules", pkg), link);
    symlinkSync(join(projectRoot, "node_modules", ".bin", bin), join(dir, "node_modules", ".bin", bin));
  }
  return dir;
}

/** Saves the step's files and runs its command with `sh -e` in `dir`; npx may not fetch anything. */
export async function runStep(step: Step, dir: string): Promise<Ran> {
  for (const file of step.files) writeFileSync(join(dir, blockFileName(file) as string), file.code);
  return run("sh", ["-e", "-c", step.command], {
    cwd: dir,
    // A command whose tool is not installed fails here instead of downloading whatever the registry has.
    env: { npm_config_offline: "true", npm_config_update_notifier: "false", npm_config_yes: "false" },
  });
}
