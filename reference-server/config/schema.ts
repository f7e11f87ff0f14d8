/**
 * JSON Schema of the user-facing config file (YAML or JSON; see config/README.md). It checks shapes
 * only; references between entries (workspace, member, agent names) and "exactly one of key / key_sha256"
 * are cross-checked in load.ts, where the message can name what is wrong.
 */

const identifier = { type: "string", minLength: 1, maxLength: 200, pattern: "^[^\\s/]+$" } as const;
const nonEmpty = { type: "string", minLength: 1 } as const;
const sha256 = { type: "string", pattern: "^[0-9a-fA-F]{64}$" } as const;
const positive = { type: "integer", minimum: 1 } as const;

export const configFileSchema = {
  $id: "https://agent-conversation-api.local/config-file.json",
  title: "Reference server config file",
  type: "object",
  additionalProperties: false,
  required: ["workspaces"],
  properties: {
    workspaces: {
      type: "array",
      minItems: 1,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["id", "members"],
        properties: {
          id: identifier,
          name: nonEmpty,
          members: {
            type: "array",
            items: {
              type: "object",
              additionalProperties: false,
              required: ["id"],
              properties: { id: identifier, name: nonEmpty },
            },
          },
        },
      },
    },
    keys: {
      type: "array",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["workspace", "member", "role"],
        properties: {
          key: { type: "string", minLength: 8, maxLength: 1024 },
          key_sha256: sha256,
          label: { type: "string", minLength: 1, maxLength: 100 },
          workspace: identifier,
          member: identifier,
          role: { enum: ["Admin", "Builder", "Operator", "Viewer"] },
          revoked: { type: "boolean" },
        },
      },
    },
    agents: {
      type: "array",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["name", "workspace", "kind", "default_model"],
        properties: {
          name: identifier,
          workspace: identifier,
          kind: { enum: ["storage", "repo"] },
          default_model: identifier,
          models: {
            type: "array",
            items: {
              type: "object",
              additionalProperties: false,
              required: ["id"],
              properties: {
                id: identifier,
                display_name: nonEmpty,
                upstream: nonEmpty,
                price: {
                  type: "object",
                  additionalProperties: false,
                  required: ["input", "output"],
                  properties: {
                    input: { type: "number", minimum: 0 },
                    output: { type: "number", minimum: 0 },
                    cache_read: { type: "number", minimum: 0 },
                    cache_write: { type: "number", minimum: 0 },
                  },
                },
                thinking_budget_tokens: { type: "integer", minimum: 1024 },
                max_tokens: { type: "integer", minimum: 1 },
                created_at: {
                  type: "string",
                  pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?Z)?$",
                },
              },
            },
          },
          instructions: { type: "string" },
          thinking_budget_tokens: { type: "integer", minimum: 1024 },
          automations: {
            type: "array",
            items: {
              type: "object",
              additionalProperties: false,
              required: ["name", "prompt"],
              properties: {
                name: identifier,
                prompt: nonEmpty,
                model: identifier,
                active: { type: "boolean" },
              },
            },
          },
          secrets: {
            type: "object",
            propertyNames: { pattern: "^[A-Za-z_][A-Za-z0-9_]*$" },
            additionalProperties: { type: "string" },
          },
          repo_url: nonEmpty,
          files_dir: nonEmpty,
        },
      },
    },
    flows: {
      type: "array",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["id", "workspace", "steps", "keys", "run_as"],
        properties: {
          id: identifier,
          workspace: identifier,
          inputs: { type: "array", items: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_]*$" } },
          steps: {
            type: "array",
            minItems: 1,
            items: {
              type: "object",
              additionalProperties: false,
              required: ["name", "agent", "prompt"],
              properties: { name: nonEmpty, agent: identifier, prompt: nonEmpty },
            },
          },
          keys: {
            type: "array",
            minItems: 1,
            items: {
              type: "object",
              additionalProperties: false,
              properties: { key: { type: "string", minLength: 8, maxLength: 1024 }, key_sha256: sha256 },
            },
          },
          run_as: identifier,
        },
      },
    },
    limits: {
      type: "object",
      additionalProperties: false,
      properties: {
        requests_per_server: positive,
        requests_per_key: positive,
        body_bytes_per_server: positive,
        body_bytes_per_key: positive,
        waiting_turns_per_conversation: positive,
        waiting_turns_per_key: positive,
        waiting_turns_per_server: positive,
        request_timeout_ms: positive,
        headers_timeout_ms: positive,
        requests_per_workspace: positive,
        body_bytes_per_workspace: positive,
        turns_per_workspace: positive,
        turns_per_key: positive,
        sandbox_commands_per_workspace: positive,
        disk_bytes_per_workspace: positive,
        pool_connections_per_workspace: positive,
      },
    },
  },
} as const;

/** The file format as TypeScript (what passes configFileSchema). */
export interface ConfigFile {
  workspaces: Array<{ id: string; name?: string; members: Array<{ id: string; name?: string }> }>;
  keys?: Array<{
    key?: string;
    key_sha256?: string;
    label?: string;
    workspace: string;
    member: string;
    role: "Admin" | "Builder" | "Operator" | "Viewer";
    revoked?: boolean;
  }>;
  agents?: Array<{
    name: string;
    workspace: string;
    kind: "storage" | "repo";
    default_model: string;
    models?: Array<{
      id: string;
      display_name?: string;
      upstream?: string;
      /** US dollars per million tokens; cache prices default to 0.1 and 1.25 times the input price. */
      price?: { input: number; output: number; cache_read?: number; cache_write?: number };
      thinking_budget_tokens?: number;
      /** The model entry's `created_at` (a date, or a UTC date-time). */
      created_at?: string;
      max_tokens?: number;
    }>;
    instructions?: string;
    thinking_budget_tokens?: number;
    automations?: Array<{ name: string; prompt: string; model?: string; active?: boolean }>;
    secrets?: Record<string, string>;
    repo_url?: string;
    files_dir?: string;
  }>;
  flows?: Array<{
    id: string;
    workspace: string;
    inputs?: string[];
    steps: Array<{ name: string; agent: string; prompt: string }>;
    keys: Array<{ key?: string; key_sha256?: string }>;
    run_as: string;
  }>;
  limits?: {
    requests_per_server?: number;
    requests_per_key?: number;
    body_bytes_per_server?: number;
    body_bytes_per_key?: number;
    waiting_turns_per_conversation?: number;
    waiting_turns_per_key?: number;
    waiting_turns_per_server?: number;
    request_timeout_ms?: number;
    headers_timeout_ms?: number;
    requests_per_workspace?: number;
    body_bytes_per_workspace?: number;
    turns_per_workspace?: number;
    turns_per_key?: number;
    sandbox_commands_per_workspace?: number;
    disk_bytes_per_workspace?: number;
    pool_connections_per_workspace?: number;
  };
}
