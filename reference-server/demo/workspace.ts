/**
 * The documented demo (`agent-api serve --demo`): two workspaces, fixed local-only keys, a storage agent,
 * a storage agent with files, a repo agent over a local bare repository, an automation and a flow.
 * The demo is written in the config file format and goes through parseConfig, so it is checked like any
 * user config. Creating it again in the same data directory reuses what exists.
 *
 * Several instances serving one demo (a shared store) name one repository remote (`demoRemote`): a path
 * every instance reaches (one machine) or a git URL (a git server); the first instance to start creates it.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { stringify as stringifyYaml } from "yaml";
import { parseConfig } from "../config/load.ts";
import type { ConfigFile } from "../config/schema.ts";
import type { ServerConfig } from "../config/types.ts";
import { DEMO_CHANNEL_ID, DEMO_NOTEBOOK_PATH } from "./conversations.ts";

type DemoModel = NonNullable<NonNullable<ConfigFile["agents"]>[number]["models"]>[number];

/** The demo's models, priced (US dollars per million tokens) so `total_cost_usd` means something. */
const DEMO_SMALL: DemoModel = {
  id: "demo-small",
  display_name: "Demo Small",
  price: { input: 1, output: 5, cache_read: 0.1, cache_write: 1.25 },
};
const DEMO_LARGE: DemoModel = {
  id: "demo-large",
  display_name: "Demo Large",
  price: { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 },
};

const run = promisify(execFile);

/** Fixed keys for local use only: they are printed at start and published in the README. */
export const DEMO_ADMIN_KEY = "demo-admin-key";
export const DEMO_MEMBER_KEY = "demo-member-key";
export const DEMO_VIEWER_KEY = "demo-viewer-key";
export const DEMO_REVOKED_KEY = "demo-revoked-key";
export const OTHER_ADMIN_KEY = "other-admin-key";
export const DEMO_FLOW_KEY = "demo-flow-key";

export interface DemoKeys {
  /** alice, Admin, workspace demo. */
  admin: string;
  /** bob, Operator, workspace demo. */
  member: string;
  /** carol, Viewer, workspace demo. */
  viewer: string;
  /** dave, revoked, workspace demo. */
  revoked: string;
  /** olga, Admin, workspace other. */
  otherAdmin: string;
  /** Key of the deployed flow demo-flow. */
  flow: string;
}

export const demoKeys: DemoKeys = {
  admin: DEMO_ADMIN_KEY,
  member: DEMO_MEMBER_KEY,
  viewer: DEMO_VIEWER_KEY,
  revoked: DEMO_REVOKED_KEY,
  otherAdmin: OTHER_ADMIN_KEY,
  flow: DEMO_FLOW_KEY,
};

const notesReadme = `# Notes agent files

These files are restored fresh for every turn of notes-agent (a storage-backed demo agent).
The token NOTES-FILE-PRESENT proves the agent can read them.
`;

/** The repository agent's remote when none is named: a bare repository in the data directory. */
export function defaultDemoRemote(dataDir: string): string {
  return join(resolve(dataDir), "demo", "acme-widgets.git");
}

/**
 * A git URL (`scheme://…`, or scp-like `host:path` with the colon before any slash, as git reads it) names a
 * remote on a git server; anything else is a local path.
 */
export function isGitUrl(remote: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(remote) || /^[^/]+:/.test(remote);
}

