/**
 * The official Python SDK of the messages API (`anthropic`, with `httpx`), in a virtual environment made with
 * `python3 -m venv` under the tools directory and filled by pip from whatever index pip is configured to
 * reach (a mirror here). A venv that already holds exactly this list is reused. Where there is no python3, or
 * pip reaches no index with these packages, the Python cases are skipped with pip's reason.
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { toolsDir } from "./tools-dir.ts";

/** Each package at the version the matrix was last run with. */
export const PYTHON_PACKAGES = { anthropic: "1.13.0", httpx: "0.28.1" } as const;

const venv = join(toolsDir, "python");
export const venvPython = join(venv, "bin", "python");
const MARKER = join(venv, "installed.json");
const UNAVAILABLE = join(toolsDir, "python-unavailable.txt");

/** Why the Python SDK could not be installed, or null when it is there. */
export function pythonUnavailable(): string | null {
  return existsSync(UNAVAILABLE) ? readFileSync(UNAVAILABLE, "utf8") : null;
}

function run(command: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) =>
    execFile(command, args, { maxBuffer: 64 << 20, timeout: 900_000 }, (error, stdout, stderr) =>
      resolve({
        code: error ? (typeof error.code === "number" ? error.code : 1) : 0,
        output: stdout + stderr,
      }),
    ),
  );
}

const lastLine = (output: string) => output.trim().split("\n").pop() ?? "";

/** Vitest global set-up: make the venv and install the SDK unless this exact list is already there. */
export default async function setup(): Promise<void> {
  const wanted = JSON.stringify(PYTHON_PACKAGES);
  if (existsSync(MARKER) && readFileSync(MARKER, "utf8") === wanted) return;
  rmSync(UNAVAILABLE, { force: true });
  const made = await run("python3", ["-m", "venv", "--clear", venv]);
  if (made.code !== 0) {
    writeFileSync(UNAVAILABLE, `python3 -m venv failed: ${lastLine(made.output)}`);
    return;
  }
  const specs = Object.entries(PYTHON_PACKAGES).map(([name, version]) => `${name}==${version}`);
  // One attempt per index: an index that is not reachable here (pypi.org behind no network) is passed over at
  // once instead of after five back-offs per package, and the one pip does reach (a mirror) answers.
  const install = await run(venvPython, [
    "-m",
    "pip",
    "install",
    "--retries",
    "0",
    "--timeout",
    "20",
    ...specs,
  ]);
  if (install.code !== 0) {
    writeFileSync(UNAVAILABLE, `pip reaches no index with ${specs.join(" ")} (${lastLine(install.output)})`);
    return;
  }
  writeFileSync(MARKER, wanted);
}
