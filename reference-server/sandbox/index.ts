/**
 * The sandbox manager: where each turn runs. Layout under rootDir:
 *   conversations/<sha256(conversation id)>/   persistent working directory (the one tools see)
 *   repos/<sha256(conversation id)>.git        git directory of a repo agent's clone (never shown to tools)
 *   workspace-store/<workspace>/<agent>/       storage agents' published outputs
 *   local-copies/<sha256(conversation id)>.json  whose copy the three above are (local-copies.ts)
 *   tmp/                                       isolated turns' throwaway directories, clone scratch
 * "Warm" is in-memory knowledge about a prepared working directory; reclaiming it loses no files.
 */
import { randomUUID } from "node:crypto";
import { chown, mkdir, mkdtemp, readdir, rename } from "node:fs/promises";
import path from "node:path";
import { type FileStore, outputsSet, type WriteFence, workingFilesSet } from "../store/file-store.ts";
import { writeAttachments } from "./attachments.ts";
import { DirectorySync } from "./directory-sync.ts";
import { createDiskQuota, type DiskQuota } from "./disk-quota.ts";
import { detectHost, hostNotices } from "./host-setup.ts";
import { prepareLayout } from "./layout.ts";
import { type CopyOwner, LocalCopyOwners, sameOwner } from "./local-copies.ts";
import { type RepoPaths, snapshotWorkTree } from "./repo.ts";
import { exists, prepareRepo, pushTurn, workTreeHead } from "./repo-turn.ts";
import { conversationDirName } from "./safe-paths.ts";
import type { HostUser } from "./sandbox-user.ts";
import { anySignal } from "./signals.ts";
import {
  listStoreFiles,
  OUTPUTS_DIR,
  publishOutputs,
  type RestoreManifest,
  readStoreFile,
  resetOutputs,
  restoreAgentFiles,
} from "./storage.ts";
import { createToolRunner } from "./tool-runner.ts";
import { chownTree, copyTree, removeTree } from "./tree-ops.ts";
import { TurnActivity } from "./turn-activity.ts";
import type {
  FinishReport,
  SandboxAgent,
  SandboxManager,
  SandboxManagerOptions,
  SandboxRequest,
  ToolName,
  TurnSandbox,
} from "./types.ts";

export { OverQuotaError } from "./directory-sync.ts";
export { DEFAULT_SANDBOX_LIMITS, parseSize, type SandboxLimits } from "./limits.ts";
export type { CopyOwner } from "./local-copies.ts";
export { RepoRefusedError } from "./repo.ts";
export { SandboxPathError } from "./safe-paths.ts";
export { parseSandboxUser, type SandboxUserSetting } from "./sandbox-user.ts";
export { refusedNoIsolation } from "./tool-runner.ts";

