/**
 * The compatibility matrix's tools, installed once per run into one directory (`.tmp/tools` in the checkout,
 * or AGENT_API_TOOLS_DIR): the install takes about a minute and a few hundred MB, so a directory that already
 * holds exactly this list is reused. The matrix's work directories live under it, so generated clients resolve
 * their runtime packages (axios, @oazapfts/runtime, ...) from its node_modules.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../../scripts/project-root.ts";

/** Each tool at the version the matrix was last run with (spec/README.md's table). */
export const TOOL_PACKAGES = {
  orval: "8.38.0",
  "@kubb/cli": "4.39.3",
  "@kubb/core": "4.39.3",
  "@kubb/plugin-oas": "4.39.3",
  "@kubb/plugin-ts": "4.39.3",
  "@kubb/plugin-client": "4.39.3",
  "typed-openapi": "2.2.7",
  oazapfts: "7.5.0",
  "@oazapfts/runtime": "1.2.0",
  "swagger-typescript-api": "13.13.0",
  "@stoplight/spectral-cli": "6.16.3",
  "@apidevtools/swagger-parser": "13.1.0",
  "swagger-ui-dist": "5.35.0",
  "@scalar/api-reference": "1.72.1",
  redoc: "2.5.4",
  "@stoplight/elements": "9.0.25",
  axios: "1.21.1",
  "@anthropic-ai/claude-code": "2.1.328",
} as const;

export const toolsDir = process.env.AGENT_API_TOOLS_DIR ?? join(projectRoot, ".tmp", "tools");
const MARKER = join(toolsDir, "installed.json");
const UNAVAILABLE = join(toolsDir, "unavailable.txt");

/** Why the tools could not be installed (the registry unreachable), or null when they are there. */
export function toolsUnavailable(): string | null {
  return existsSync(UNAVAILABLE) ? readFileSync(UNAVAILABLE, "utf8") : null;
}

/** A package's directory inside the tools directory. */
export const toolPackage = (name: keyof typeof TOOL_PACKAGES) => join(toolsDir, "node_modules", name);

/** An installed tool's command. */
export const toolBin = (name: string) => join(toolsDir, "node_modules", ".bin", name);

function npm(args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) =>
    execFile("npm", args, { cwd: toolsDir, maxBuffer: 64 << 20, timeout: 900_000 }, (error, stdout, stderr) =>
      resolve({
        code: error ? (typeof error.code === "number" ? error.code : 1) : 0,
        output: stdout + stderr,
      }),
    ),
  );
}

/** Vitest global set-up of the matrix: install the tools unless this exact list is already there. */
export default async function setup(): Promise<void> {
  mkdirSync(toolsDir, { recursive: true });
  const wanted = JSON.stringify(TOOL_PACKAGES);
  if (existsSync(MARKER) && readFileSync(MARKER, "utf8") === wanted) return;
  writeFileSync(
    join(toolsDir, "package.json"),
    `${JSON.stringify(
      {
        name: "agent-api-tool-matrix",
        private: true,
        // Claude Code places its platform binary in a postinstall script; npm 11 runs a dependency's install
        // script only when the project allows it.
        allowScripts: { "@anthropic-ai/claude-code": true },
      },
      null,
      2,
    )}\n`,
  );
  const ping = await npm(["ping"]);
  if (ping.code !== 0) {
    writeFileSync(
      UNAVAILABLE,
      `the npm registry is unreachable (npm ping: ${ping.output.trim().split("\n").pop()})`,
    );
    return;
  }
  rmSync(UNAVAILABLE, { force: true });
  const specs = Object.entries(TOOL_PACKAGES).map(([name, version]) => `${name}@${version}`);
  // The renderers' standalone bundles carry their own React; their peer ranges disagree with each other.
  const install = await npm(["install", "--no-audit", "--no-fund", "--legacy-peer-deps", ...specs]);
  if (install.code !== 0)
    throw new Error(`installing the matrix's tools failed:\n${install.output.slice(-4000)}`);
  writeFileSync(MARKER, wanted);
}
