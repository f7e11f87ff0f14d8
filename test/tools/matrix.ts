/**
 * What the matrix's tests share: a work directory per tool under the tools directory, running a command,
 * type-checking generated code with the project's TypeScript, and running a TypeScript file the way a
 * generated client's user would (Node's own type stripping; extensionless relative imports resolved).
 */
import { execFile } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../../scripts/project-root.ts";
import { toolsDir } from "./tools-dir.ts";

export const publishedForm = (name: "openapi.json" | "openapi-3.1.json" | "openapi-docs.json") =>
  join(projectRoot, "generated", name);

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

export function run(
  command: string,
  args: string[],
  options: { cwd: string; env?: Record<string, string>; timeoutMs?: number },
): Promise<Ran> {
  return new Promise((resolve) =>
    execFile(
      command,
      args,
      {
        cwd: options.cwd,
        env: { ...process.env, ...options.env },
        maxBuffer: 64 << 20,
        timeout: options.timeoutMs ?? 170_000,
      },
      (error, stdout, stderr) =>
        resolve({
          code: error ? (typeof error.code === "number" ? error.code : 1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        }),
    ),
  );
}

/** A fresh directory for one tool's output, inside the tools directory (its node_modules resolve). */
export function workDir(name: string): string {
  const dir = join(toolsDir, "work", name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), '{ "type": "module", "private": true }\n');
  return dir;
}

/** `tsc --noEmit` over a directory, strict, as a bundler-based project would compile generated code. */
export async function typecheck(dir: string, compilerOptions: Record<string, unknown> = {}): Promise<Ran> {
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "es2022",
        module: "esnext",
        moduleResolution: "bundler",
        lib: ["es2023", "dom", "dom.iterable"],
        strict: true,
        noEmit: true,
        // kubb imports its files as .ts, the others without an extension.
        allowImportingTsExtensions: true,
        skipLibCheck: true,
        esModuleInterop: true,
        types: [],
        ...compilerOptions,
      },
      include: ["**/*.ts"],
      exclude: ["node_modules"],
    }),
  );
  return run(join(projectRoot, "node_modules", ".bin", "tsc"), ["-p", dir], { cwd: dir });
}

const RESOLVE_HOOK = `import { registerHooks } from "node:module";
// Generated clients import their own files without an extension (or as .js), as bundlers allow.
registerHooks({
  resolve(specifier, context, next) {
    try {
      return next(specifier, context);
    } catch (error) {
      if (!specifier.startsWith(".")) throw error;
      const base = specifier.replace(/\\.js$/, "");
      for (const candidate of [base + ".ts", base + "/index.ts"]) {
        try {
          return next(candidate, context);
        } catch {}
      }
      throw error;
    }
  },
});
`;

/** Runs a TypeScript file of `dir` with Node (enums and the like transformed, as tsc would emit them). */
export function runTs(dir: string, file: string, env: Record<string, string>): Promise<Ran> {
  writeFileSync(join(dir, "resolve-hook.mjs"), RESOLVE_HOOK);
  return run(
    process.execPath,
    ["--experimental-transform-types", "--no-warnings", "--import", "./resolve-hook.mjs", file],
    { cwd: dir, env },
  );
}
