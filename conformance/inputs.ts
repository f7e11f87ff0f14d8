/**
 * Turns flags and AGENT_API_* environment variables into SuiteInputs. Each flag `--some-flag` also reads
 * `AGENT_API_SOME_FLAG`, so the env file the reference server's `--demo --env-file` writes works as is.
 */
import type { ExploreOptions } from "./explorer/explore.ts";
import { REQUEST_TIMEOUT_MS } from "./http.ts";
import { DEFAULT_CONCURRENCY } from "./runner.ts";
import type { InputName, SuiteInputs } from "./types.ts";

export { DEFAULT_CONCURRENCY };

/** The flag that provides each optional input (skip reasons name it). */
export const INPUT_FLAGS: Record<InputName, string> = {
  memberKey: "--member-key",
  viewerKey: "--viewer-key",
  revokedKey: "--revoked-key",
  foreignAgent: "--foreign-agent",
  foreignKey: "--foreign-key",
  automation: "--automation",
  storageAgent: "--storage-agent",
  repoAgent: "--repo-agent",
  repoUrl: "--repo-url",
  flowUrl: "--flow-url",
  flowId: "--flow-id",
  flowKey: "--flow-key",
  flowInput: "--flow-input",
  routingPrefix: "--routing-prefix",
  channelId: "--channel-id",
  notebookPath: "--notebook-path",
  idleSeconds: "--idle-seconds",
};

/** `--idle-seconds` given without a value: a common proxy idle time-out (nginx's proxy_read_timeout). */
export const DEFAULT_IDLE_SECONDS = 60;

/** A skip reason's name for a missing input, for a run started from flags. */
export const inputFlag = (name: InputName): string => INPUT_FLAGS[name];

/** `--member-key` → `AGENT_API_MEMBER_KEY`; `--key` → `AGENT_API_KEY`. */
export function envNameOf(flag: string): string {
  return `AGENT_API_${flag.replace(/^--/, "").replaceAll("-", "_").toUpperCase()}`;
}

/** `--member-key` → `memberKey`. */
export function camelOf(flag: string): string {
  return flag.replace(/^--/, "").replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

export const DEFAULT_SESSION_WAIT_MS = 15_000;

/** Bound of one request (a whole turn), unless `--timeout-ms` says otherwise. */
export const DEFAULT_TIMEOUT_MS = REQUEST_TIMEOUT_MS;

export interface RunSettings {
  concurrency: number;
  timeoutMs: number;
  /** `--max-turns`: the turns a run may send; absent, no bound. */
  maxTurns?: number;
}

/** A flag's value, else its environment variable (empty strings count as not given). */
export function flagOrEnv(
  values: Record<string, unknown>,
  flag: string,
  env: Record<string, string | undefined>,
): string | string[] | undefined {
  const given = values[camelOf(flag)];
  if (Array.isArray(given) && given.length > 0) return given.map(String);
  if (typeof given === "string" && given !== "") return given;
  const fromEnv = env[envNameOf(flag)];
  return fromEnv === undefined || fromEnv === "" ? undefined : fromEnv;
}

/** `name=value` pairs from a flag list or an env value holding one pair (or several, comma-separated). */
export function flowPairs(value: string | string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  if (Array.isArray(value)) return value;
  const parts = value.split(",");
  return parts.every((p) => p.includes("=")) ? parts : [value];
}

export class UsageError extends Error {}

/**
 * A service address without its trailing slashes, so that `${url}/api/...` has one slash: the base and the
 * flow address alike (`http://host:3001//` and `http://host:3001` name the same service).
 */
export function normalisedUrl(url: string): string {
  return url.replace(/(?<!\/)\/+$/, "");
}

/** Builds the inputs; throws UsageError for missing or malformed required values. */
export function resolveInputs(
  values: Record<string, unknown>,
  env: Record<string, string | undefined>,
): SuiteInputs {
  const get = (flag: string): string | undefined => {
    const v = flagOrEnv(values, flag, env);
    return Array.isArray(v) ? v[v.length - 1] : v;
  };
  const baseUrl = get("--base-url");
  const agent = get("--agent");
  const key = get("--key");
  const missing = [
    ["--base-url", baseUrl],
    ["--agent", agent],
    ["--key", key],
  ].filter(([, v]) => !v);
  if (missing.length > 0) {
    throw new UsageError(`missing ${missing.map(([f]) => `${f} (or ${envNameOf(f as string)})`).join(", ")}`);
  }
  try {
    new URL(baseUrl as string);
  } catch {
    throw new UsageError(`--base-url ${JSON.stringify(baseUrl)} is not a URL`);
  }
  const flowUrl = get("--flow-url");
  const waitText = get("--session-wait-ms");
  const sessionWaitMs = waitText === undefined ? DEFAULT_SESSION_WAIT_MS : Number(waitText);
  if (!Number.isInteger(sessionWaitMs) || sessionWaitMs < 0) {
    throw new UsageError(`--session-wait-ms must be a non-negative integer, not ${JSON.stringify(waitText)}`);
  }
  return {
    baseUrl: normalisedUrl(baseUrl as string),
    agent: agent as string,
    key: key as string,
    memberKey: get("--member-key"),
    viewerKey: get("--viewer-key"),
    revokedKey: get("--revoked-key"),
    foreignAgent: get("--foreign-agent"),
    foreignKey: get("--foreign-key"),
    automation: get("--automation"),
    storageAgent: get("--storage-agent"),
    repoAgent: get("--repo-agent"),
    repoUrl: get("--repo-url"),
    flowUrl: flowUrl === undefined ? undefined : normalisedUrl(flowUrl),
    flowId: get("--flow-id"),
    flowKey: get("--flow-key"),
    flowInput: flowPairs(flagOrEnv(values, "--flow-input", env)),
    routingPrefix: get("--routing-prefix"),
    channelId: get("--channel-id"),
    notebookPath: get("--notebook-path"),
    idleSeconds: idleSecondsOf(values, env),
    sessionWaitMs,
  };
}

/** `--idle-seconds [n]`: absent → undefined (the check is skipped), bare flag → the default. */
function idleSecondsOf(
  values: Record<string, unknown>,
  env: Record<string, string | undefined>,
): number | undefined {
  if (values.idleSeconds === true) return DEFAULT_IDLE_SECONDS;
  const v = flagOrEnv(values, "--idle-seconds", env);
  const text = Array.isArray(v) ? v[v.length - 1] : v;
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > 3600) {
    throw new UsageError(
      `--idle-seconds must be a whole number of seconds from 1 to 3600, not ${JSON.stringify(text)}`,
    );
  }
  return n;
}