interface WarmEntry {
  /** The agent the directory was prepared for; another agent means a cold start. */
  agentKey: string;
  timer: NodeJS.Timeout | undefined;
  manifest: RestoreManifest | null;
  branch: string | null;
  /** The checked-out commit when the work tree was last given to the sandbox user (repo agents). */
  ownedHead?: string | null;
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

const SWEEP_AFTER_MS = 60 * 60_000;
const SWEEP_EVERY_MS = 10 * 60_000;

/** The sync of local directories with the shared file store, or null where there is none (one instance). */
async function sharedFilesOf(fileStore: FileStore | undefined, root: string): Promise<DirectorySync | null> {
  if (!fileStore) return null;
  const stateDir = path.join(root, "shared-state");
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  return new DirectorySync(fileStore, stateDir);
}

function fenceOf(request: { conversationId: string; fence?: number }): WriteFence | undefined {
  return request.fence === undefined
    ? undefined
    : { conversationId: request.conversationId, token: request.fence };
}

/** The conversation a turn's request is for, as its local copy records it. */
function ownerOf(request: SandboxRequest): CopyOwner {
  return {
    conversationId: request.conversationId,
    workspaceId: request.agent.workspaceId,
    agent: request.agent.name,
    generation: request.generation,
  };
}

/** Whether a directory holds anything (a missing one does not). */
async function holdsEntries(dir: string): Promise<boolean> {
  const entries = await readdir(dir).catch(() => []);
  return entries.length > 0;
}

export interface CreateSandboxManagerOptions extends SandboxManagerOptions {
  /** bubblewrap executable; default `bwrap` on PATH (tests name a missing one to get no isolation). */
  bwrapCommand?: string;
}

export async function createSandboxManager(options: CreateSandboxManagerOptions): Promise<SandboxManager> {
  const layout = await prepareLayout(options.rootDir);
  const { dirs, conversationDir, gitDirOf, storeDir } = layout;
  const host = await detectHost(options, layout.root, dirs.tmp);
  const {
    bwrapCommand,
    isolation,
    setprivCommand,
    timeoutCommand,
    parentDeathSignal,
    identity,
    cgroups,
    limits,
  } = host;
  const isolationProblem = isolation === "unavailable" ? (host.bwrapProblem ?? host.userProblem) : null;
  // What the server's git may check out or push: what one conversation's working directory may hold.
  const checkoutQuota = { bytes: limits.diskBytes, files: limits.files };

  const sharedFiles = await sharedFilesOf(options.fileStore, layout.root);
  const owners = await LocalCopyOwners.open(path.join(layout.root, "local-copies"));
  // Where instances share the store, a copy without an owner record (left by an older version) is a cache whose
  // conversation nobody can name any more: it goes before any turn could take it for another's.
  if (sharedFiles) await removeUnowned();
  /** What a working directory, or a conversation's outputs folder, may hold: what a restore may write. */
  const syncLimits = { bytes: limits.diskBytes, entries: limits.files };

  // Blobs no conversation refers to any more (deleted, overwritten, or uploaded by a turn that could not
  // commit), swept by every instance now and then; an hour leaves any writer time to commit what it asked for.
  const sweeper = options.fileStore
    ? setInterval(() => void options.fileStore?.sweep(SWEEP_AFTER_MS).catch(() => undefined), SWEEP_EVERY_MS)
    : undefined;
  sweeper?.unref();

  const warm = new Map<string, WarmEntry>();
  /** The current turn of each working directory (by key), to end before anything else touches it. */
  const activity = new Map<string, TurnActivity>();
  const quotas = new Map<string, DiskQuota>();

  async function quiesce(key: string): Promise<void> {
    const current = activity.get(key);
    if (!current) return;
    await current.end();
    if (activity.get(key) === current) activity.delete(key);
  }

  function quotaFor(key: string, workdir: string): DiskQuota {
    let quota = quotas.get(key);
    if (!quota) {
      quota = createDiskQuota(workdir, limits.diskBytes, limits.files);
      quotas.set(key, quota);
    }
    return quota;
  }

  function keepWarm(key: string, entry: WarmEntry): void {
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = setTimeout(() => {
      if (warm.get(key) !== entry) return;
      warm.delete(key);
      quotas.delete(key);
    }, options.idleMs);
    entry.timer.unref();
    warm.set(key, entry);
  }

  /** The turn's tools: one call at a time, each ended with the turn (or by the caller's signal). */
  function toolsFor(
    workdir: string,
    agent: SandboxAgent,
    user: HostUser | null,
    turn: TurnActivity,
    disk: DiskQuota,
  ) {
    const runner = createToolRunner({
      workdir,
      isolation,
      isolationProblem,
      secrets: agent.secrets,
      timeoutMs: options.toolTimeoutMs,
      outputCapBytes: options.toolOutputCapBytes,
      bwrapCommand,
      setprivCommand,
      timeoutCommand,
      parentDeathSignal,
      user,
      limits,
      cgroups,
      disk,
    });
    return {
      run: (name: ToolName, input: Record<string, unknown>, signal?: AbortSignal) =>
        turn.run(() => runner.run(name, input, signal ? anySignal(turn.signal, signal) : turn.signal)),
    };
  }

  /** Starts a turn on `key`: the previous one's calls are ended first. */
  async function beginTurn(key: string): Promise<TurnActivity> {
    await quiesce(key);
    const turn = new TurnActivity();
    activity.set(key, turn);
    return turn;
  }

  function once(
    fn: (outcome: "completed" | "failed") => Promise<FinishReport>,
  ): (outcome?: "completed" | "failed") => Promise<FinishReport> {
    let result: Promise<FinishReport> | undefined;
    return (outcome = "completed") => {
      result ??= fn(outcome);
      return result;
    };
  }

  async function acquireIsolated(request: SandboxRequest): Promise<TurnSandbox> {
    const workdir = await mkdtemp(path.join(dirs.tmp, "isolated-"));
    const key = `isolated:${workdir}`;
    const turn = await beginTurn(key);
    const user = identity.userFor(conversationDirName(request.conversationId));
    if (user) await chown(workdir, user.uid, user.gid);
    const disk = createDiskQuota(workdir, limits.diskBytes, limits.files);
    const attachments = await writeAttachments(workdir, request.attachments, user, disk);
    return {
      workdir,
      cold: true,
      attachments,
      tools: toolsFor(workdir, request.agent, user, turn, disk),
      finish: once(async () => {
        await quiesce(key);
        await removeTree(workdir);
        return { pushedCommit: null, publishedOutputs: [] };
      }),
    };
  }

  /** Directories of conversations (and their clones) that no owner record names. */
  async function removeUnowned(): Promise<void> {
    for (const name of await readdir(dirs.conversations).catch(() => [] as string[]))
      if (!(await owners.has(name))) await removeTree(path.join(dirs.conversations, name));
    for (const name of await readdir(dirs.repos).catch(() => [] as string[]))
      if (!(await owners.has(name.replace(/\.git$/, "")))) await removeTree(path.join(dirs.repos, name));
  }

  /**
   * Makes the id's local copy the owner's before anything of it is used: a copy made for another conversation
   * (a deleted one whose id was taken again, in this workspace or another) is wiped first.
   */
  async function claim(owner: CopyOwner): Promise<void> {
    const recorded = await owners.read(owner.conversationId);
    if (recorded !== null && sameOwner(recorded, owner)) return;
    // A copy without a record predates the records. With one instance it is this conversation's (a delete
    // removes the copy at once); where instances share the store it is a cache and may be anyone's.
    if (recorded !== null || sharedFiles !== null) await evictLocal(owner.conversationId);
    await owners.write(owner);
  }

  async function acquire(request: SandboxRequest): Promise<TurnSandbox> {
    if (request.isolated) return acquireIsolated(request);
    await claim(ownerOf(request));
    const key = conversationDirName(request.conversationId);
    const workdir = conversationDir(request.conversationId);
    const previous = warm.get(key);
    const cold = previous === undefined || previous.agentKey !== agentKey(request.agent);
    const entry: WarmEntry =
      cold || !previous
        ? { agentKey: agentKey(request.agent), timer: undefined, manifest: null, branch: null }
        : previous;
    const turn = await beginTurn(key);
    const user = identity.userFor(key);
    if (cold) await mkdir(workdir, { recursive: true, mode: 0o700 });

    let repo: RepoPaths | null = null;
    let gitWrote = false;
    /** Whether the server changed the working directory since the quota last measured it. */
    let changed = cold;
    if (request.agent.kind === "repo") {
      const url = request.agent.repoUrl;
      if (!url) throw new Error(`repo agent ${request.agent.name} has no repoUrl`);
      const paths: RepoPaths = { gitDir: gitDirOf(request.conversationId), workTree: workdir };
      repo = await prepareRepo(url, paths, entry, cold, dirs.tmp, checkoutQuota);
      // A fetch, merge or an earlier turn's rebase wrote files as the server: the head tells.
      const head = await workTreeHead(repo.gitDir);
      gitWrote = head !== entry.ownedHead;
      entry.ownedHead = head;
    } else {
      // Another instance may have run the last turn: the local copy is brought to the stored generation first.
      if (sharedFiles) {
        const pulled = await sharedFiles.pull(
          workingFilesSet(request.conversationId),
          workdir,
          user,
          syncLimits,
        );
        if (pulled.changed) changed = true;
      }
      if (request.agent.filesDir) {
        const previous = entry.manifest;
        entry.manifest = await restoreAgentFiles(request.agent.filesDir, workdir, previous, user);
        // A file left as it was keeps its manifest entry (the same object): anything else was copied.
        for (const [rel, stamps] of entry.manifest) if (previous?.get(rel) !== stamps) changed = true;
      }
      if (await resetOutputs(workdir, user)) changed = true;
    }
    // What the server wrote as itself (a clone, a checkout, files of an older server) becomes the sandbox
    // user's; warm turns where git changed nothing skip the walk.
    if (user && (cold || gitWrote)) await chownTree(workdir, user);
    const disk = quotaFor(key, workdir);
    // What the last turn left was measured before the server emptied outputs/, restored files or checked out:
    // measured anew then (a warm turn where nothing changed keeps the measurement, and saves a walk).
    if (changed || gitWrote) disk.forget();
    const attachments = await writeAttachments(workdir, request.attachments, user, disk);
    // What a writable turn changed is measured from here (attachments are excluded from the repository).
    const baseline = repo && !request.readOnly ? await snapshotWorkTree(repo, limits.diskBytes) : undefined;
    keepWarm(key, entry);

    return {
      workdir,
      cold,
      attachments,
      tools: toolsFor(workdir, request.agent, user, turn, disk),
      finish: once(async (outcome) => {
        // Nothing of the turn may run while its changes are committed or published.
        await quiesce(key);
        try {
          if (!repo) {
            // A turn cut short (disconnect, time-out, failure) does not publish half its work; its files
            // stay, as they would on one instance: they are saved for whichever instance runs the next turn.
            const publishedOutputs =
              outcome === "failed"
                ? []
                : await publish(request.agent, request.conversationId, workdir, request.fence);
            if (sharedFiles)
              await sharedFiles.push(workingFilesSet(request.conversationId), workdir, syncLimits, {
                // outputs/ is emptied at every turn's start: what it held is in the workspace store.
                exclude: (rel) => rel === OUTPUTS_DIR || rel.startsWith(`${OUTPUTS_DIR}/`),
                fence: fenceOf(request),
              });
            return { pushedCommit: null, publishedOutputs };
          }
          // A turn cut short (disconnect, time-out, failure) does not push half its work.
          if (outcome === "failed" || request.readOnly) return { pushedCommit: null, publishedOutputs: [] };
          const pushedCommit = await pushTurn(
            repo,
            entry.branch,
            request.conversationId,
            checkoutQuota,
            baseline,
            limits.diskBytes,
          );
          return { pushedCommit, publishedOutputs: [] };
        } finally {
          if (warm.get(key) === entry) keepWarm(key, entry);
        }
      }),
    };
  }

  /**
   * Copies `outputs/` to the conversation's folder of the workspace store. Shared, the folder is first
   * brought to the stored generation (so the store folder's quota counts every instance's earlier outputs)
   * and saved after.
   */
  async function publish(
    agent: SandboxAgent,
    conversationId: string,
    workdir: string,
    fence: number | undefined,
  ): Promise<string[]> {
    const folder = storeDir(agent.workspaceId, agent.name, conversationId);
    if (!sharedFiles) return publishOutputs(workdir, folder, limits.diskBytes, limits.files);
    // Most turns publish nothing: no query for them.
    if (!(await holdsEntries(path.join(workdir, OUTPUTS_DIR)))) return [];
    const set = outputsSet(agent.workspaceId, agent.name, conversationId);
    await sharedFiles.pull(set, folder, null, syncLimits);
    const published = await publishOutputs(workdir, folder, limits.diskBytes, limits.files);
    if (published.length > 0)
      await sharedFiles.push(set, folder, syncLimits, { fence: fenceOf({ conversationId, fence }) });
    return published;
  }

  /** The conversation's outputs folder, brought to the stored generation where files are shared. */
  async function outputsFolder(workspaceId: string, agent: string, conversationId: string): Promise<string> {
    const folder = storeDir(workspaceId, agent, conversationId);
    if (sharedFiles)
      await sharedFiles.pull(outputsSet(workspaceId, agent, conversationId), folder, null, syncLimits);
    return folder;
  }

  async function fork(parent: CopyOwner, child: CopyOwner): Promise<void> {
    const parentConversationId = parent.conversationId;
    const childConversationId = child.conversationId;
    // The parent's files are copied only while none of its processes runs (no link swapped mid-copy).
    await quiesce(conversationDirName(parentConversationId));
    await remove(child);
    await owners.write(child);
    // Only a copy made for this parent is the parent's files (the shared store holds them anyway).
    const recorded = await owners.read(parentConversationId);
    const parentsCopy = recorded === null ? sharedFiles === null : sameOwner(recorded, parent);
    const pairs: [string, string][] = !parentsCopy
      ? []
      : [
          [conversationDir(parentConversationId), conversationDir(childConversationId)],
          [gitDirOf(parentConversationId), gitDirOf(childConversationId)],
        ];
    for (const [from, to] of pairs) {
      if (!(await exists(from))) continue;
      // Copy into a scratch name first so a half-copied child is never taken for a real one.
      const scratch = path.join(dirs.tmp, `fork-${randomUUID()}`);
      await copyTree(from, scratch);
      await removeTree(to);
      await rename(scratch, to);
    }
    // The stored files are the parent's as its last turn left them, wherever it ran; the local copy above
    // only saves the child's first turn here the downloads.
    if (options.fileStore)
      await options.fileStore.copy(
        workingFilesSet(parentConversationId),
        workingFilesSet(childConversationId),
      );
  }

  /** The outputs folder of the owner's conversation, and what this instance knew of its shared set. */
  async function removeOutputsCopy(owner: CopyOwner): Promise<void> {
    await removeTree(storeDir(owner.workspaceId, owner.agent, owner.conversationId));
    await sharedFiles?.forget(outputsSet(owner.workspaceId, owner.agent, owner.conversationId));
  }

  async function evictLocal(conversationId: string): Promise<void> {
    const key = conversationDirName(conversationId);
    await quiesce(key);
    const entry = warm.get(key);
    if (entry?.timer) clearTimeout(entry.timer);
    warm.delete(key);
    quotas.delete(key);
    const recorded = await owners.read(conversationId);
    await removeTree(conversationDir(conversationId));
    await removeTree(gitDirOf(conversationId));
    await sharedFiles?.forget(workingFilesSet(conversationId));
    if (recorded) await removeOutputsCopy(recorded);
    // Last: a copy half removed still names its owner, so the next claim or reconcile finishes the job.
    await owners.remove(conversationId);
  }

  async function remove(owner: CopyOwner): Promise<void> {
    await evictLocal(owner.conversationId);
    // Also where no record named it (a copy older than the records).
    await removeOutputsCopy(owner);
    await options.fileStore?.remove(workingFilesSet(owner.conversationId));
    await options.fileStore?.remove(outputsSet(owner.workspaceId, owner.agent, owner.conversationId));
  }

  return {
    isolation,
    isolationProblem,
    acquire,
    fork,
    remove,
    evictLocal,
    localCopies: () => owners.list(),
    localCopyOwner: (conversationId) => owners.read(conversationId),
    sandboxUser: identity.mode,
    notices: hostNotices(host, layout.leftovers),
    cgroups: cgroups.version,
    listWorkspaceOutputs: async (workspaceId, agent, conversationId) =>
      listStoreFiles(await outputsFolder(workspaceId, agent, conversationId)),
    readWorkspaceOutput: async (workspaceId, agent, conversationId, relPath) =>
      readStoreFile(await outputsFolder(workspaceId, agent, conversationId), relPath),
    async close() {
      await Promise.all([...activity.keys()].map(quiesce));
      for (const entry of warm.values()) if (entry.timer) clearTimeout(entry.timer);
      warm.clear();
      clearInterval(sweeper);
      await cgroups.close();
      await removeTree(dirs.tmp).catch(() => undefined);
    },
  };
}