/** The demo in the config file format; `dataDir`-relative locations are absolute here. */
export function demoConfigFile(dataDir: string, remote = defaultDemoRemote(dataDir)): ConfigFile {
  const demoDir = join(resolve(dataDir), "demo");
  return {
    workspaces: [
      {
        id: "demo",
        name: "Demo workspace",
        members: [
          { id: "alice", name: "Alice Admin" },
          { id: "bob", name: "Bob Operator" },
          { id: "carol", name: "Carol Viewer" },
          { id: "dave", name: "Dave Revoked" },
        ],
      },
      { id: "other", name: "Other workspace", members: [{ id: "olga", name: "Olga Other" }] },
    ],
    keys: [
      { key: DEMO_ADMIN_KEY, label: "demo-admin", workspace: "demo", member: "alice", role: "Admin" },
      { key: DEMO_MEMBER_KEY, label: "demo-member", workspace: "demo", member: "bob", role: "Operator" },
      { key: DEMO_VIEWER_KEY, label: "demo-viewer", workspace: "demo", member: "carol", role: "Viewer" },
      {
        key: DEMO_REVOKED_KEY,
        label: "demo-revoked",
        workspace: "demo",
        member: "dave",
        role: "Operator",
        revoked: true,
      },
      { key: OTHER_ADMIN_KEY, label: "other-admin", workspace: "other", member: "olga", role: "Admin" },
    ],
    agents: [
      {
        name: "demo-agent",
        workspace: "demo",
        kind: "storage",
        default_model: "demo-large",
        models: [DEMO_SMALL, DEMO_LARGE],
        instructions: "You are the demo agent of the reference server.",
        automations: [
          {
            name: "nightly-summary",
            prompt: "Summarise the day. Always include the token AUTOMATION-PROMPT-USED",
            model: "demo-small",
            active: true,
          },
        ],
        secrets: { DEMO_SECRET: "demo-secret-value" },
      },
      {
        name: "notes-agent",
        workspace: "demo",
        kind: "storage",
        default_model: "demo-small",
        models: [DEMO_SMALL],
        instructions: "You are the notes agent. Your files hold the team's notes.",
        files_dir: join(demoDir, "notes-files"),
      },
      {
        name: "acme-widgets",
        workspace: "demo",
        kind: "repo",
        default_model: "demo-large",
        models: [DEMO_LARGE],
        instructions: "You are the agent of the acme/widgets repository.",
        repo_url: remote,
      },
      {
        name: "other-agent",
        workspace: "other",
        kind: "storage",
        default_model: "demo-large",
        models: [DEMO_LARGE],
        instructions: "You are the agent of the other workspace.",
      },
    ],
    flows: [
      {
        id: "demo-flow",
        workspace: "demo",
        inputs: ["topic"],
        steps: [
          { name: "draft", agent: "demo-agent", prompt: "Write one sentence about {{topic}}." },
          {
            name: "review",
            agent: "demo-agent",
            prompt: "Repeat your instructions. Previous step said: {{previous}}",
          },
        ],
        keys: [{ key: DEMO_FLOW_KEY }],
        run_as: "alice",
      },
    ],
  };
}

/** Fixed identity and dates, so the demo repository's commit is the same on every machine. */
const gitEnv = {
  GIT_AUTHOR_NAME: "Reference Server Demo",
  GIT_AUTHOR_EMAIL: "demo@agent-api.invalid",
  GIT_AUTHOR_DATE: "2026-01-01T00:00:00Z",
  GIT_COMMITTER_NAME: "Reference Server Demo",
  GIT_COMMITTER_EMAIL: "demo@agent-api.invalid",
  GIT_COMMITTER_DATE: "2026-01-01T00:00:00Z",
};

async function git(gitDir: string, args: string[], input?: string): Promise<string> {
  // Plumbing against the bare repository: no working tree, no user git config needed; a remote that asks
  // for credentials fails instead of waiting on a terminal.
  const child = run("git", [`--git-dir=${gitDir}`, ...args], {
    env: {
      ...process.env,
      ...gitEnv,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_TERMINAL_PROMPT: "0",
    },
  });
  if (input !== undefined) {
    child.child.stdin?.end(input);
  }
  return (await child).stdout.trim();
}

async function hasMain(gitDir: string): Promise<boolean> {
  if (!existsSync(join(gitDir, "HEAD"))) return false;
  try {
    await git(gitDir, ["rev-parse", "--verify", "--quiet", "refs/heads/main"]);
    return true;
  } catch {
    return false;
  }
}

/** Writes the demo's initial commit into `gitDir` and points HEAD at main; main itself is not set. */
async function writeInitialCommit(gitDir: string): Promise<string> {
  await git(gitDir, ["symbolic-ref", "HEAD", "refs/heads/main"]);
  const readme = await git(
    gitDir,
    ["hash-object", "-w", "--stdin"],
    "# acme/widgets\n\nDemo repository of the reference server's repo-backed agent `acme-widgets`.\n",
  );
  const widgets = await git(gitDir, ["hash-object", "-w", "--stdin"], "sprocket\ngear\nflange\n");
  const tree = await git(
    gitDir,
    ["mktree"],
    `100644 blob ${readme}\tREADME.md\n100644 blob ${widgets}\twidgets.txt\n`,
  );
  return git(gitDir, ["commit-tree", tree, "-m", "Initial commit"]);
}