/** `--concurrency` and `--timeout-ms` (or their AGENT_API_* variables); throws UsageError when malformed. */
export function resolveRunSettings(
  values: Record<string, unknown>,
  env: Record<string, string | undefined>,
): RunSettings {
  const positive = (flag: string, fallback: number): number => {
    const v = flagOrEnv(values, flag, env);
    const text = Array.isArray(v) ? v[v.length - 1] : v;
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) {
      throw new UsageError(`${flag} must be a positive integer, not ${JSON.stringify(text)}`);
    }
    return n;
  };
  const maxTurnsValue = flagOrEnv(values, "--max-turns", env);
  const maxTurnsText = Array.isArray(maxTurnsValue) ? maxTurnsValue[maxTurnsValue.length - 1] : maxTurnsValue;
  let maxTurns: number | undefined;
  if (maxTurnsText !== undefined) {
    maxTurns = Number(maxTurnsText);
    if (!/^\d+$/.test(maxTurnsText) || !Number.isSafeInteger(maxTurns)) {
      throw new UsageError(
        `--max-turns must be a whole number of turns (0 runs no turn), not ${JSON.stringify(maxTurnsText)}`,
      );
    }
  }
  return {
    concurrency: positive("--concurrency", DEFAULT_CONCURRENCY),
    timeoutMs: positive("--timeout-ms", DEFAULT_TIMEOUT_MS),
    ...(maxTurns !== undefined && { maxTurns }),
  };
}

/**
 * Sequences `agent-api check` explores by default: on the demo about 5 s (the named checks take about 10 s);
 * a slower deployment is held to DEFAULT_EXPLORE_TIME_MS instead, whatever the count.
 */
export const DEFAULT_EXPLORE_RUNS = 150;
/** Bound of a default exploration, shrinking included (a deployment on a real model is slower). */
export const DEFAULT_EXPLORE_TIME_MS = 90_000;

/**
 * `--explore <n>` and `--seed <s>` (or their AGENT_API_* variables). By default a run explores
 * DEFAULT_EXPLORE_RUNS sequences from a fresh seed; a run restricted with --only explores only when asked.
 */
export function resolveExplore(
  values: Record<string, unknown>,
  env: Record<string, string | undefined>,
  restricted: boolean,
  freshSeed: () => number = () => Math.floor(Math.random() * 2 ** 31),
): ExploreOptions {
  const text = (flag: string) => {
    const v = flagOrEnv(values, flag, env);
    return Array.isArray(v) ? v[v.length - 1] : v;
  };
  const runsText = text("--explore");
  const seedText = text("--seed");
  if (runsText !== undefined && !/^\d{1,6}$/.test(runsText)) {
    throw new UsageError(
      `--explore must be a number of sequences (0 to turn the explorer off), not ${JSON.stringify(runsText)}`,
    );
  }
  if (seedText !== undefined && !/^-?\d{1,10}$/.test(seedText)) {
    throw new UsageError(`--seed must be an integer, not ${JSON.stringify(seedText)}`);
  }
  const runs = runsText !== undefined ? Number(runsText) : restricted ? 0 : DEFAULT_EXPLORE_RUNS;
  return {
    runs,
    seed: seedText !== undefined ? Number(seedText) | 0 : freshSeed(),
    timeLimitMs: DEFAULT_EXPLORE_TIME_MS,
  };
}
