/**
 * `agent-api serve`: runs the reference server. Without --config it serves the demo workspace and prints
 * its local-only keys and a curl line that works when pasted.
 */
import { Command, Option } from "commander";
import type { LimitsConfig } from "../config/types.ts";
import { demoSummary } from "../demo/workspace.ts";
import { DEFAULT_LIMITS, DEFAULTS, demoKeys, startServer } from "../index.ts";
import {
  DEFAULT_SANDBOX_LIMITS,
  parseSandboxUser,
  parseSize,
  type SandboxUserSetting,
} from "../sandbox/index.ts";
import { integer, parseCommand, usage } from "./options.ts";

const MiB = 1024 * 1024;

const sizeOption = usage("serve", parseSize);
const sandboxUserOption = usage("serve", parseSandboxUser);
const cpusOption = usage("serve", (value: string) => {
  const cpus = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || cpus <= 0)
    throw new Error(`--sandbox-cpus must be a positive number, got ${value}`);
  return cpus;
});

/** The address clients reach the server at (a balancer's): an http(s) URL, kept without a trailing slash. */
const publicUrlOption = usage("serve", (value: string) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`--public-url must be an http:// or https:// URL, got ${JSON.stringify(value)}`);
  }
  // A bare `?` or `#` leaves search and hash empty, yet a client appending a path to it would address nothing.
  if ((url.protocol !== "http:" && url.protocol !== "https:") || value.includes("?") || value.includes("#"))
    throw new Error(
      `--public-url must be an http:// or https:// URL without query or fragment, got ${value}`,
    );
  // The URL as parsed (spaces around it dropped, others percent-encoded), not as typed.
  const href = url.href;
  // A scan, not /\/+$/: that pattern retries from every slash of a long run (quadratic; npm run test:linear).
  let end = href.length;
  while (end > 0 && href[end - 1] === "/") end--;
  return href.slice(0, end);
});

/** A count of 1 or more (a cap of 0 would refuse everything). */
function positive(name: string) {
  return usage("serve", (value: string) => {
    if (!/^\d+$/.test(value) || Number(value) < 1)
      throw new Error(`${name} must be a whole number ≥ 1, got ${value}`);
    return Number(value);
  });
}

/** The caps on pending work and slow clients: flag, its LimitsConfig field, what it bounds, default text. */
const LIMIT_FLAGS: Array<[flag: string, field: keyof LimitsConfig, what: string, size?: true]> = [
  ["--requests-per-server <n>", "requestsPerServer", "requests in flight on this server (over it: 503)"],
  ["--requests-per-key <n>", "requestsPerKey", "requests in flight of one API key (over it: 429)"],
  [
    "--body-bytes-per-server <size>",
    "bodyBytesPerServer",
    "request body bytes held on this server (503)",
    true,
  ],
  ["--body-bytes-per-key <size>", "bodyBytesPerKey", "request body bytes held for one API key (429)", true],
  [
    "--waiting-turns-per-conversation <n>",
    "waitingTurnsPerConversation",
    "turns waiting behind a running turn of their conversation (429)",
  ],
  [
    "--waiting-turns-per-key <n>",
    "waitingTurnsPerKey",
    "turns of one API key waiting for a conversation (429)",
  ],
  [
    "--waiting-turns-per-server <n>",
    "waitingTurnsPerServer",
    "turns waiting for a conversation, in all (503)",
  ],
  [
    "--requests-per-workspace <n>",
    "requestsPerWorkspace",
    "requests in flight of one workspace's keys and flows (429)",
  ],
  [
    "--body-bytes-per-workspace <size>",
    "bodyBytesPerWorkspace",
    "request body bytes held for one workspace (429)",
    true,
  ],
  ["--turns-per-workspace <n>", "turnsPerWorkspace", "turns of one workspace running at once (429)"],
  ["--turns-per-key <n>", "turnsPerKey", "turns of one API key or flow running at once (429)"],
  [
    "--sandbox-commands-per-workspace <n>",
    "sandboxCommandsPerWorkspace",
    "tool calls of one workspace running at once; more wait for a slot",
  ],
  [
    "--disk-bytes-per-workspace <size>",
    "diskBytesPerWorkspace",
    "disk one workspace's conversations, transcripts, forks, files and outputs may take (over it: 429)",
    true,
  ],
  [
    "--pool-connections-per-workspace <n>",
    "poolConnectionsPerWorkspace",
    "PostgreSQL connections one workspace's requests may hold at once; more wait for one of its own",
  ],
  ["--request-timeout-ms <n>", "requestTimeoutMs", "time a request's head and body may take to arrive (408)"],
  ["--headers-timeout-ms <n>", "headersTimeoutMs", "time a request's head may take to arrive (408)"],
];

