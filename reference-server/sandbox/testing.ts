/** Shared set-up for the sandbox tests: temp roots, agents, a manager per test (vitest.config.ts probes bwrap). */
import { chmod, mkdtemp } from "node:fs/promises";
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