/**
 * A bare repository with default branch main and one initial commit; left alone when main exists. Several
 * instances may create the same path at once: each builds the repository aside and renames it into place, so
 * the first rename wins and the others find it there; an existing repository without main (an interrupted
 * earlier run, a bare repository made empty by hand) gets main only if it still has none.
 */
export async function ensureDemoRepository(gitDir: string): Promise<void> {
  if (await hasMain(gitDir)) return;
  if (!existsSync(join(gitDir, "HEAD"))) {
    await mkdir(dirname(gitDir), { recursive: true });
    const aside = await mkdtemp(`${gitDir}.tmp-`);
    try {
      await chmod(aside, 0o755);
      await run("git", ["init", "--quiet", "--bare", aside], {
        env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null" },
      });
      await git(aside, ["update-ref", "refs/heads/main", await writeInitialCommit(aside)]);
      try {
        // Onto a missing or empty directory only: a repository another instance put there stays.
        await rename(aside, gitDir);
        return;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code !== "ENOTEMPTY" && code !== "EEXIST") throw error;
      }
    } finally {
      await rm(aside, { recursive: true, force: true });
    }
    if (await hasMain(gitDir)) return;
  }
  try {
    // The empty old value: created only if main does not exist yet.
    await git(gitDir, ["update-ref", "refs/heads/main", await writeInitialCommit(gitDir), ""]);
  } catch (error) {
    if (await hasMain(gitDir)) return;
    throw new Error(
      `${gitDir} is not a git repository the demo can use: ${error instanceof Error ? error.message.trim() : String(error)}`,
    );
  }
}

/**
 * The demo's remote on a git server: given its initial commit when it has no main (the commit is the same
 * on every machine, so instances pushing it at once agree), left alone otherwise. `localDir` is a bare
 * repository of this instance's to push from.
 */
async function ensureDemoRemoteUrl(url: string, localDir: string): Promise<void> {
  const hasRemoteMain = async () => (await git(localDir, ["ls-remote", url, "refs/heads/main"])) !== "";
  await ensureDemoRepository(localDir);
  try {
    if (await hasRemoteMain()) return;
    await git(localDir, ["push", "--quiet", url, "refs/heads/main:refs/heads/main"]);
  } catch (error) {
    if (await hasRemoteMain().catch(() => false)) return;
    throw new Error(
      `the demo remote ${url} is not reachable or refused the demo's initial commit: ${error instanceof Error ? error.message.trim() : String(error)}`,
    );
  }
}

/** Makes the demo's remote ready: a path is created (once), a git URL given the initial commit if empty. */
export async function ensureDemoRemote(remote: string, dataDir: string): Promise<void> {
  if (isGitUrl(remote)) await ensureDemoRemoteUrl(remote, defaultDemoRemote(dataDir));
  else await ensureDemoRepository(resolve(remote));
}

export interface DemoOptions {
  /** Base URL the server answers on, e.g. http://127.0.0.1:3001. */
  baseUrl: string;
  /** Routing prefix of the model-routed send (`<prefix>--<agent>`). */
  routingPrefix: string;
  /**
   * The repository agent's remote: a path (created once, by whichever instance comes first) or a git URL;
   * default a bare repository in the data directory.
   */
  remote?: string;
}

export interface Demo {
  config: ServerConfig;
  keys: DemoKeys;
  /** The AGENT_API_* variables the conformance suite reads to check this server. */
  envVars: Record<string, string>;
}

