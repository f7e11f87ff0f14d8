/**
 * `agent-api check`: runs the conformance suite against a deployment and says, rule by rule, where it
 * departs from the API. Exit codes are in EXIT_CODES_HELP below.
 * With no --base-url (and no AGENT_API_BASE_URL) it checks the reference server's demo, started in-process.
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { Command, CommanderError, Option } from "commander";
import {
  type ConnectionOptions,
  catalogue,
  type ExpectedFailure,
  ExpectedFailuresError,
  htmlReport,
  jsonReport,
  junitReport,
  type Level,
  levels,
  parseExpectedFailures,
  progressLine,
  reachability,
  renderCoverage,
  runConformance,
  selectChecks,
  summaryText,
  timelineLines,
  turnBoundText,
} from "../index.ts";
import {
  DEFAULT_CONCURRENCY,
  DEFAULT_EXPLORE_RUNS,
  DEFAULT_IDLE_SECONDS,
  DEFAULT_TIMEOUT_MS,
  envNameOf,
  flagOrEnv,
  INPUT_FLAGS,
  inputFlag,
  resolveExplore,
  resolveInputs,
  resolveRunSettings,
  UsageError,
} from "../inputs.ts";
import { FORM_FIELDS } from "../ui/form.ts";
import { startConformanceUi } from "../ui/server.ts";
import { isPackageMissing } from "./package-missing.ts";
import { isStandardOutput, writeStandardOutput } from "./standard-output.ts";

const EXIT_CODES_HELP = `
Exit codes:
  0  every MUST check that ran passed (failures listed in --expected-failures do not count)
  1  a MUST check failed, including one the deployment prevented (its proxy answered instead of
     the API, TLS or a body size limit refused the request), or a check listed in
     --expected-failures passed (the baseline is stale: remove the entry)
  2  the run could not be made: a usage error, an unreadable or invalid --expected-failures file
     (an unknown check id included), --base-url unreachable, or a report that could not be written
`;

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
    .option("--foreign-key <key>", `a key of another workspace ${env("--foreign-key")}`)
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
      "--max-turns <n>",
      `bound on the turns the run sends (each costs the deployment a model call); a check that needs one more is skipped, saying so ${env("--max-turns")}`,
    )
    .option(
      "--idle-seconds [n]",
      `opt-in: a turn stays quiet this long (default ${DEFAULT_IDLE_SECONDS} when given without a value) and must still end at message_stop, as behind a proxy's idle time-out; needs a tool limit above n + 5 s and --timeout-ms above it ${env("--idle-seconds")}`,
    )
    .option(
      "--ca <file>",
      `PEM certificate of the private CA that signed the deployment's certificate, trusted on top of the public ones ${env("--ca")}`,
    )
    .option("--http2", `send every request over HTTP/2 (https:// only) ${env("--http2")}`)
    .option(
      "--expected-failures <file>",
      `YAML or JSON list of {id, reason}: known deviations reported as expected failures, not failing the run; a listed check that passes fails it ${env("--expected-failures")}`,
    )
    .option(
      "--explore <n>",
      `random sequences of operations compared with the API's model, each departure shrunk to a replayable script; default ${DEFAULT_EXPLORE_RUNS} (0 with --only), 0 turns it off ${env("--explore")}`,
    )
    .option(
      "--seed <s>",
      `seed of the explorer's sequences (printed by every run), default a fresh one ${env("--seed")}`,
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
    .option("--coverage", "with --list: print the API coverage table (conformance/COVERAGE.md) instead")
    .option("--no-color", "plain progress lines")
    .option(
      "--ui",
      "open a local page instead: a form prefilled from these flags, live results, re-runs, earlier runs",
    )
    .option("--ui-host <host>", "address the page listens on, default 127.0.0.1 (loopback only)")
    .option("--ui-port <n>", "port of the page, default any free port")
    .option("--reports-dir <dir>", "where the page keeps finished runs, default .agent-api-runs")
    .addHelpText("after", EXIT_CODES_HELP)
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

/**
 * The options read from files (`--ca`, `--expected-failures`) and `--http2`, for a run and for the page alike;
 * null after saying on stderr what could not be read (a usage error, exit 2).
 */
