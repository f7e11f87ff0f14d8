#!/usr/bin/env node
/**
 * `agent-api <command> [flags]`: dispatches to cli/commands/<command>.ts, whose `main(args)` parses its
 * own flags and resolves to the process exit code. Commands load lazily so `check` does not pay for the server.
 */
const commands: Record<
  string,
  { summary: string; load: () => Promise<{ main(args: string[]): Promise<number> }> }
> = {
  serve: { summary: "run the reference server", load: () => import("./commands/serve.ts") },
  check: {
    summary: "run the conformance suite against a deployment",
    load: () => import("./commands/check.ts"),
  },
  model: {
    summary: "serve the scripted model as a Messages API upstream",
    load: () => import("./commands/model.ts"),
  },
  mock: { summary: "Prism mock server from the spec", load: () => import("./commands/mock.ts") },
  docs: { summary: "build the HTML documentation", load: () => import("./commands/docs.ts") },
  lint: { summary: "lint the OpenAPI spec with Redocly", load: () => import("./commands/lint.ts") },
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
const mod = await command.load();
process.exitCode = await mod.main(rest);
