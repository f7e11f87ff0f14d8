/**
 * Starts the reference server: config (file or demo) → store (SQLite in --data) → sandbox → engine →
 * service → HTTP. `startServer` is what `agent-api serve`, the tests and the in-process demo all call.
 */
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { type DestinationStream, pino } from "pino";
import { createKeyIndex } from "./config/keys.ts";
import { loadConfigFile } from "./config/load.ts";
import type { LimitsConfig, ServerConfig } from "./config/types.ts";
import { chooseCoordination } from "./coordination/index.ts";
import { DEFAULT_WAITING_TURN_LIMITS } from "./coordination/locks.ts";
import { seedDemoConversations } from "./demo/conversations.ts";
import { createDemo, demoKeys, formatEnvFile } from "./demo/workspace.ts";
import { createEngine, LOOP_DEFAULTS } from "./engine/index.ts";
import { Admission, DEFAULT_ADMISSION_LIMITS } from "./http/admission.ts";
import { buildApp } from "./http/app.ts";
import { trackListener } from "./http/listener-close.ts";
import { SLOW_CLIENT_DEFAULTS } from "./http/request-limits.ts";
import { KEEP_ALIVE_MS } from "./http/sse.ts";
import { DEFAULT_TURN_SHARE_LIMITS, TurnShares } from "./http/turn-shares.ts";
import {
  createSandboxManager,
  DEFAULT_SANDBOX_LIMITS,
  type SandboxLimits,
  type SandboxUserSetting,
} from "./sandbox/index.ts";
import { DEFAULT_DISK_BYTES_PER_WORKSPACE } from "./service/disk-shares.ts";
import { createService, type ServiceLive } from "./service/index.ts";
import { openServerStore } from "./store/open.ts";
import { DEFAULT_POOL_CONNECTIONS_PER_WORKSPACE } from "./store/pool-shares.ts";

export interface ServerOptions {
  /** Directory of the SQLite database, sandboxes and the demo's files. */
  dataDir: string;
  /**
   * Where conversations are kept: a postgres:// URL (PostgreSQL, which several instances may share), or
   * undefined for SQLite in `dataDir`.
   */
  store?: string;
  /**
   * With a shared store: the lease of a conversation's turn lock, so how long a conversation stays locked
   * after its instance died (default 10 s; the holder renews it every third of it).
   */
  turnLeaseMs?: number;
  port?: number;
  host?: string;
  /** A config file (YAML or JSON); without it the demo is served. */
  configFile?: string;
  demo?: boolean;
  /** Delay between a stream closing and `agent_session_id` being recorded (default 2000 ms). */
  sessionDelayMs?: number;
  routingPrefix?: string;
  engine?: string;
  logLevel?: string;
  /** Where the JSON log lines go (default stdout); tests read a turn's failure code from them. */
  logDestination?: DestinationStream;
  /** Idle time after which a warm sandbox is reclaimed (files persist). */
  sandboxIdleMs?: number;
  unsafeNoIsolation?: boolean;
  /** Host user of tool commands (see sandbox/sandbox-user.ts); default "auto". */
  sandboxUser?: SandboxUserSetting;
  /** Per-command and per-conversation sandbox limits; unset fields keep their defaults. */
  sandboxLimits?: Partial<SandboxLimits>;
  /** Session history size (tokens) above which a turn first compacts it. */
  compactionBudgetTokens?: number;
  /** Model calls per turn before the loop ends it (stop reason `max_iterations`). */
  maxIterations?: number;
  /** `max_tokens` of each model call (a model's config entry may set its own). */
  maxTokens?: number;
  /** Longest silence on a turn's stream before an SSE comment line is sent. */
  keepAliveMs?: number;
  /** Caps on pending work and slow clients; each set field wins over the config file's `limits`. */
  limits?: LimitsConfig;
  /** How long a shutdown waits for running turns before ending them with an error event. */
  shutdownGraceMs?: number;
  turnTimeoutMs?: number;
  toolTimeoutMs?: number;
  toolOutputCapBytes?: number;
  /** How long a turn's client may leave events unread before it is dropped (default 30 s). */
  sseStallMs?: number;
  /** Browser origins allowed to call the API (CORS); `*` allows any. Unset: no CORS. */
  corsOrigins?: string[];
  /**
   * SQLite WAL checkpoints run by a worker thread this often (ms), off the event loop; 0: inside commits, as
   * SQLite does by default (see store/sqlite/index.ts).
   */
  checkpointIntervalMs?: number;
  /** Write the AGENT_API_* variables for the conformance suite here (demo only). */
  envFile?: string;
  /**
   * The demo repository agent's remote: a path (instances on one machine share it; the first creates it) or
   * a git URL (given the demo's initial commit when empty). Default: a bare repository in `dataDir`.
   */
  demoRemote?: string;
  /**
   * The address clients use (a balancer's, e.g. http://lb:8080): the base URL of the AGENT_API_* variables
   * and of the demo's start-up lines. Default: this instance's own URL.
   */
  publicUrl?: string;
}

