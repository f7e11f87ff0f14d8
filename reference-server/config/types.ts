/**
 * The server's configuration after loading (from --config YAML/JSON or the --demo seed).
 * Keys exist here only as SHA-256 hashes; the plaintext never leaves the loader.
 */

export type Role = "Admin" | "Builder" | "Operator" | "Viewer";

export interface MemberConfig {
  id: string;
  name: string;
}

export interface ApiKeyConfig {
  /** Hex SHA-256 of the key. */
  hash: string;
  /** Short non-secret label for logs, e.g. "admin-demo". */
  label: string;
  workspaceId: string;
  memberId: string;
  role: Role;
  revoked: boolean;
}

export interface AutomationConfig {
  name: string;
  prompt: string;
  model?: string;
  active: boolean;
}

export interface ModelConfig {
  id: string;
  display_name: string;
  /** Model name sent upstream; the id itself when absent. */
  upstream?: string;
  /** US dollars per million tokens; the server's default price when absent. */
  price?: { input: number; output: number; cache_read: number; cache_write: number };
  /** Extended thinking budget of turns on this model (wins over the agent's). */
  thinkingBudgetTokens?: number;
  /** `max_tokens` of each call on this model (wins over the server's). */
  maxTokens?: number;
  /** The models list's `created_at` (ISO 8601, UTC, milliseconds); MODEL_CREATED_AT_UNKNOWN when not configured. */
  created_at?: string;
}

export interface AgentConfig {
  name: string;
  workspaceId: string;
  kind: "storage" | "repo";
  defaultModel: string;
  /** Models offered by the models list; the default model is listed first whatever the order here. */
  models: ModelConfig[];
  instructions: string;
  /** Extended thinking budget of this agent's turns; off when absent. */
  thinkingBudgetTokens?: number;
  automations: AutomationConfig[];
  secrets: Record<string, string>;
  /** repo agents: git URL of the repository (the demo creates a local bare repository). */
  repoUrl?: string;
  /** storage agents: directory of the agent's working files (restored fresh each turn). */
  filesDir?: string;
}

export interface FlowStepConfig {
  name: string;
  agent: string;
  /** Template over input variables `{{var}}` and the previous step's output `{{previous}}`. */
  prompt: string;
}

export interface FlowConfig {
  /** The deployed flow's id, as in POST {flow_url}/apps/{app_id}. */
  id: string;
  workspaceId: string;
  inputs: string[];
  steps: FlowStepConfig[];
  /** SHA-256 hashes of the deployed-flow keys. */
  keyHashes: string[];
  /** Member the flow's turns run as. */
  runAsMemberId: string;
}

export interface WorkspaceConfig {
  id: string;
  name: string;
  members: MemberConfig[];
}

/**
 * Caps on pending work and on slow clients (config file `limits`; `agent-api serve` flags win over it).
 * Unset fields keep the server's defaults (README "Limits under load").
 */
export interface LimitsConfig {
  requestsPerServer?: number;
  requestsPerKey?: number;
  bodyBytesPerServer?: number;
  bodyBytesPerKey?: number;
  waitingTurnsPerConversation?: number;
  waitingTurnsPerKey?: number;
  waitingTurnsPerServer?: number;
  requestTimeoutMs?: number;
  headersTimeoutMs?: number;
  requestsPerWorkspace?: number;
  bodyBytesPerWorkspace?: number;
  turnsPerWorkspace?: number;
  turnsPerKey?: number;
  sandboxCommandsPerWorkspace?: number;
  diskBytesPerWorkspace?: number;
  poolConnectionsPerWorkspace?: number;
}

export interface ServerConfig {
  workspaces: WorkspaceConfig[];
  keys: ApiKeyConfig[];
  agents: AgentConfig[];
  flows: FlowConfig[];
  limits?: LimitsConfig;
}
