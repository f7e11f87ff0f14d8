#!/usr/bin/env node
/**
 * `agent-api <command> [flags]`: dispatches to the command's module, whose `main(args)` parses its own flags
 * and resolves to the process exit code. Commands load lazily so `check` does not pay for the server.
 */
import { isPackageMissing } from "./package-missing.ts";

type Command = { main(args: string[]): Promise<number> };

/**
 * `check`, `ui`, `mock`, `docs` and `lint` are this package's (beside this file); `serve` and `model` are
 * the reference server's, loaded by its package name, so they run where @agent-api/reference-server is
 * installed (in the repository: always, as a workspace).
 */
const commands: Record<string, { summary: string; load: () => Promise<Command>; from?: string }> = {
  serve: {
    summary: "run the reference server",
    load: () => import("@agent-api/reference-server/commands/serve"),
    from: "@agent-api/reference-server",
  },
  check: { summary: "run the conformance suite against a deployment", load: () => import("./check.ts") },
  ui: {
    summary: "the conformance suite as a local page (agent-api check --ui)",
    load: () => import("./ui.ts"),
  },
  model: {
    summary: "serve the scripted model as a Messages API upstream",
    load: () => import("@agent-api/reference-server/commands/model"),
    from: "@agent-api/reference-server",
  },
  mock: { summary: "Prism mock server from the spec", load: () => import("./mock.ts") },
  docs: { summary: "build the HTML documentation", load: () => import("./docs.ts") },
  lint: { summary: "lint the OpenAPI spec with Redocly", load: () => import("./lint.ts") },
};

function usage(): string {
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(8)} ${c.summary}`);
  return `usage: agent-api <command> [flags]\n\ncommands:\n${lines.join("\n")}\n\nRun agent-api <command> --help for its flags.\n`;
}

const [name, ...rest] = process.argv.slice(2);
if (!name || name === "--help" || name === "-h" || name === "help") {
  process.stdout.write(usage());
  process.exit(name ? 0 : 2);
}
const command = commands[name];
if (!command) {
  process.stderr.write(`agent-api: unknown command "${name}"\n\n${usage()}`);
  process.exit(2);
}

let mod: Command;
try {
  mod = await command.load();
} catch (error) {
  if (!command.from || !isPackageMissing(error, command.from)) throw error;
  process.stderr.write(
    `agent-api: "${name}" is not part of this installation: install ${command.from} beside it\n`,
  );
  process.exit(2);
}
process.exitCode = await mod.main(rest);
