/** Shared set-up for the sandbox tests: temp roots, agents, a manager per test (vitest.config.ts probes bwrap). */
import { execFileSync } from "node:child_process";
import { chmod, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { detectCgroups } from "./cgroups.ts";
import { type CreateSandboxManagerOptions, createSandboxManager } from "./index.ts";
import type { CopyOwner } from "./local-copies.ts";
import { removeTree } from "./tree-ops.ts";
import type { SandboxAgent, SandboxManager, SandboxRequest } from "./types.ts";

export async function makeTempDir(prefix: string, base = tmpdir()): Promise<string> {
  const dir = await mkdtemp(path.join(base, `sandbox-test-${prefix}-`));
  // Sandbox users pass through it to their working directories, as through a server's data directory.
  await chmod(dir, 0o711);
  return dir;
}

export function storageAgent(overrides: Partial<SandboxAgent> = {}): SandboxAgent {
  return { workspaceId: "ws1", name: "helper", kind: "storage", secrets: {}, ...overrides };
}

/** A turn of conversation `conversationId` (generation 1: each id is one conversation in these tests). */
export function turnRequest(
  conversationId: string,
  agent: SandboxAgent,
  extra: Partial<SandboxRequest> = {},
): SandboxRequest {
  return {
    conversationId,
    generation: 1,
    agent,
    isolated: false,
    readOnly: true,
    attachments: undefined,
    ...extra,
  };
}

/** The conversation `conversationId` of `agent` (generation 1), as fork and remove name it. */
export function copyOwner(
  conversationId: string,
  agent: SandboxAgent = storageAgent(),
  generation = 1,
): CopyOwner {
  return { conversationId, workspaceId: agent.workspaceId, agent: agent.name, generation };
}

/** Tracks managers and directories made by a test so afterEach can close and delete them. */
export class TestBed {
  private readonly managers: SandboxManager[] = [];
  private readonly dirs: string[] = [];

  async dir(prefix: string, base?: string): Promise<string> {
    const dir = await makeTempDir(prefix, base);
    this.dirs.push(dir);
    return dir;
  }

  async manager(
    rootDir: string,
    overrides: Partial<CreateSandboxManagerOptions> = {},
  ): Promise<SandboxManager> {
    const manager = await createSandboxManager({
      rootDir,
      idleMs: 60_000,
      unsafeNoIsolation: true,
      toolTimeoutMs: 10_000,
      toolOutputCapBytes: 64 * 1024,
      ...overrides,
    });
    this.managers.push(manager);
    return manager;
  }

  /**
   * A manager that isolates for real (bubblewrap), in a fresh root (in `base`, else the temporary directory),
   * with time for a slow loaded machine.
   */
  async isolatedManager(
    overrides: Partial<CreateSandboxManagerOptions> = {},
    base?: string,
  ): Promise<SandboxManager> {
    return (await this.isolated(overrides, base)).manager;
  }

  /** As isolatedManager, with the root it runs in (for tests that look at what it stored). */
  async isolated(
    overrides: Partial<CreateSandboxManagerOptions> = {},
    base?: string,
  ): Promise<{ root: string; manager: SandboxManager }> {
    const root = await this.dir("root", base);
    const manager = await this.manager(root, {
      unsafeNoIsolation: false,
      toolTimeoutMs: 20_000,
      ...overrides,
    });
    return { root, manager };
  }

  async cleanup(): Promise<void> {
    for (const manager of this.managers.splice(0)) await manager.close();
    // GNU rm: a test may leave a tree nested far past PATH_MAX, which Node's rm cannot remove.
    for (const dir of this.dirs.splice(0)) await removeTree(dir);
  }
}

/** A human's git on the host (not the server's): no global config, a fixed identity. */
const humanGitEnv = {
  ...process.env,
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "Human",
  GIT_AUTHOR_EMAIL: "human@example.com",
  GIT_COMMITTER_NAME: "Human",
  GIT_COMMITTER_EMAIL: "human@example.com",
};

/** Runs git on the host as a human would, for setting up and inspecting the remote. */
export function hostGit(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, env: humanGitEnv, encoding: "utf8" });
}

/** A bare repository `<name>.git` with `main` as default branch and one seed commit (README.md). */
export async function seededBareRepo(bed: TestBed, name: string, readme: string): Promise<string> {
  const dir = await bed.dir("git");
  const bare = path.join(dir, `${name}.git`);
  hostGit(dir, "init", "--quiet", "--bare", "--initial-branch=main", bare);
  const seed = path.join(dir, "seed");
  hostGit(dir, "clone", "--quiet", bare, seed);
  await writeFile(path.join(seed, "README.md"), readme);
  hostGit(seed, "add", "README.md");
  hostGit(seed, "commit", "--quiet", "-m", "seed");
  hostGit(seed, "push", "--quiet", "origin", "HEAD:main");
  return bare;
}

/** A repository-backed agent named `name` over `repoUrl`. */
export function repoAgent(repoUrl: string, name: string): SandboxAgent {
  return { workspaceId: "ws1", name, kind: "repo", secrets: {}, repoUrl };
}

/**
 * Why memory and CPU limits cannot be tested here (null when they can): they need a writable cgroup hierarchy
 * and a root server to place commands in it.
 */
export async function cgroupsUnavailable(): Promise<string | null> {
  if (process.getuid?.() !== 0) return "the tests do not run as root";
  const support = await detectCgroups();
  await support.close();
  return support.version === "none" ? support.reason : null;
}

/** Entries (files and directories) below dir, counted by find. */
export function entriesBelow(dir: string): number {
  return Number(execFileSync("sh", ["-c", `find "$1" -mindepth 1 | wc -l`, "sh", dir], { encoding: "utf8" }));
}

/** Blocks allocated below dir, in bytes. */
export function bytesBelow(dir: string): number {
  return Number(execFileSync("du", ["-sk", dir], { encoding: "utf8" }).split("\t")[0]) * 1024;
}