export interface RunningServer {
  url: string;
  /** AGENT_API_* variables that point the conformance suite at this server (demo only, else {}). */
  envVars: Record<string, string>;
  isolation: "bwrap" | "none" | "unavailable";
  /** Who tool commands run as, which cgroups bound them, and what the host weakens (start-up lines). */
  sandboxUser: "per-conversation" | "fixed" | "server";
  cgroups: "v1" | "v2" | "none";
  sandboxNotices: string[];
  /** The store's engine and where it is (no credentials), for the start-up lines. */
  store: string;
  config: ServerConfig;
  /** Per-request, per-turn and per-conversation state held right now (tests and benches check it drains to 0). */
  live(): ServiceLive & { requestsInFlight: number; bodyBytesHeld: number };
  close(): Promise<void>;
}

/**
 * At a shutdown, how long a connection accepted just before the listener closed may take to bring its
 * request (a balancer's request on its way); one that brings none by then is closed.
 */
const FRESH_CONNECTION_WAIT_MS = 1_000;

/** After the grace period: time for the interrupted turns to send their error event before sockets close. */
const FORCE_CLOSE_AFTER_GRACE_MS = 1_000;

export const DEFAULTS = {
  port: 3001,
  host: "127.0.0.1",
  sessionDelayMs: 2000,
  routingPrefix: "agent-api",
  engine: "scripted",
  sandboxIdleMs: 5 * 60_000,
  compactionBudgetTokens: 6_000,
  // The loop's own defaults (engine/loop.ts), named here for the CLI's help.
  maxIterations: LOOP_DEFAULTS.maxIterations,
  maxTokens: LOOP_DEFAULTS.maxTokens,
  keepAliveMs: KEEP_ALIVE_MS,
  shutdownGraceMs: 10_000,
  turnTimeoutMs: 10 * 60_000,
  toolTimeoutMs: 30_000,
  toolOutputCapBytes: 64 * 1024,
  checkpointIntervalMs: 100,
} as const;

