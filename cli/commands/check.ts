/**
 * `agent-api check`: runs the conformance suite against a deployment and says, rule by rule, where it
 * departs from the API. Exit 0 when every MUST check that ran passed, 1 when one failed, 2 on a usage error.
 * With no --base-url (and no AGENT_API_BASE_URL) it checks the reference server's demo, started in-process.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { Command, CommanderError, Option } from "commander";
import {
  catalogue,
  htmlReport,
  jsonReport,
  junitReport,
  type Level,
  levels,
  progressLine,
  reachability,
  renderCoverage,
  runConformance,
  selectChecks,
  summaryText,
  timelineLines,
} from "../../conformance/index.ts";
import {
  DEFAULT_CONCURRENCY,
  DEFAULT_IDLE_SECONDS,
  DEFAULT_TIMEOUT_MS,
  envNameOf,
  flagOrEnv,
  INPUT_FLAGS,
  inputFlag,
  resolveInputs,
  resolveRunSettings,
  UsageError,
} from "../../conformance/inputs.ts";

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function buildProgram(): Command {
  const env = (flag: string) => `(env ${envNameOf(flag)})`;
  return new Command("agent-api check")
    .description("Run the conformance suite against a deployment of the Agent Conversation API")
    .option(
      "--base-url <url>",
      `service base address ${env("--base-url")}; omitted: check the in-process demo`,
    )
    .option("--agent <name>", `agent name ${env("--agent")}`)
    .option("--key <key>", `API key (Admin, Builder or Operator) ${env("--key")}`)
    .option("--member-key <key>", `second member of the same workspace ${env("--member-key")}`)
    .option("--viewer-key <key>", `Viewer-role key of the same workspace ${env("--viewer-key")}`)
    .option("--revoked-key <key>", `a revoked key ${env("--revoked-key")}`)
    .option("--foreign-agent <name>", `an agent of another workspace ${env("--foreign-agent")}`)
    .option("--automation <name>", `an active automation of the agent ${env("--automation")}`)
    .option("--storage-agent <name>", `a storage-backed agent ${env("--storage-agent")}`)
    .option("--repo-agent <name>", `a repository-backed agent ${env("--repo-agent")}`)
    .option(
      "--repo-url <url>",
      `git URL of that agent's repository, cloned to see pushes ${env("--repo-url")}`,
    )
    .option("--flow-url <url>", `deployed-flow base address ${env("--flow-url")}`)
    .option("--flow-id <id>", `deployed flow id ${env("--flow-id")}`)
    .option("--flow-key <key>", `deployed-flow key ${env("--flow-key")}`)
    .option(
      "--flow-input <name=value>",
      `flow input variable, repeatable ${env("--flow-input")}`,
      collect,
      [],
    )
    .option(
      "--routing-prefix <prefix>",
      `routing prefix for the model-routed send ${env("--routing-prefix")}`,
    )
    .option(
      "--channel-id <id>",
      `a chat channel id with a conversation of the agent, for the channel_id filter ${env("--channel-id")}`,
    )
    .option(
      "--notebook-path <path>",
      `a notebook path with a conversation of the agent, for the notebook_path filter ${env("--notebook-path")}`,
    )
    .option(
      "--session-wait-ms <n>",
      `bound for waiting on agent_session_id, default 15000 ${env("--session-wait-ms")}`,
    )
    .option(
      "--concurrency <n>",
      `checks run at once, default ${DEFAULT_CONCURRENCY}; lower it for a rate-limited deployment ${env("--concurrency")}`,
    )
    .option(
      "--timeout-ms <n>",
      `bound of one request (a whole turn), default ${DEFAULT_TIMEOUT_MS} ${env("--timeout-ms")}`,
    )
    .option(
      "--idle-seconds [n]",
      `opt-in: a turn stays quiet this long (default ${DEFAULT_IDLE_SECONDS} when given without a value) and must still end at message_stop, as behind a proxy's idle time-out; needs a tool limit above n + 5 s and --timeout-ms above it ${env("--idle-seconds")}`,
    )
    .option("--junit <file>", `write a JUnit XML report ${env("--junit")}`)
    .option("--json <file>", `write a JSON report ${env("--json")}`)
    .option("--html <file>", `write a self-contained HTML report ${env("--html")}`)
    .option("--only <ids>", `comma-separated check ids to run (ID* matches a prefix) ${env("--only")}`)
    .addOption(
      new Option("--level <level>", `run checks of this level and stricter ${env("--level")}`).choices(
        levels,
      ),
    )
    .option("--list", "print the catalogue of checks and exit")
    .option("--coverage", "with --list: print the seed coverage table (conformance/COVERAGE.md) instead")
    .option("--no-color", "plain progress lines")
    .exitOverride()
    .configureOutput({ writeErr: (text) => process.stderr.write(text) });
}

function listCatalogue(): string {
  const rows = catalogue.map(
    (c) =>
      `${c.id.padEnd(36)} ${c.level.padEnd(6)} ${c.section}\n${"".padEnd(44)}${c.title}${
        c.needs.length > 0 ? `\n${"".padEnd(44)}needs ${c.needs.map((n) => INPUT_FLAGS[n]).join(", ")}` : ""
      }${c.levelReason ? `\n${"".padEnd(44)}level: ${c.levelReason}` : ""}`,
  );
  return `${rows.join("\n")}\n\n${catalogue.length} checks\n`;
}

export async function main(args: string[]): Promise<number> {
  const program = buildProgram();
  try {
    program.parse(args, { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
    throw error;
  }
  const opts = program.opts<Record<string, unknown>>();
  if (opts.list) {
    process.stdout.write(opts.coverage ? renderCoverage(catalogue) : listCatalogue());
    return 0;
  }
  const env = process.env;
  const levelValue = flagOrEnv(opts, "--level", env);
  const level = (Array.isArray(levelValue) ? levelValue[0] : levelValue) as Level | undefined;
  if (level !== undefined && !levels.includes(level)) {
    process.stderr.write(`agent-api check: --level must be MUST, SHOULD or INFO\n`);
    return 2;
  }
  const onlyValue = flagOrEnv(opts, "--only", env);
  const only = typeof onlyValue === "string" ? onlyValue.split(",") : undefined;
  if (only && selectChecks(catalogue, only, level).length === 0) {
    process.stderr.write(`agent-api check: --only ${onlyValue} matches no check (see --list)\n`);
    return 2;
  }

  let demo: { envVars: Record<string, string>; close(): Promise<void> } | undefined;
  let environment: Record<string, string | undefined> = env;
  const baseUrl = flagOrEnv(opts, "--base-url", env);
  if (!baseUrl && env.AGENT_API_BASE_URL === "") {
    // Set but empty is what a CI runner passes for a variable nobody defined: checking the demo then would
    // report a pass that says nothing about the deployment the job was written for.
    process.stderr.write(
      "agent-api check: AGENT_API_BASE_URL is set but empty; give the deployment's address (or unset it to check the reference demo)\n",
    );
    return 2;
  }
  if (!baseUrl) {
    process.stdout.write("No --base-url given: starting the reference server's demo in-process…\n");
    try {
      // A computed path, so that the conformance package (which has no server) does not compile the demo in.
      const demoModule = new URL(
        `../demo${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`,
        import.meta.url,
      );
      const { startDemoServer } = (await import(demoModule.href)) as {
        startDemoServer(): Promise<{ envVars: Record<string, string>; close(): Promise<void> }>;
      };
      demo = await startDemoServer();
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      process.stderr.write(
        `agent-api check: could not start the reference demo (${reason}); give --base-url\n`,
      );
      return 2;
    }
    // The demo's own values win over a stray partial environment; explicit flags still win over both.
    environment = { ...env, ...demo.envVars };
  }
  try {
    let inputs: ReturnType<typeof resolveInputs>;
    let settings: ReturnType<typeof resolveRunSettings>;
    try {
      inputs = resolveInputs(opts, environment);
      settings = resolveRunSettings(opts, environment);
    } catch (error) {
      if (error instanceof UsageError) {
        process.stderr.write(`agent-api check: ${error.message}\n`);
        return 2;
      }
      throw error;
    }
    const unreachable = await reachability(inputs.baseUrl, settings.timeoutMs);
    if (unreachable) {
      // Not a finding about the deployment: every check would fail the same way, so say it once.
      process.stderr.write(`agent-api check: cannot reach ${inputs.baseUrl}: ${unreachable}\n`);
      return 2;
    }
    const color = opts.color !== false && process.stdout.isTTY === true;
    const report = await runConformance({
      inputs,
      only,
      level,
      concurrency: settings.concurrency,
      requestTimeoutMs: settings.timeoutMs,
      inputLabel: inputFlag,
      onResult: (result) =>
        process.stdout.write(
          `${[progressLine(result, color), ...timelineLines(result, color)].join("\n")}\n`,
        ),
    });
    process.stdout.write(summaryText(report));
    const outputs: Array<[string, (r: typeof report) => string]> = [
      ["--junit", junitReport],
      ["--json", jsonReport],
      ["--html", htmlReport],
    ];
    let unwritten = false;
    for (const [flag, render] of outputs) {
      const file = flagOrEnv(opts, flag, env);
      if (typeof file === "string") {
        try {
          // A CI job names reports/x.xml in a fresh checkout: the folder is made, as a user expects.
          await mkdir(dirname(file), { recursive: true });
          await writeFile(file, render(report));
          process.stdout.write(`wrote ${file}\n`);
        } catch (error) {
          unwritten = true;
          const reason = error instanceof Error ? error.message : String(error);
          process.stderr.write(`agent-api check: could not write ${flag} ${file}: ${reason}\n`);
        }
      }
    }
    // A report asked for and not written is a broken run (CI would keep no artifact), whatever the verdict.
    if (unwritten) return 2;
    return report.passed ? 0 : 1;
  } finally {
    await demo?.close();
  }
}
