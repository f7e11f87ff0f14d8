/** `agent-api lint`: Redocly lint of the spec with the project's redocly.yaml; Redocly's exit code is passed through. */
import { Command } from "commander";
import { inCheckout, packageRoot, runTool, specPath, toolOrSay, tools } from "./tool-bin.ts";

/** CLI entry: lints `--spec` (default spec/openapi.yaml); resolves to Redocly's exit code. */
export async function main(args: string[]): Promise<number> {
  const program = new Command("agent-api lint")
    .description("lint the OpenAPI spec with Redocly (recommended rules plus the project's own)")
    .option("--spec <path>", "OpenAPI document to lint (default: the kit's own)", specPath)
    .option(
      "--format <format>",
      "Redocly output format (codeframe, stylish, summary, json, ...)",
      "codeframe",
    )
    .exitOverride();
  try {
    program.parse(args, { from: "user" });
  } catch (error) {
    return (error as { exitCode?: number }).exitCode ?? 2;
  }
  const opts = program.opts<{ spec: string; format: string }>();
  const redocly = toolOrSay(() => tools.redocly("agent-api lint"));
  if (!redocly) return 2;
  // A checkout lints with its redocly.yaml; elsewhere Redocly finds the user's own, or its recommended rules.
  const result = await runTool(redocly, ["lint", opts.spec, "--format", opts.format], {
    inherit: true,
    cwd: inCheckout ? packageRoot : process.cwd(),
  });
  return result.code;
}