/** `--requests-per-key` → `requestsPerKey`: commander's name for the flag's value. */
const optionKey = (flag: string) =>
  flag
    .split(" ")[0]
    .slice(2)
    .replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

const toolTimeoutOption = usage("serve", (value: string) => {
  const seconds = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || seconds <= 0 || seconds > 86_400)
    throw new Error(
      `--tool-timeout-seconds must be a number of seconds above 0 and at most 86400, got ${value}`,
    );
  return Math.round(seconds * 1000);
});

function buildProgram(): Command {
  return (
    new Command("agent-api serve")
      .description("Run the reference server of the Agent Conversation API")
      .option("--port <n>", `port to listen on (default ${DEFAULTS.port})`, integer("serve", "--port"))
      .option("--host <host>", `address to listen on (default ${DEFAULTS.host})`)
      .option("--data <dir>", "data directory: SQLite database, sandboxes, demo files", "./.agent-api")
      .option(
        "--store <url>",
        "where conversations are kept: a postgres:// URL (default: $DATABASE_URL, else SQLite in --data)",
      )
      .option(
        "--turn-lease-ms <n>",
        "with a postgres:// store: lease of a conversation's turn lock, how soon a dead instance's conversations are free (default 10000)",
        integer("serve", "--turn-lease-ms"),
      )
      .option(
        "--shutdown-grace-ms <n>",
        "on SIGTERM, how long running turns may go on before they end with an error event (default 10000); set it above your longest turn for rolling restarts",
        integer("serve", "--shutdown-grace-ms"),
      )
      .option("--config <file>", "config file (YAML or JSON); without it the demo workspace is served")
      .option("--demo", "serve the demo workspace (the default without --config)")
      .option(
        "--write-env-file <file>",
        "with the demo: write the AGENT_API_* variables for `agent-api check` here (alias --env-file)",
      )
      .option(
        "--public-url <url>",
        "with the demo: the address clients use, e.g. a balancer's http://lb:8080, as the base URL of --write-env-file and the start-up lines (default this instance's)",
        publicUrlOption,
      )
      .option(
        "--demo-remote <path-or-url>",
        "with the demo: the repository agent's remote; instances behind one balancer name the same one: a path on one machine (the first instance creates it) or a git server's URL (given the demo's first commit when empty) (default <data>/demo/acme-widgets.git)",
      )
      // --env-file is the name users expect, but Node itself claims `--env-file` anywhere on its command line
      // (nodejs/node#54232): under npx/npm it works only once the file exists. The bin/agent-api wrapper
      // renames it; this hidden alias serves a run where Node let it through.
      .addOption(new Option("--env-file <file>").hideHelp())
      .option(
        "--session-delay-ms <n>",
        `delay before agent_session_id is recorded after a stream closes (default ${DEFAULTS.sessionDelayMs})`,
        integer("serve", "--session-delay-ms"),
      )
      .option(
        "--routing-prefix <p>",
        `routing prefix of the model-routed send (default ${DEFAULTS.routingPrefix})`,
      )
      .option("--engine <name>", `agent engine: scripted or anthropic (default ${DEFAULTS.engine})`)
      .option(
        "--sandbox-idle-ms <n>",
        `idle time before a warm sandbox is reclaimed (default ${DEFAULTS.sandboxIdleMs})`,
        integer("serve", "--sandbox-idle-ms"),
      )
      .option(
        "--compaction-budget <tokens>",
        `session history size in tokens that triggers compaction (default ${DEFAULTS.compactionBudgetTokens})`,
        integer("serve", "--compaction-budget"),
      )
      .option(
        "--max-iterations <n>",
        `model calls per turn before the turn is ended (default ${DEFAULTS.maxIterations})`,
        integer("serve", "--max-iterations"),
      )
      .option(
        "--max-tokens <n>",
        `max_tokens of each model call (default ${DEFAULTS.maxTokens})`,
        integer("serve", "--max-tokens"),
      )
      .option(
        "--turn-timeout-ms <n>",
        `wall-clock limit of one turn (default ${DEFAULTS.turnTimeoutMs})`,
        integer("serve", "--turn-timeout-ms"),
      )
      .option(
        "--keep-alive-ms <n>",
        `longest silence on a turn's stream before an SSE comment line; keep it below the idle time-out of any proxy in front (default ${DEFAULTS.keepAliveMs})`,
        integer("serve", "--keep-alive-ms"),
      )
      .option(
        "--cors <origin...>",
        "let browser pages of these origins call the API (e.g. a docs page's Try it console); * allows any",
      )
      .option(
        "--tool-timeout-seconds <n>",
        `wall-clock limit of one run_command call, in seconds (default ${DEFAULTS.toolTimeoutMs / 1000}); a turn quiet for longer than a proxy's idle time-out needs a command that runs that long`,
        toolTimeoutOption,
      )
      .option("--unsafe-no-isolation", "run tools without bubblewrap when it is not available (unsafe)")
      .option(
        "--sandbox-user <who>",
        "host user of tool commands: auto (a uid per conversation when root), UID[:GID], or server (default auto)",
        sandboxUserOption,
      )
      .option(
        "--sandbox-pids <n>",
        `processes of one command (default ${DEFAULT_SANDBOX_LIMITS.pids})`,
        integer("serve", "--sandbox-pids"),
      )
      .option(
        "--sandbox-memory <size>",
        `memory of one command, /tmp and /dev/shm included (default ${DEFAULT_SANDBOX_LIMITS.memoryBytes / MiB}M)`,
        sizeOption,
      )
      .option(
        "--sandbox-cpus <n>",
        `CPUs of one command (default ${DEFAULT_SANDBOX_LIMITS.cpus})`,
        cpusOption,
      )
      .option(
        "--sandbox-disk <size>",
        `disk quota of a conversation's working directory (default ${DEFAULT_SANDBOX_LIMITS.diskBytes / MiB}M)`,
        sizeOption,
      )
      .option(
        "--sandbox-tmp <size>",
        `size of a command's /tmp and of its /dev/shm (default ${DEFAULT_SANDBOX_LIMITS.tmpBytes / MiB}M)`,
        sizeOption,
      )
      .option("--log-level <level>", "pino log level: fatal, error, warn, info, debug, silent", "info")
      .exitOverride()
      .configureOutput({ writeErr: (text) => process.stderr.write(text) })
  );
}

