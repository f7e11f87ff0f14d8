#!/usr/bin/env node
/**
 * `agent-api <command> [flags]`: dispatches to cli/commands/<command>.ts, whose `main(args)` parses its
 * own flags and resolves to the process exit code. Commands load lazily so `check` does not pay for the server.
 */
type Command = { main(args: string[]): Promise<number> };

/**
 * Each command is loaded by a computed path, so a compiler following imports from here does not pull every
 * command in: the conformance package compiles all but `serve` and `model`, which load where their package is
 * installed (in the repository: all of them). Running from .ts (the repository) or .js (a package) alike.
 */
const extension = import.meta.url.endsWith(".ts") ? ".ts" : ".js";
const load = (name: string) => (): Promise<Command> =>
  import(new URL(`./${name}${extension}`, import.meta.url).href) as Promise<Command>;
// Until the packages import each other by name: the server's commands by path in the repository.
const loadServer = (name: string) => (): Promise<Command> =>
  import(new URL(`../../reference-server/cli/${name}${extension}`, import.meta.url).href) as Promise<Command>;

const commands: Record<string, { summary: string; load: () => Promise<Command> }> = {
  serve: { summary: "run the reference server", load: loadServer("serve") },
  check: { summary: "run the conformance suite against a deployment", load: load("check") },
  ui: { summary: "the conformance suite as a local page (agent-api check --ui)", load: load("ui") },
  model: { summary: "serve the scripted model as a Messages API upstream", load: loadServer("model") },
  mock: { summary: "Prism mock server from the spec", load: load("mock") },
  docs: { summary: "build the HTML documentation", load: load("docs") },
  lint: { summary: "lint the OpenAPI spec with Redocly", load: load("lint") },
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
/** Where an installed conformance package finds the commands it does not carry. */
const fromPackages: Record<string, string> = {
  serve: "@agent-api/reference-server/commands/serve",
  model: "@agent-api/reference-server/commands/model",
};

const missing = (error: unknown) => (error as { code?: string }).code === "ERR_MODULE_NOT_FOUND";

let mod: Command;
try {
  mod = await command.load();
} catch (error) {
  if (!missing(error)) throw error;
  // An installed conformance package carries `check`, `mock`, `docs` and `lint`; `serve` and `model` come
  // with the server package.
  const specifier = fromPackages[name];
  try {
    if (!specifier) throw error;
    mod = (await import(specifier)) as Command;
  } catch (inner) {
    if (!missing(inner)) throw inner;
    const hint = specifier ? ": install @agent-api/reference-server beside it" : "";
    process.stderr.write(`agent-api: "${name}" is not part of this installation${hint}\n`);
    process.exit(2);
  }
}
process.exitCode = await mod.main(rest);
