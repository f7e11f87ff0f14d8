/**
 * Reads the config file (YAML or JSON, by extension), checks it against configFileSchema, cross-checks
 * the references between entries, and maps it to ServerConfig. Plaintext keys are hashed here and dropped.
 * Every problem is reported at once, each line naming its place in the file (e.g. `agents[1].workspace`).
 */
import { readFile } from "node:fs/promises";
import { dirname, extname, isAbsolute, resolve } from "node:path";
import { Ajv, type ErrorObject } from "ajv";
import { parse as parseYaml } from "yaml";
import { hashKey } from "./keys.ts";
import { type ConfigFile, configFileSchema } from "./schema.ts";
import type {
  AgentConfig,
  ApiKeyConfig,
  FlowConfig,
  LimitsConfig,
  ModelConfig,
  ServerConfig,
  WorkspaceConfig,
} from "./types.ts";

/** A config file that cannot be used; `issues` holds one readable line per problem. */
export class ConfigError extends Error {
  readonly issues: string[];
  constructor(source: string, issues: string[]) {
    super(`invalid config ${source}:\n${issues.map((issue) => `  - ${issue}`).join("\n")}`);
    this.name = "ConfigError";
    this.issues = issues;
  }
}

const validateFile = new Ajv({ allErrors: true, strict: true }).compile<ConfigFile>(configFileSchema);

/** `/agents/0/models/1/id` → `agents[0].models[1].id`. */
function readablePath(pointer: string): string {
  const parts = pointer
    .split("/")
    .slice(1)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  let out = "";
  for (const part of parts) out += /^\d+$/.test(part) ? `[${part}]` : out === "" ? part : `.${part}`;
  return out === "" ? "(top level)" : out;
}

/** Patterns of configFileSchema in words, for error messages. */
const patternMeaning: Record<string, string> = {
  "^[^\\s/]+$": 'must be a name without spaces or "/"',
  "^[0-9a-fA-F]{64}$": "must be 64 hex digits (a SHA-256)",
  "^[A-Za-z_][A-Za-z0-9_]*$": "must be letters, digits and _ (not starting with a digit)",
};

function schemaIssue(error: ErrorObject): string {
  const at = readablePath(error.instancePath);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case "additionalProperties":
      return `${at}: unknown property "${String(params.additionalProperty)}"`;
    case "required":
      return `${at}: missing property "${String(params.missingProperty)}"`;
    case "enum":
      return `${at}: must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}`;
    case "pattern":
      return `${at}: ${patternMeaning[String(params.pattern)] ?? `must match ${String(params.pattern)}`}`;
    case "propertyNames":
      return `${at}: property name "${String(params.propertyName)}" is not a valid name`;
    default:
      return `${at}: ${error.message ?? "is invalid"}`;
  }
}

/** Paths that look like local paths resolve against the config file's directory; URLs stay as written. */
function resolveLocation(value: string, baseDir: string): string {
  const looksLikeUrl = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) || /^[^/\\@]+@[^/\\]+:/.test(value);
  return looksLikeUrl || isAbsolute(value) ? value : resolve(baseDir, value);
}

