/**
 * The page's form: one field per `agent-api check` flag that describes the deployment or the run, so the
 * page takes exactly what the command takes. Keys are secret: the page never shows them back, and the
 * process keeps them in memory only.
 */
import { camelOf, DEFAULT_SESSION_WAIT_MS, INPUT_FLAGS, normalisedUrl } from "../inputs.ts";
import type { InputName } from "../types.ts";

export interface FormField {
  flag: string;
  label: string;
  /** A key: masked on screen, never written to disk, never sent back to the page. */
  secret: boolean;
  required: boolean;
  /** Several values, one per line (`--flow-input`). */
  repeatable: boolean;
  group: "deployment" | "inputs" | "run";
}

const LABELS: Record<InputName, string> = {
  memberKey: "Second member's key",
  viewerKey: "Viewer-role key",
  revokedKey: "Revoked key",
  foreignAgent: "Agent of another workspace",
  foreignKey: "Key of another workspace",
  automation: "Active automation of the agent",
  storageAgent: "Storage-backed agent",
  repoAgent: "Repository-backed agent",
  repoUrl: "Git URL of that agent's repository",
  flowUrl: "Deployed-flow base address",
  flowId: "Deployed flow id",
  flowKey: "Deployed-flow key",
  flowInput: "Flow input variables (name=value, one per line)",
  routingPrefix: "Routing prefix of the model-routed send",
  channelId: "Chat channel id with a conversation of the agent",
  notebookPath: "Notebook path with a conversation of the agent",
  idleSeconds: "Quiet turn to survive, in seconds (opt-in; a proxy's idle time-out, e.g. 60)",
};

const isSecret = (flag: string) => flag === "--key" || flag.endsWith("-key");

export const FORM_FIELDS: FormField[] = [
  {
    flag: "--base-url",
    label: "Base URL",
    secret: false,
    required: true,
    repeatable: false,
    group: "deployment",
  },
  { flag: "--agent", label: "Agent", secret: false, required: true, repeatable: false, group: "deployment" },
  {
    flag: "--key",
    label: "API key (Admin, Builder or Operator)",
    secret: true,
    required: true,
    repeatable: false,
    group: "deployment",
  },
  ...(Object.entries(INPUT_FLAGS) as Array<[InputName, string]>).map(
    ([name, flag]): FormField => ({
      flag,
      label: LABELS[name],
      secret: isSecret(flag),
      required: false,
      repeatable: name === "flowInput",
      group: "inputs",
    }),
  ),
  {
    flag: "--session-wait-ms",
    label: `Bound for waiting on agent_session_id, ms (default ${DEFAULT_SESSION_WAIT_MS})`,
    secret: false,
    required: false,
    repeatable: false,
    group: "run",
  },
  {
    flag: "--max-turns",
    label: "Most turns the run may send (each costs the deployment a model call; blank: no bound)",
    secret: false,
    required: false,
    repeatable: false,
    group: "run",
  },
  {
    flag: "--explore",
    label: "Explorer: random sequences compared with the API's model (default 60; 0 off)",
    secret: false,
    required: false,
    repeatable: false,
    group: "run",
  },
  {
    flag: "--seed",
    label: "Explorer's seed (default a fresh one; a report names it)",
    secret: false,
    required: false,
    repeatable: false,
    group: "run",
  },
  {
    flag: "--only",
    label: "Only these check ids (comma-separated, ID* matches a prefix)",
    secret: false,
    required: false,
    repeatable: false,
    group: "run",
  },
];

/** The address a key is bound to: the deployed-flow key to the flow's address, every other key to the API's. */
const addressOf = (secretFlag: string) => (secretFlag === "--flow-key" ? "--flow-url" : "--base-url");

// normalisedUrl, not /\/+$/: a run of slashes then another character made that pattern quadratic (recheck).
const sameAddress = (a: string, b: string) => normalisedUrl(a) === normalisedUrl(b);

/**
 * A submitted form as `resolveInputs` reads it: each field's value, a blank secret replaced by the value the
 * command was started with (the page never holds it) only when the run goes to the address that key came
 * with (a run posted for another deployment brings its own keys, so no key reaches a listener it was not
 * given for), repeatable fields split into lines.
 */
export function formValues(
  submitted: Record<string, unknown>,
  defaults: Record<string, string>,
): Record<string, string | string[]> {
  const values: Record<string, string | string[]> = {};
  for (const field of FORM_FIELDS) {
    const raw = submitted[field.flag];
    let text = typeof raw === "string" ? raw.trim() : "";
    if (text === "" && field.secret) {
      const address = addressOf(field.flag);
      const posted = submitted[address];
      const target =
        typeof posted === "string" && posted.trim() !== "" ? posted.trim() : (defaults[address] ?? "");
      if (sameAddress(target, defaults[address] ?? "")) text = defaults[field.flag] ?? "";
    }
    if (text === "") continue;
    values[camelOf(field.flag)] = field.repeatable
      ? text
          .split("\n")
          .map((line) => line.trim())
          .filter(Boolean)
      : text;
  }
  return values;
}

/** What the page may show of the command's own values: everything but the keys, which it only says exist. */
export function publicDefaults(defaults: Record<string, string>): {
  values: Record<string, string>;
  secretsGiven: string[];
} {
  const values: Record<string, string> = {};
  const secretsGiven: string[] = [];
  for (const field of FORM_FIELDS) {
    const value = defaults[field.flag];
    if (value === undefined || value === "") continue;
    if (field.secret) secretsGiven.push(field.flag);
    else values[field.flag] = value;
  }
  return { values, secretsGiven };
}
