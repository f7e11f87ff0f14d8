/**
 * Locates and runs the command-line tools the contract kit drives (Redocly, Prism). They are spawned
 * with this process's own Node (the pinned Node 24), not whatever `node` a shebang would find on PATH,
 * so they behave the same under `npm run`, `npx` and a direct `node_modules/.bin/node` call.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Absolute path of the project root (the folder holding package.json). */
export const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Absolute path of the bundled spec's root document. */
export const specPath = join(projectRoot, "spec", "openapi.yaml");

const requireFromRoot = createRequire(join(projectRoot, "package.json"));

/** Absolute path of the JavaScript file behind `binName` of npm package `pkg`. */
export function resolveBin(pkg: string, binName: string): string {
  const manifestPath = requireFromRoot.resolve(`${pkg}/package.json`);
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as {
    bin?: string | Record<string, string>;
  };
  const rel = typeof manifest.bin === "string" ? manifest.bin : manifest.bin?.[binName];
  if (!rel) throw new Error(`${pkg} has no bin named ${binName}`);
  return join(dirname(manifestPath), rel);
}

export const tools = {
  redocly: () => resolveBin("@redocly/cli", "redocly"),
  prism: () => resolveBin("@stoplight/prism-cli", "prism"),
} as const;

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
      cwd: opts.cwd ?? projectRoot,
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