const repoAgentName = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const templateVariable = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** Validates an already-parsed config object and maps it to ServerConfig; throws ConfigError. */
export function parseConfig(raw: unknown, baseDir: string, source = "(inline)"): ServerConfig {
  if (!validateFile(raw)) {
    throw new ConfigError(source, (validateFile.errors ?? []).map(schemaIssue));
  }
  const file = raw;
  const issues: string[] = [];

  const workspaces = new Map<string, WorkspaceConfig>();
  file.workspaces.forEach((ws, i) => {
    if (workspaces.has(ws.id)) issues.push(`workspaces[${i}].id: duplicate workspace "${ws.id}"`);
    const members = new Set<string>();
    ws.members.forEach((m, j) => {
      if (members.has(m.id)) issues.push(`workspaces[${i}].members[${j}].id: duplicate member "${m.id}"`);
      members.add(m.id);
    });
    workspaces.set(ws.id, {
      id: ws.id,
      name: ws.name ?? ws.id,
      members: ws.members.map((m) => ({ id: m.id, name: m.name ?? m.id })),
    });
  });
  const checkWorkspace = (at: string, id: string): boolean => {
    if (workspaces.has(id)) return true;
    issues.push(`${at}.workspace: unknown workspace "${id}"`);
    return false;
  };
  const checkMember = (at: string, workspaceId: string, memberId: string): void => {
    if (!workspaces.get(workspaceId)?.members.some((m) => m.id === memberId)) {
      issues.push(`${at}: unknown member "${memberId}" in workspace "${workspaceId}"`);
    }
  };
  const secretHash = (at: string, entry: { key?: string; key_sha256?: string }): string => {
    if ((entry.key === undefined) === (entry.key_sha256 === undefined)) {
      issues.push(`${at}: give exactly one of "key" (plaintext) or "key_sha256"`);
      return "";
    }
    return entry.key !== undefined ? hashKey(entry.key) : (entry.key_sha256 as string).toLowerCase();
  };

  const keys: ApiKeyConfig[] = [];
  const keyHashes = new Map<string, number>();
  (file.keys ?? []).forEach((k, i) => {
    const at = `keys[${i}]`;
    const hash = secretHash(at, k);
    if (checkWorkspace(at, k.workspace)) checkMember(`${at}.member`, k.workspace, k.member);
    if (hash !== "") {
      const first = keyHashes.get(hash);
      if (first !== undefined) issues.push(`${at}: same key as keys[${first}]`);
      else keyHashes.set(hash, i);
    }
    keys.push({
      hash,
      label: k.label ?? `${k.workspace}/${k.member}/${k.role}`,
      workspaceId: k.workspace,
      memberId: k.member,
      role: k.role,
      revoked: k.revoked ?? false,
    });
  });

  const agents: AgentConfig[] = [];
  const agentsByName = new Map<string, AgentConfig>();
  (file.agents ?? []).forEach((a, i) => {
    const at = `agents[${i}]`;
    checkWorkspace(at, a.workspace);
    if (agentsByName.has(a.name))
      issues.push(`${at}.name: duplicate agent name "${a.name}" (names are unique across workspaces)`);
    if (a.kind === "repo" && !repoAgentName.test(a.name)) {
      issues.push(
        `${at}.name: repo agent "${a.name}" must be lowercase letters, digits and "-" (like <owner>-<repo>)`,
      );
    }
    if (a.kind === "repo" && a.repo_url === undefined) issues.push(`${at}: repo agent needs "repo_url"`);
    if (a.kind === "storage" && a.repo_url !== undefined)
      issues.push(`${at}.repo_url: only repo agents have a repository`);

    const models: ModelConfig[] = (a.models ?? []).map((m) => ({
      id: m.id,
      display_name: m.display_name ?? m.id,
      ...(m.upstream !== undefined ? { upstream: m.upstream } : {}),
      ...(m.price !== undefined
        ? {
            price: {
              input: m.price.input,
              output: m.price.output,
              cache_read: m.price.cache_read ?? m.price.input * 0.1,
              cache_write: m.price.cache_write ?? m.price.input * 1.25,
            },
          }
        : {}),
      ...(m.thinking_budget_tokens !== undefined ? { thinkingBudgetTokens: m.thinking_budget_tokens } : {}),
      ...(m.max_tokens !== undefined ? { maxTokens: m.max_tokens } : {}),
      ...(m.created_at !== undefined ? { created_at: m.created_at } : {}),
    }));
    const modelIds = new Set<string>();
    models.forEach((m, j) => {
      if (m.created_at !== undefined) {
        const time = Date.parse(m.created_at);
        if (Number.isNaN(time)) issues.push(`${at}.models[${j}].created_at: "${m.created_at}" is not a date`);
        else m.created_at = new Date(time).toISOString();
      }
      if (modelIds.has(m.id)) issues.push(`${at}.models[${j}].id: duplicate model "${m.id}"`);
      modelIds.add(m.id);
    });
    // The default model is always offered; listing it under `models` is optional.
    if (!modelIds.has(a.default_model)) {
      models.unshift({ id: a.default_model, display_name: a.default_model });
      modelIds.add(a.default_model);
    }
    const automationNames = new Set<string>();
    (a.automations ?? []).forEach((auto, j) => {
      if (automationNames.has(auto.name))
        issues.push(`${at}.automations[${j}].name: duplicate automation "${auto.name}"`);
      automationNames.add(auto.name);
      if (auto.model !== undefined && !modelIds.has(auto.model)) {
        issues.push(`${at}.automations[${j}].model: "${auto.model}" is not one of the agent's models`);
      }
    });

    const agent: AgentConfig = {
      name: a.name,
      workspaceId: a.workspace,
      kind: a.kind,
      defaultModel: a.default_model,
      models,
      instructions: a.instructions ?? "",
      ...(a.thinking_budget_tokens !== undefined ? { thinkingBudgetTokens: a.thinking_budget_tokens } : {}),
      automations: (a.automations ?? []).map((auto) => ({
        name: auto.name,
        prompt: auto.prompt,
        ...(auto.model !== undefined ? { model: auto.model } : {}),
        active: auto.active ?? true,
      })),
      secrets: { ...(a.secrets ?? {}) },
      ...(a.repo_url !== undefined ? { repoUrl: resolveLocation(a.repo_url, baseDir) } : {}),
      ...(a.files_dir !== undefined ? { filesDir: resolve(baseDir, a.files_dir) } : {}),
    };
    agents.push(agent);
    agentsByName.set(a.name, agent);
  });

  const flows: FlowConfig[] = [];
  const flowIds = new Set<string>();
  (file.flows ?? []).forEach((f, i) => {
    const at = `flows[${i}]`;
    if (flowIds.has(f.id)) issues.push(`${at}.id: duplicate flow "${f.id}"`);
    flowIds.add(f.id);
    if (checkWorkspace(at, f.workspace)) checkMember(`${at}.run_as`, f.workspace, f.run_as);
    const inputs = f.inputs ?? [];
    const known = new Set(inputs);
    inputs.forEach((name, j) => {
      if (name === "previous")
        issues.push(`${at}.inputs[${j}]: "previous" is reserved for the previous step's output`);
      if (inputs.indexOf(name) !== j) issues.push(`${at}.inputs[${j}]: duplicate input "${name}"`);
    });
    f.steps.forEach((step, j) => {
      const agent = agentsByName.get(step.agent);
      if (!agent) issues.push(`${at}.steps[${j}].agent: unknown agent "${step.agent}"`);
      else if (agent.workspaceId !== f.workspace) {
        issues.push(`${at}.steps[${j}].agent: agent "${step.agent}" is not in workspace "${f.workspace}"`);
      }
      for (const [, name] of step.prompt.matchAll(templateVariable)) {
        if (name === "previous" && j === 0) {
          issues.push(`${at}.steps[${j}].prompt: the first step has no {{previous}}`);
        } else if (name !== "previous" && !known.has(name)) {
          issues.push(`${at}.steps[${j}].prompt: {{${name}}} is not one of the flow's inputs`);
        }
      }
    });
    const hashes: string[] = [];
    f.keys.forEach((k, j) => {
      const hash = secretHash(`${at}.keys[${j}]`, k);
      if (hash === "") return;
      if (hashes.includes(hash)) issues.push(`${at}.keys[${j}]: duplicate flow key`);
      else hashes.push(hash);
    });
    flows.push({
      id: f.id,
      workspaceId: f.workspace,
      inputs,
      steps: f.steps.map((s) => ({ name: s.name, agent: s.agent, prompt: s.prompt })),
      keyHashes: hashes,
      runAsMemberId: f.run_as,
    });
  });

  if (issues.length > 0) throw new ConfigError(source, issues);
  const config: ServerConfig = { workspaces: [...workspaces.values()], keys, agents, flows };
  if (file.limits) config.limits = limitsOf(file.limits);
  return config;
}

