/**
 * The sandbox manager: where each turn runs. Layout under rootDir:
 *   conversations/<sha256(conversation id)>/   persistent working directory (the one tools see)
 *   repos/<sha256(conversation id)>.git        git directory of a repo agent's clone (never shown to tools)
 *   workspace-store/<workspace>/<agent>/       storage agents' published outputs
 *   tmp/                                       isolated turns' throwaway directories, clone scratch
 * "Warm" is in-memory knowledge about a prepared working directory; reclaiming it loses no files.
 */
import { randomUUID } from "node:crypto";
import { cp, lstat, mkdir, mkdtemp, realpath, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { writeAttachments } from "./attachments.ts";
import { DEFAULT_BWRAP_COMMAND, probeBwrap, resolveExecutable } from "./isolation.ts";
import {
  cloneInto,
  commitAndPush,
  excludeUploads,
  type RepoPaths,
  refresh,
  remoteDefaultBranch,
  snapshotWorkTree,
} from "./repo.ts";
import { conversationDirName, safeSegment } from "./safe-paths.ts";
import {
  listStoreFiles,
  publishOutputs,
  type RestoreManifest,
  readStoreFile,
  resetOutputs,
  restoreAgentFiles,
} from "./storage.ts";
import { createToolRunner, type IsolationMode } from "./tool-runner.ts";
import type {
  FinishReport,
  SandboxAgent,
  SandboxManager,
  SandboxManagerOptions,
  SandboxRequest,
  TurnSandbox,
} from "./types.ts";

export { SandboxPathError } from "./safe-paths.ts";
export { REFUSED_NO_ISOLATION } from "./tool-runner.ts";

/** Pushed to when the remote is empty and names no default branch. */
const FALLBACK_BRANCH = "main";

interface WarmEntry {
  /** The agent the directory was prepared for; another agent means a cold start. */
  agentKey: string;
  timer: NodeJS.Timeout | undefined;
  manifest: RestoreManifest | null;
  branch: string | null;
}

function agentKey(agent: SandboxAgent): string {
  return JSON.stringify([
    agent.workspaceId,
    agent.name,
    agent.kind,
    agent.repoUrl ?? "",
    agent.filesDir ?? "",
  ]);
}

async function exists(p: string): Promise<boolean> {
  return stat(p).then(
    () => true,
    () => false,
  );
}

async function copyableEntry(source: string): Promise<boolean> {
  const stats = await lstat(source).catch(() => null);
  return stats !== null && (stats.isDirectory() || stats.isFile() || stats.isSymbolicLink());
}

export interface CreateSandboxManagerOptions extends SandboxManagerOptions {
  /** bubblewrap executable; default `bwrap` on PATH (tests name a missing one to get no isolation). */
  bwrapCommand?: string;
}

export async function createSandboxManager(options: CreateSandboxManagerOptions): Promise<SandboxManager> {
  const bwrapCommand = resolveExecutable(options.bwrapCommand ?? DEFAULT_BWRAP_COMMAND);
  await mkdir(options.rootDir, { recursive: true, mode: 0o700 });
  const root = await realpath(options.rootDir);
  const dirs = {
    conversations: path.join(root, "conversations"),
    repos: path.join(root, "repos"),
    store: path.join(root, "workspace-store"),
    tmp: path.join(root, "tmp"),
  };
  // Throwaway directories of a previous run are garbage now.
  await rm(dirs.tmp, { recursive: true, force: true });
  for (const dir of Object.values(dirs)) await mkdir(dir, { recursive: true, mode: 0o700 });

  const probeDir = await mkdtemp(path.join(dirs.tmp, "probe-"));
  // A bare name means it is not on the server's PATH: that is "not installed". (Spawned with an empty
  // environment, the bare name would still be found in /usr/bin or /bin, whatever PATH says.)
  const bwrapWorks = bwrapCommand.includes("/") && (await probeBwrap(bwrapCommand, probeDir));
  await rm(probeDir, { recursive: true, force: true });
  const isolation: IsolationMode = bwrapWorks ? "bwrap" : options.unsafeNoIsolation ? "none" : "unavailable";

  const warm = new Map<string, WarmEntry>();

  const conversationDir = (id: string) => path.join(dirs.conversations, conversationDirName(id));
  const gitDirOf = (id: string) => path.join(dirs.repos, `${conversationDirName(id)}.git`);
  const storeDir = (workspaceId: string, agent: string) =>
    path.join(dirs.store, safeSegment(workspaceId), safeSegment(agent));

  function keepWarm(key: string, entry: WarmEntry): void {
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = setTimeout(() => {
      if (warm.get(key) === entry) warm.delete(key);
    }, options.idleMs);
    entry.timer.unref();
    warm.set(key, entry);
  }

  function toolsFor(workdir: string, agent: SandboxAgent) {
    return createToolRunner({
      workdir,
      isolation,
      secrets: agent.secrets,
      timeoutMs: options.toolTimeoutMs,
      outputCapBytes: options.toolOutputCapBytes,
      bwrapCommand,
    });
  }

  function once(fn: () => Promise<FinishReport>): () => Promise<FinishReport> {
    let result: Promise<FinishReport> | undefined;
    return () => {
      result ??= fn();
      return result;
    };
  }

  async function acquireIsolated(request: SandboxRequest): Promise<TurnSandbox> {
    const workdir = await mkdtemp(path.join(dirs.tmp, "isolated-"));
    const attachments = await writeAttachments(workdir, request.attachments);
    return {
      workdir,
      cold: true,
      attachments,
      tools: toolsFor(workdir, request.agent),
      finish: once(async () => {
        await rm(workdir, { recursive: true, force: true });
        return { pushedCommit: null, publishedOutputs: [] };
      }),
    };
  }

  async function prepareRepo(request: SandboxRequest, workdir: string, entry: WarmEntry, cold: boolean) {
    const url = request.agent.repoUrl;
    if (!url) throw new Error(`repo agent ${request.agent.name} has no repoUrl`);
    const repo: RepoPaths = { gitDir: gitDirOf(request.conversationId), workTree: workdir };
    if (!cold) {
      await refresh(repo, entry.branch, false);
      return repo;
    }
    if (await exists(path.join(repo.gitDir, "HEAD"))) {
      await excludeUploads(repo);
      entry.branch = await remoteDefaultBranch(repo);
      await refresh(repo, entry.branch, true);
    } else {
      await rm(repo.gitDir, { recursive: true, force: true });
      await cloneInto(url, repo, dirs.tmp);
      entry.branch = await remoteDefaultBranch(repo);
    }
    return repo;
  }

  async function acquire(request: SandboxRequest): Promise<TurnSandbox> {
    if (request.isolated) return acquireIsolated(request);
    const key = conversationDirName(request.conversationId);
    const workdir = conversationDir(request.conversationId);
    const previous = warm.get(key);
    const cold = previous === undefined || previous.agentKey !== agentKey(request.agent);
    const entry: WarmEntry =
      cold || !previous
        ? { agentKey: agentKey(request.agent), timer: undefined, manifest: null, branch: null }
        : previous;
    if (cold) await mkdir(workdir, { recursive: true });

    let repo: RepoPaths | null = null;
    if (request.agent.kind === "repo") {
      repo = await prepareRepo(request, workdir, entry, cold);
    } else {
      if (request.agent.filesDir) {
        entry.manifest = await restoreAgentFiles(request.agent.filesDir, workdir, entry.manifest);
      }
      await resetOutputs(workdir);
    }
    const attachments = await writeAttachments(workdir, request.attachments);
    // What a writable turn changed is measured from here (attachments are excluded from the repository).
    const baseline = repo && !request.readOnly ? await snapshotWorkTree(repo) : undefined;
    keepWarm(key, entry);

    return {
      workdir,
      cold,
      attachments,
      tools: toolsFor(workdir, request.agent),
      finish: once(async () => {
        try {
          if (repo) {
            const pushedCommit = request.readOnly
              ? null
              : await commitAndPush(repo, entry.branch ?? FALLBACK_BRANCH, request.conversationId, baseline);
            return { pushedCommit, publishedOutputs: [] };
          }
          const publishedOutputs = await publishOutputs(
            workdir,
            storeDir(request.agent.workspaceId, request.agent.name),
          );
          return { pushedCommit: null, publishedOutputs };
        } finally {
          if (warm.get(key) === entry) keepWarm(key, entry);
        }
      }),
    };
  }

  async function fork(parentConversationId: string, childConversationId: string): Promise<void> {
    await remove(childConversationId);
    const pairs: [string, string][] = [
      [conversationDir(parentConversationId), conversationDir(childConversationId)],
      [gitDirOf(parentConversationId), gitDirOf(childConversationId)],
    ];
    for (const [from, to] of pairs) {
      if (!(await exists(from))) continue;
      // Copy into a scratch name first so a half-copied child is never taken for a real one.
      const scratch = path.join(dirs.tmp, `fork-${randomUUID()}`);
      await cp(from, scratch, {
        recursive: true,
        verbatimSymlinks: true,
        errorOnExist: true,
        // Directories, files and links only: a FIFO or socket a tool left would make cp throw.
        filter: copyableEntry,
      });
      await rm(to, { recursive: true, force: true });
      await rename(scratch, to);
    }
  }

  async function remove(conversationId: string): Promise<void> {
    const key = conversationDirName(conversationId);
    const entry = warm.get(key);
    if (entry?.timer) clearTimeout(entry.timer);
    warm.delete(key);
    await rm(conversationDir(conversationId), { recursive: true, force: true });
    await rm(gitDirOf(conversationId), { recursive: true, force: true });
  }

  return {
    isolation,
    acquire,
    fork,
    remove,
    listWorkspaceOutputs: (workspaceId, agent) => listStoreFiles(storeDir(workspaceId, agent)),
    readWorkspaceOutput: (workspaceId, agent, relPath) =>
      readStoreFile(storeDir(workspaceId, agent), relPath),
    async close() {
      for (const entry of warm.values()) if (entry.timer) clearTimeout(entry.timer);
      warm.clear();
      await rm(dirs.tmp, { recursive: true, force: true });
    },
  };
}
