/**
 * Locates and runs the command-line tools the contract kit drives (Redocly, Prism). They are spawned
 * with this process's own Node (the pinned Node 24), not whatever `node` a shebang would find on PATH,
 * so they behave the same under `npm run`, `npx` and a direct `node_modules/.bin/node` call.
 * In a checkout they are devDependencies; an installed @agent-api/conformance does not carry them (they
 * are large and most users need only `check`), so they are looked up in the user's project too, and a
 * command that needs a missing one says which package to install.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Absolute path of the project root (the folder holding package.json) in a checkout; in an installed
 * @agent-api/conformance, its dist/ folder (which holds generated/openapi.json as a checkout does): two
 * folders up from conformance/cli/ in either.
 */
export const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The bundled spec (one JSON document, internal refs only): in a checkout and in the installed package. */
export const bundledSpecPath = join(packageRoot, "generated", "openapi.json");

/** Whether this runs from a checkout of the kit (the spec's sources are there) rather than a package. */
export const inCheckout = existsSync(join(packageRoot, "spec", "openapi.yaml"));

/** The spec's root document: its sources in a checkout, the bundled document in an installed package. */
export const specPath = inCheckout ? join(packageRoot, "spec", "openapi.yaml") : bundledSpecPath;

/** A tool a command needs is not installed; the message names the npm package that provides it. */
export class MissingToolError extends Error {
  readonly pkg: string;
  constructor(pkg: string, purpose: string) {
    super(
      `${purpose} needs ${pkg}, which the installed @agent-api packages do not carry: install it beside them (npm install --save-dev ${pkg})`,
    );
    this.pkg = pkg;
  }
}

/** Where packages are looked up: the kit's own location first, then the project it runs in. */
const lookups = [join(packageRoot, "package.json"), join(process.cwd(), "package.json")].map((from) =>
  createRequire(from),
);

function resolveFrom(specifier: string): string | null {
  for (const lookup of lookups) {
    try {
      return lookup.resolve(specifier);
    } catch {
      // Not reachable from here; try the next place.
    }
  }
  return null;
}

/** Absolute path of the JavaScript file behind `binName` of npm package `pkg`. */
export function resolveBin(pkg: string, binName: string, purpose = `this command`): string {
  const manifestPath = resolveFrom(`${pkg}/package.json`);
  if (!manifestPath) throw new MissingToolError(pkg, purpose);
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as {
    bin?: string | Record<string, string>;
  };
  const rel = typeof manifest.bin === "string" ? manifest.bin : manifest.bin?.[binName];
  if (!rel) throw new Error(`${pkg} has no bin named ${binName}`);
  return join(dirname(manifestPath), rel);
}

export const tools = {
  redocly: (purpose?: string) => resolveBin("@redocly/cli", "redocly", purpose),
  prism: (purpose?: string) => resolveBin("@stoplight/prism-cli", "prism", purpose),
} as const;

/** The tool's entry, or null once the message naming its package is on stderr (the command exits 2). */
export function toolOrSay(find: () => string): string | null {
  try {
    return find();
  } catch (error) {
    if (!(error instanceof MissingToolError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return null;
  }
}

/** A file of the installed @agent-api/spec package (e.g. `index.html`), or null when it is not installed. */
export function specPackageFile(file: string): string | null {
  return resolveFrom(`@agent-api/spec/${file}`);
}

export interface ToolResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a tool's JS entry with the current Node; `inherit` streams its output to ours instead of capturing it. */
export function runTool(
  entry: string,
  args: string[],
  opts: { inherit?: boolean; cwd?: string } = {},
): Promise<ToolResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [entry, ...args], {
      cwd: opts.cwd ?? packageRoot,
      stdio: opts.inherit ? "inherit" : ["ignore", "pipe", "pipe"],
      // Redocly otherwise phones home and may print an upgrade notice; both are noise in CI.
      env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr?.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    child.on("error", reject);
    child.on("close", (code, signal) => resolvePromise({ code: code ?? (signal ? 128 : 1), stdout, stderr }));
  });
}