function limitsOf(file: NonNullable<ConfigFile["limits"]>): LimitsConfig {
  const limits: LimitsConfig = {
    requestsPerServer: file.requests_per_server,
    requestsPerKey: file.requests_per_key,
    bodyBytesPerServer: file.body_bytes_per_server,
    bodyBytesPerKey: file.body_bytes_per_key,
    waitingTurnsPerConversation: file.waiting_turns_per_conversation,
    waitingTurnsPerKey: file.waiting_turns_per_key,
    waitingTurnsPerServer: file.waiting_turns_per_server,
    requestTimeoutMs: file.request_timeout_ms,
    headersTimeoutMs: file.headers_timeout_ms,
    requestsPerWorkspace: file.requests_per_workspace,
    bodyBytesPerWorkspace: file.body_bytes_per_workspace,
    turnsPerWorkspace: file.turns_per_workspace,
    turnsPerKey: file.turns_per_key,
    sandboxCommandsPerWorkspace: file.sandbox_commands_per_workspace,
    diskBytesPerWorkspace: file.disk_bytes_per_workspace,
    poolConnectionsPerWorkspace: file.pool_connections_per_workspace,
  };
  return Object.fromEntries(Object.entries(limits).filter(([, v]) => v !== undefined));
}

/** Reads `path` (`.yaml`, `.yml` or `.json`) and returns the validated ServerConfig; throws ConfigError. */
export async function loadConfigFile(path: string): Promise<ServerConfig> {
  const extension = extname(path).toLowerCase();
  if (![".yaml", ".yml", ".json"].includes(extension)) {
    throw new ConfigError(path, [`unsupported file extension "${extension}" (use .yaml, .yml or .json)`]);
  }
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new ConfigError(path, [`cannot read the file: ${(error as Error).message}`]);
  }
  let raw: unknown;
  try {
    raw = extension === ".json" ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    const kind = extension === ".json" ? "JSON" : "YAML";
    throw new ConfigError(path, [`not valid ${kind}: ${(error as Error).message.split("\n")[0]}`]);
  }
  return parseConfig(raw, dirname(resolve(path)), path);
}