/** Caps on pending work and slow clients (README "Limits under load"). */
export const DEFAULT_LIMITS: Required<LimitsConfig> = {
  ...DEFAULT_ADMISSION_LIMITS,
  ...DEFAULT_TURN_SHARE_LIMITS,
  sandboxCommandsPerWorkspace: DEFAULT_SANDBOX_LIMITS.commandsPerWorkspace,
  waitingTurnsPerConversation: DEFAULT_WAITING_TURN_LIMITS.perConversation,
  waitingTurnsPerKey: DEFAULT_WAITING_TURN_LIMITS.perKey,
  waitingTurnsPerServer: DEFAULT_WAITING_TURN_LIMITS.perServer,
  ...SLOW_CLIENT_DEFAULTS,
  diskBytesPerWorkspace: DEFAULT_DISK_BYTES_PER_WORKSPACE,
  poolConnectionsPerWorkspace: DEFAULT_POOL_CONNECTIONS_PER_WORKSPACE,
};

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const dataDir = resolve(options.dataDir);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  // Sandbox users must pass through the data directory to reach their working directory (bubblewrap binds
  // it as them): search only, no listing; what lies inside is private to the server by its own mode.
  await chmod(dataDir, 0o711);
  const routingPrefix = options.routingPrefix ?? DEFAULTS.routingPrefix;
  const logLevel = { level: options.logLevel ?? "info" };
  const logger = options.logDestination ? pino(logLevel, options.logDestination) : pino(logLevel);

  const useDemo = options.demo === true || options.configFile === undefined;
  const demo = useDemo
    ? await createDemo(dataDir, {
        baseUrl: "http://placeholder",
        routingPrefix,
        remote: options.demoRemote,
      })
    : undefined;
  const config = demo ? demo.config : await loadConfigFile(options.configFile as string);

  const engine = createEngine(options.engine ?? DEFAULTS.engine, {
    maxIterations: options.maxIterations ?? DEFAULTS.maxIterations,
    maxTokens: options.maxTokens ?? DEFAULTS.maxTokens,
  });
  const limits: Required<LimitsConfig> = { ...DEFAULT_LIMITS, ...config.limits, ...defined(options.limits) };
  const { store, description: storeDescription } = await openServerStore(
    options.store,
    dataDir,
    { checkpointIntervalMs: options.checkpointIntervalMs ?? DEFAULTS.checkpointIntervalMs },
    { connectionsPerWorkspace: limits.poolConnectionsPerWorkspace },
  );
  if (demo) await seedDemoConversations(store);
  const serviceOptions = {
    sessionDelayMs: options.sessionDelayMs ?? DEFAULTS.sessionDelayMs,
    routingPrefix,
    compactionBudgetTokens: options.compactionBudgetTokens ?? DEFAULTS.compactionBudgetTokens,
    turnTimeoutMs: options.turnTimeoutMs ?? DEFAULTS.turnTimeoutMs,
    turnLeaseMs: options.turnLeaseMs,
    diskBytesPerWorkspace: limits.diskBytesPerWorkspace,
    waitingTurns: {
      perConversation: limits.waitingTurnsPerConversation,
      perKey: limits.waitingTurnsPerKey,
      perServer: limits.waitingTurnsPerServer,
    },
  };
  // One instance or several: decided here, once.
  const coordination = chooseCoordination(store, serviceOptions);
  const sandbox = await createSandboxManager({
    rootDir: join(dataDir, "sandboxes"),
    idleMs: options.sandboxIdleMs ?? DEFAULTS.sandboxIdleMs,
    unsafeNoIsolation: options.unsafeNoIsolation === true,
    toolTimeoutMs: options.toolTimeoutMs ?? DEFAULTS.toolTimeoutMs,
    toolOutputCapBytes: options.toolOutputCapBytes ?? DEFAULTS.toolOutputCapBytes,
    sandboxUser: options.sandboxUser,
    limits: { ...options.sandboxLimits, commandsPerWorkspace: limits.sandboxCommandsPerWorkspace },
    // Several instances: conversations' files live in the shared store, and --data holds a cache of them.
    fileStore: coordination.kind === "shared" ? coordination.files : undefined,
  });
  for (const notice of sandbox.notices) logger.warn(notice);
  if (sandbox.isolation === "unavailable") {
    logger.warn(
      `bubblewrap (bwrap) is not usable here: tools are refused. ${sandbox.isolationProblem ?? "Install it (apt-get install bubblewrap)"}; or start with --unsafe-no-isolation`,
    );
  } else if (sandbox.isolation === "none") {
    logger.warn(
      "--unsafe-no-isolation: tools run WITHOUT isolation (they can read the file system and the network)",
    );
  }

  const keys = createKeyIndex(config);
  const service = await createService(
    { config, store, sandbox, engine, options: serviceOptions },
    keys.lookupFlowKey,
    coordination,
  );
  const admission = new Admission(limits);
  const app = buildApp({
    config,
    keys,
    service,
    routingPrefix,
    logger,
    sseStallMs: options.sseStallMs,
    corsOrigins: options.corsOrigins,
    keepAliveMs: options.keepAliveMs ?? DEFAULTS.keepAliveMs,
    admission,
    turnShares: new TurnShares(limits),
    requestTimeoutMs: limits.requestTimeoutMs,
    headersTimeoutMs: limits.headersTimeoutMs,
  });
  const listener = trackListener(app.server);
  let closed = false;
  const closeAll = async () => {
    if (closed) return;
    closed = true;
    // Running turns get a grace period to finish; past it they end with an error event, so a stuck client
    // or tool cannot hold the shutdown (and with it a restart) for ever.
    let forced: NodeJS.Timeout | undefined;
    const grace = setTimeout(() => {
      service.turns.interruptAll("AGENT_API_SERVER_STOPPING");
      // What is still open a moment later is no turn: a request whose body never finished arriving (a hung
      // client, a proxy that lost its own). Node would wait up to its 300 s request timeout for it.
      forced = setTimeout(() => app.server.closeAllConnections(), FORCE_CLOSE_AFTER_GRACE_MS);
    }, options.shutdownGraceMs ?? DEFAULTS.shutdownGraceMs);
    await listener.closeListener(FRESH_CONNECTION_WAIT_MS);
    await app.close();
    clearTimeout(grace);
    clearTimeout(forced);
    await service.close();
    await sandbox.close();
    await store.close();
  };
  try {
    await app.listen({ port: options.port ?? DEFAULTS.port, host: options.host ?? DEFAULTS.host });
  } catch (error) {
    await closeAll();
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  const host = options.host ?? DEFAULTS.host;
  const url = `http://${host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host}:${port}`;

  const publicUrl = options.publicUrl ?? url;
  const envVars: Record<string, string> = demo
    ? { ...demo.envVars, AGENT_API_BASE_URL: publicUrl, AGENT_API_FLOW_URL: publicUrl }
    : {};
  if (options.envFile && demo) await writeFile(options.envFile, formatEnvFile(envVars));
  return {
    url,
    envVars,
    isolation: sandbox.isolation,
    sandboxUser: sandbox.sandboxUser,
    cgroups: sandbox.cgroups,
    sandboxNotices: sandbox.notices,
    store: storeDescription,
    config,
    live: () => ({ ...service.live(), ...admission.live() }),
    close: closeAll,
  };
}

/** The fields of `object` that are set (a flag left out must not erase the config file's value). */
function defined<T extends object>(object: T | undefined): Partial<T> {
  return Object.fromEntries(Object.entries(object ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export { demoKeys };
