/**
 * How the server runs git: a closed configuration, a scrubbed environment, the fixed agent identity and a time
 * limit. Every git the server runs on a repo agent's clone goes through here.
 */
import { runCollected } from "./spawner.ts";

export const AGENT_AUTHOR_NAME = "Agent";
export const AGENT_AUTHOR_EMAIL = "agent@agent-api.local";

export interface RepoPaths {
  gitDir: string;
  workTree: string;
}

export class GitError extends Error {
  readonly exitCode: number | null;
  constructor(message: string, exitCode: number | null) {
    super(message);
    this.name = "GitError";
    this.exitCode = exitCode;
  }
}

/** Git with no user/system config, no hooks, no prompts, and the fixed agent identity. */
export function gitEnvironment(): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: "/nonexistent",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    // Submodule transports count as "not from the user": file:// and ext:: from a .gitmodules are refused.
    GIT_ALLOW_PROTOCOL: "https:http:ssh:git:file",
    GIT_AUTHOR_NAME: AGENT_AUTHOR_NAME,
    GIT_AUTHOR_EMAIL: AGENT_AUTHOR_EMAIL,
    GIT_COMMITTER_NAME: AGENT_AUTHOR_NAME,
    GIT_COMMITTER_EMAIL: AGENT_AUTHOR_EMAIL,
    LANG: "C",
  };
}

/**
 * A closed configuration for every git the server runs (outside the sandbox, as the server's user). A turn
 * can write anything into the work tree, nested repositories with their own config included; none of it may
 * make the server's git run a command. Command-line `-c` wins over every config file and is passed on to any
 * git process git itself starts (GIT_CONFIG_PARAMETERS), so a nested repository's settings never apply.
 * Filter drivers (`filter=` in a .gitattributes) exist only where a config defines them: none of these does,
 * and the clone's own config is the server's, so a turn's attributes can name a filter but never run one.
 */
export const SAFE_CONFIG = [
  "core.hooksPath=/dev/null",
  "commit.gpgSign=false",
  "core.fsmonitor=false",
  // Never enter a nested repository (a gitlink): that is where its own uploadpack, fsmonitor... would run.
  "submodule.recurse=false",
  "fetch.recurseSubmodules=false",
  "push.recurseSubmodules=no",
  "diff.ignoreSubmodules=all",
  "status.submoduleSummary=false",
  // Transports that run commands or reach local paths are refused unless the server named them itself.
  "protocol.ext.allow=never",
  "protocol.file.allow=user",
  "core.sshCommand=ssh",
  "credential.helper=",
  "core.askPass=",
  "core.pager=cat",
  "core.attributesFile=/dev/null",
  "diff.external=",
  "gc.auto=0",
  "maintenance.auto=false",
].flatMap((setting) => ["-c", setting]);

/**
 * The longest any one git command of the server may run (a clone of a large repository included). Past it
 * the command is killed: a work tree a turn made must not hold the conversation, or a core, for ever.
 */
export const GIT_TIMEOUT_MS = 10 * 60_000;

/** Where git looks for the repository: both named, so nothing in the work tree is taken for one. */
export function gitLocation(repo: RepoPaths): string[] {
  return [`--git-dir=${repo.gitDir}`, `--work-tree=${repo.workTree}`];
}

/** Runs git and returns its stdout; `env` adds to the closed environment (GIT_INDEX_FILE). */
export async function git(
  args: string[],
  cwd: string,
  repo?: RepoPaths,
  env: Record<string, string> = {},
): Promise<string> {
  const result = await runCollected({
    file: "git",
    args: [...SAFE_CONFIG, ...(repo ? gitLocation(repo) : []), ...args],
    cwd,
    env: { ...gitEnvironment(), ...env },
    maxBuffer: 64 * 1024 * 1024,
    timeoutMs: GIT_TIMEOUT_MS,
    // Hashing what a turn wrote is the server's work on the turn's behalf: other turns come first.
    nice: 10,
  });
  if (result.code === 0 && result.error === undefined && !result.overflowed)
    return result.stdout.toString("utf8");
  const why = result.timedOut
    ? `timed out after ${GIT_TIMEOUT_MS / 1000} s`
    : result.overflowed
      ? "its output passed 64 MiB"
      : result.stderr.toString("utf8").trim() ||
        result.error ||
        `exit ${result.code ?? result.signal ?? "unknown"}`;
  throw new GitError(`git ${args[0]} failed: ${why}`, result.code);
}
