/** Shared set-up for the sandbox tests: temp roots, agents, a manager per test (vitest.config.ts probes bwrap). */
import { execFileSync } from "node:child_process";
import { chmod, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type CreateSandboxManagerOptions, createSandboxManager } from "./index.ts";
import { removeTree } from "./tree-ops.ts";
import type { SandboxAgent, SandboxManager, SandboxRequest } from "./types.ts";

export async function makeTempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), `sandbox-test-${prefix}-`));
  // Sandbox users pass through it to their working directories, as through a server's data directory.
  await chmod(dir, 0o711);
  return dir;
}

export function storageAgent(overrides: Partial<SandboxAgent> = {}): SandboxAgent {
  return { workspaceId: "ws1", name: "helper", kind: "storage", secrets: {}, ...overrides };
}

export function turnRequest(
  conversationId: string,
  agent: SandboxAgent,
  extra: Partial<SandboxRequest> = {},
) {
  return { conversationId, agent, isolated: false, readOnly: true, attachments: undefined, ...extra };
}

/** Tracks managers and directories made by a test so afterEach can close and delete them. */
export class TestBed {
  private readonly managers: SandboxManager[] = [];
  private readonly dirs: string[] = [];

  async dir(prefix: string): Promise<string> {
    const dir = await makeTempDir(prefix);
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