async function fileOptions(
  opts: Record<string, unknown>,
  env: Record<string, string | undefined>,
): Promise<{ connection: ConnectionOptions; expectedFailures: ExpectedFailure[] | undefined } | null> {
  try {
    return {
      connection: await connectionOptions(opts, env),
      expectedFailures: await readExpectedFailures(opts, env),
    };
  } catch (error) {
    process.stderr.write(`agent-api check: ${error instanceof Error ? error.message : String(error)}\n`);
    return null;
  }
}

/**
 * `--ui`: the page over the same library, prefilled from the flags and environment (the demo's values when
 * no --base-url was given), until the process is interrupted.
 */
async function servePage(
  opts: Record<string, unknown>,
  environment: Record<string, string | undefined>,
): Promise<number> {
  const files = await fileOptions(opts, environment);
  if (!files) return 2;
  const { connection, expectedFailures } = files;
  const defaults: Record<string, string> = {};
  for (const field of FORM_FIELDS) {
    const value = flagOrEnv(opts, field.flag, environment);
    if (value !== undefined) defaults[field.flag] = Array.isArray(value) ? value.join("\n") : value;
  }
  const portText = typeof opts.uiPort === "string" ? opts.uiPort : "0";
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) {
    process.stderr.write(
      `agent-api check: --ui-port must be a port number, not ${JSON.stringify(portText)}\n`,
    );
    return 2;
  }
  const ui = await startConformanceUi({
    host: typeof opts.uiHost === "string" ? opts.uiHost : undefined,
    port: Number(portText),
    reportsDir: typeof opts.reportsDir === "string" ? opts.reportsDir : ".agent-api-runs",
    defaults,
    connection,
    expectedFailures,
  });
  process.stdout.write(
    `The conformance page is at ${ui.url} (Ctrl-C to stop; open it as printed: the address carries the page's token)\n`,
  );
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await ui.close();
  return 0;
}