/** Adds the caps' flags (each also settable in the config file's `limits`; a flag wins). */
function withLimitFlags(program: Command): Command {
  for (const [flag, field, what, size] of LIMIT_FLAGS) {
    const fallback = DEFAULT_LIMITS[field];
    const shown = size ? `${fallback / MiB}M` : String(fallback);
    program.option(flag, `${what} (default ${shown})`, size ? sizeOption : positive(flag.split(" ")[0]));
  }
  return program;
}

export async function main(args: string[]): Promise<number> {
  const program = withLimitFlags(buildProgram());
  const exit = parseCommand(program, args, "serve");
  if (exit !== null) return exit;
  const opts = program.opts<Record<string, string | number | boolean | undefined>>();
  if (opts.config !== undefined && opts.demo !== true) {
    const demoOnly = ["--demo-remote", "--public-url"].filter((flag) => opts[optionKey(flag)] !== undefined);
    if (demoOnly.length > 0) {
      process.stderr.write(`agent-api serve: ${demoOnly.join(" and ")} apply to the demo, not to --config\n`);
      return 2;
    }
  }
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer({
      dataDir: String(opts.data),
      store: (opts.store as string | undefined) ?? (process.env.DATABASE_URL || undefined),
      turnLeaseMs: opts.turnLeaseMs as number | undefined,
      shutdownGraceMs: opts.shutdownGraceMs as number | undefined,
      port: opts.port as number | undefined,
      host: opts.host as string | undefined,
      configFile: opts.config as string | undefined,
      demo: opts.demo === true,
      envFile: (opts.writeEnvFile ?? opts.envFile) as string | undefined,
      publicUrl: opts.publicUrl as string | undefined,
      demoRemote: opts.demoRemote as string | undefined,
      sessionDelayMs: opts.sessionDelayMs as number | undefined,
      routingPrefix: opts.routingPrefix as string | undefined,
      engine: opts.engine as string | undefined,
      sandboxIdleMs: opts.sandboxIdleMs as number | undefined,
      compactionBudgetTokens: opts.compactionBudget as number | undefined,
      maxIterations: opts.maxIterations as number | undefined,
      maxTokens: opts.maxTokens as number | undefined,
      turnTimeoutMs: opts.turnTimeoutMs as number | undefined,
      keepAliveMs: opts.keepAliveMs as number | undefined,
      toolTimeoutMs: opts.toolTimeoutSeconds as number | undefined,
      unsafeNoIsolation: opts.unsafeNoIsolation === true,
      sandboxUser: opts.sandboxUser as unknown as SandboxUserSetting | undefined,
      sandboxLimits: {
        ...(opts.sandboxPids === undefined ? {} : { pids: opts.sandboxPids as number }),
        ...(opts.sandboxMemory === undefined ? {} : { memoryBytes: opts.sandboxMemory as number }),
        ...(opts.sandboxCpus === undefined ? {} : { cpus: opts.sandboxCpus as number }),
        ...(opts.sandboxDisk === undefined ? {} : { diskBytes: opts.sandboxDisk as number }),
        ...(opts.sandboxTmp === undefined
          ? {}
          : { tmpBytes: opts.sandboxTmp as number, shmBytes: opts.sandboxTmp as number }),
      },
      logLevel: String(opts.logLevel),
      corsOrigins: opts.cors as unknown as string[] | undefined,
      limits: Object.fromEntries(
        LIMIT_FLAGS.flatMap(([flag, field]) => {
          const value = opts[optionKey(flag)];
          return value === undefined ? [] : [[field, value as number]];
        }),
      ),
    });
  } catch (error) {
    process.stderr.write(`agent-api serve: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  // One write: whoever reads the start-up lines (a supervisor, a test) sees the warnings with them.
  const startup = [
    `Agent Conversation API reference server listening on ${server.url}`,
    `Tool isolation: ${server.isolation}`,
    `Tool user: ${server.sandboxUser}; tool limits (cgroups): ${server.cgroups}`,
    `Store: ${server.store}`,
    ...server.sandboxNotices.map((notice) => `Warning: ${notice}`),
  ];
  process.stdout.write(`${startup.join("\n")}\n`);
  if (Object.keys(server.envVars).length > 0) {
    process.stdout.write(demoSummary(demoKeys, server.envVars.AGENT_API_BASE_URL ?? server.url));
    const envFile = opts.writeEnvFile ?? opts.envFile;
    if (envFile) process.stdout.write(`Wrote the conformance variables to ${envFile}\n`);
  }
  await new Promise<void>((resolveStop) => {
    const stop = () => resolveStop();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  await server.close();
  return 0;
}