export async function createDemo(dataDir: string, opts: DemoOptions): Promise<Demo> {
  const demoDir = join(resolve(dataDir), "demo");
  const remote = opts.remote === undefined ? defaultDemoRemote(dataDir) : normalRemote(opts.remote);
  const file = demoConfigFile(dataDir, remote);
  const notesDir = join(demoDir, "notes-files");
  await mkdir(notesDir, { recursive: true });
  const notesReadmePath = join(notesDir, "README.md");
  if (!existsSync(notesReadmePath)) await writeFile(notesReadmePath, notesReadme);
  await ensureDemoRemote(remote, dataDir);
  // The demo as a config file, for users to copy as a starting point.
  await writeFile(
    join(demoDir, "demo-config.yaml"),
    `# The --demo configuration, written by agent-api serve --demo. Local-only keys.\n${stringifyYaml(file)}`,
  );
  const config = parseConfig(file, demoDir, "demo");
  const envVars: Record<string, string> = {
    AGENT_API_BASE_URL: opts.baseUrl,
    AGENT_API_AGENT: "demo-agent",
    AGENT_API_KEY: DEMO_ADMIN_KEY,
    AGENT_API_MEMBER_KEY: DEMO_MEMBER_KEY,
    AGENT_API_VIEWER_KEY: DEMO_VIEWER_KEY,
    AGENT_API_REVOKED_KEY: DEMO_REVOKED_KEY,
    AGENT_API_FOREIGN_AGENT: "other-agent",
    AGENT_API_FOREIGN_KEY: OTHER_ADMIN_KEY,
    AGENT_API_AUTOMATION: "nightly-summary",
    AGENT_API_STORAGE_AGENT: "notes-agent",
    AGENT_API_REPO_AGENT: "acme-widgets",
    AGENT_API_REPO_URL: remote,
    AGENT_API_FLOW_URL: opts.baseUrl,
    AGENT_API_FLOW_ID: "demo-flow",
    AGENT_API_FLOW_KEY: DEMO_FLOW_KEY,
    AGENT_API_FLOW_INPUT: "topic=testing",
    AGENT_API_ROUTING_PREFIX: opts.routingPrefix,
    // Conversations the API cannot create (a Slack thread, a notebook's), seeded with the demo's data.
    AGENT_API_CHANNEL_ID: DEMO_CHANNEL_ID,
    AGENT_API_NOTEBOOK_PATH: DEMO_NOTEBOOK_PATH,
  };
  return { config, keys: { ...demoKeys }, envVars };
}

/** A path made absolute (instances started from different directories name one place); a URL as given. */
function normalRemote(remote: string): string {
  if (remote.trim() === "")
    throw new Error("the demo remote must be a path or a git URL, got an empty string");
  return isGitUrl(remote) ? remote : resolve(remote);
}

/** A value the shell reads back verbatim under `set -a; . file`: bare when safe, else single-quoted. */
function shellValue(value: string): string {
  if (/^[A-Za-z0-9_./:@%+,=-]*$/.test(value) && value !== "") return value;
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** One `NAME=value` a line, loadable with `set -a; . file; set +a`. */
export function formatEnvFile(vars: Record<string, string>): string {
  return Object.entries(vars)
    .map(([name, value]) => {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
        throw new Error(`not an environment variable name: ${name}`);
      return `${name}=${shellValue(value)}\n`;
    })
    .join("");
}

/** What `serve --demo` prints at start: the keys, the agents and a curl line that works when pasted. */
export function demoSummary(keys: DemoKeys, baseUrl: string): string {
  const base = baseUrl.replace(/(?<!\/)\/+$/, "");
  return [
    `Demo workspace ready at ${base} (local-only keys, never use them elsewhere):`,
    `  ${keys.admin.padEnd(18)} alice, Admin     (workspace demo)`,
    `  ${keys.member.padEnd(18)} bob, Operator    (workspace demo)`,
    `  ${keys.viewer.padEnd(18)} carol, Viewer    (workspace demo)`,
    `  ${keys.revoked.padEnd(18)} dave, revoked    (workspace demo)`,
    `  ${keys.otherAdmin.padEnd(18)} olga, Admin      (workspace other)`,
    `  ${keys.flow.padEnd(18)} key of flow demo-flow (POST ${base}/apps/demo-flow)`,
    "Agents: demo-agent (storage, automation nightly-summary), notes-agent (storage, with files),",
    "        acme-widgets (repo), other-agent (workspace other)",
    "Try:",
    `  curl -N ${base}/api/agents/demo-agent/v1/messages -H 'X-Api-Key: ${keys.admin}' -H 'content-type: application/json' -d '{"messages":[{"role":"user","content":"Remember this code word: kiwi. Reply with just OK."}]}'`,
    "",
  ].join("\n");
}