/** `--ca` and `--http2` (or their AGENT_API_* variables); a CA file that cannot be read is a usage error. */
async function connectionOptions(
  opts: Record<string, unknown>,
  env: Record<string, string | undefined>,
): Promise<ConnectionOptions> {
  const caFile = flagOrEnv(opts, "--ca", env);
  const http2Value = opts.http2 === true ? "1" : env[envNameOf("--http2")];
  const http2 = http2Value !== undefined && !["", "0", "false", "no"].includes(http2Value.toLowerCase());
  if (typeof caFile !== "string") return { http2 };
  let ca: string;
  try {
    ca = await readFile(caFile, "utf8");
  } catch (error) {
    throw new Error(`cannot read --ca ${caFile}: ${error instanceof Error ? error.message : error}`);
  }
  if (!ca.includes("-----BEGIN CERTIFICATE-----")) {
    throw new Error(`--ca ${caFile} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  }
  return { ca, http2 };
}

/** The baseline `--expected-failures` names, checked against the catalogue; undefined when none. */
async function readExpectedFailures(
  opts: Record<string, unknown>,
  env: Record<string, string | undefined>,
): Promise<ExpectedFailure[] | undefined> {
  const file = flagOrEnv(opts, "--expected-failures", env);
  if (typeof file !== "string") return undefined;
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    throw new Error(
      `cannot read --expected-failures ${file}: ${error instanceof Error ? error.message : error}`,
    );
  }
  try {
    return parseExpectedFailures(
      text,
      catalogue.map((c) => c.id),
    );
  } catch (error) {
    if (error instanceof ExpectedFailuresError)
      throw new Error(`--expected-failures ${file}: ${error.message}`);
    throw error;
  }
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
  const reportFlags = ["--junit", "--json", "--html"] as const;
  // With a report on standard output, the console report (progress, summary, notes) goes to standard error.
  const consoleOut = reportFlags.some((flag) => {
    const file = flagOrEnv(opts, flag, env);
    return typeof file === "string" && isStandardOutput(file);
  })
    ? process.stderr
    : process.stdout;
  if (!baseUrl) {
    consoleOut.write("No --base-url given: starting the reference server's demo in-process…\n");
    try {
      // The reference server's package wires its demo in; the suite's library (../index.ts) never imports
      // the server, so an installation without @agent-api/reference-server checks deployments all the same.
      const { startDemoServer } = await import("@agent-api/reference-server/demo");
      demo = await startDemoServer();
    } catch (error) {
      const reason = isPackageMissing(error, "@agent-api/reference-server")
        ? "@agent-api/reference-server is not installed"
        : error instanceof Error
          ? error.message
          : String(error);
      process.stderr.write(
        `agent-api check: could not start the reference demo (${reason}); give --base-url\n`,
      );
      return 2;
    }
    // The demo's own values win over a stray partial environment; explicit flags still win over both.
    environment = { ...env, ...demo.envVars };
  }
  try {
    // The page needs no complete set of inputs: its form takes what the flags did not give.
    if (opts.ui) return await servePage(opts, environment);
    let inputs: ReturnType<typeof resolveInputs>;
    let settings: ReturnType<typeof resolveRunSettings>;
    let exploration: ReturnType<typeof resolveExplore>;
    try {
      inputs = resolveInputs(opts, environment);
      settings = resolveRunSettings(opts, environment);
      exploration = resolveExplore(opts, environment, only !== undefined);
    } catch (error) {
      if (error instanceof UsageError) {
        process.stderr.write(`agent-api check: ${error.message}\n`);
        return 2;
      }
      throw error;
    }
    const files = await fileOptions(opts, env);
    if (!files) return 2;
    const { connection, expectedFailures } = files;
    const unreachable = await reachability(inputs.baseUrl, settings.timeoutMs, connection);
    if (unreachable) {
      // Not a finding about the deployment: every check would fail the same way, so say it once.
      process.stderr.write(`agent-api check: cannot reach ${inputs.baseUrl}: ${unreachable}\n`);
      return 2;
    }
    const color = opts.color !== false && consoleOut.isTTY === true;
    consoleOut.write(`${turnBoundText(settings.maxTurns)}\n`);
    if (exploration.runs > 0) {
      consoleOut.write(
        `The explorer will run ${exploration.runs} random sequences after the checks, seed ${exploration.seed} (--seed ${exploration.seed} draws them again; --explore 0 turns it off)\n`,
      );
    }
    const report = await runConformance({
      explore: exploration,
      inputs,
      only,
      level,
      concurrency: settings.concurrency,
      requestTimeoutMs: settings.timeoutMs,
      maxTurns: settings.maxTurns,
      connection,
      expectedFailures,
      inputLabel: inputFlag,
      onResult: (result) =>
        consoleOut.write(`${[progressLine(result, color), ...timelineLines(result, color)].join("\n")}\n`),
    });
    consoleOut.write(summaryText(report));
    const outputs: Array<[(typeof reportFlags)[number], (r: typeof report) => string]> = [
      ["--junit", junitReport],
      ["--json", jsonReport],
      ["--html", htmlReport],
    ];
    let unwritten = false;
    for (const [flag, render] of outputs) {
      const file = flagOrEnv(opts, flag, env);
      if (typeof file === "string") {
        try {
          if (isStandardOutput(file)) {
            await writeStandardOutput(render(report));
            continue;
          }
          // A CI job names reports/x.xml in a fresh checkout: the folder is made, as a user expects.
          await mkdir(dirname(file), { recursive: true });
          await writeFile(file, render(report));
          consoleOut.write(`wrote ${file}\n`);
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
