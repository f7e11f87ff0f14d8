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
import { mkdir, readdir, rename } from "node:fs/promises";
import path from "node:path";
import { writeAttachments } from "./attachments.ts";
import { CommandShares } from "./command-shares.ts";
import type { ConversationFiles } from "./conversation-files.ts";
import { createDiskQuota, type DiskQuota } from "./disk-quota.ts";
import { filesOnOneInstance } from "./files-on-one-instance.ts";
import { sharedFiles } from "./files-shared.ts";
import { detectHost, hostNotices } from "./host-setup.ts";
import { acquireIsolatedTurn } from "./isolated-turn.ts";
import { prepareLayout } from "./layout.ts";
import { measureLocalBytes } from "./local-bytes.ts";
import { type CopyOwner, LocalCopyOwners, sameOwner } from "./local-copies.ts";
import { type RepoPaths, snapshotWorkTree } from "./repo.ts";
import { exists, finishRepoTurn, prepareRepoTurn } from "./repo-turn.ts";
import { conversationDirName } from "./safe-paths.ts";
import type { HostUser } from "./sandbox-user.ts";
import { anySignal } from "./signals.ts";
import { listStoreFiles, type RestoreManifest, readStoreFile } from "./storage.ts";
import { finishStorageTurn, prepareStorageTurn } from "./storage-turn.ts";
import { createToolRunner } from "./tool-runner.ts";
import { chownTree, copyTree, removeTree } from "./tree-ops.ts";
import { finishOnce, TurnActivity } from "./turn-activity.ts";
import type {
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

/** The conversation a turn's request is for, as its local copy records it. */
function ownerOf(request: SandboxRequest): CopyOwner {
  return {
    conversationId: request.conversationId,
    workspaceId: request.agent.workspaceId,
    agent: request.agent.name,
    generation: request.generation,
  };
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

  // One instance or several: decided here, once (the conversations' files are all that differs).
  const filesContext = { storeDir, limits };
  const files: ConversationFiles = options.fileStore
    ? await sharedFiles(options.fileStore, layout.root, filesContext)
    : filesOnOneInstance(filesContext);
  const owners = await LocalCopyOwners.open(path.join(layout.root, "local-copies"));
  // Where instances share the store, a copy without an owner record (left by an older version) is a cache whose
  // conversation nobody can name any more: it goes before any turn could take it for another's.
  if (files.unrecordedCopyIsAnyones) await removeUnowned();

  const commandShares = new CommandShares(limits.commandsPerWorkspace, options.toolTimeoutMs);
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
        turn.run(() => {
          const ends = signal ? anySignal(turn.signal, signal) : turn.signal;
          return commandShares.run(agent.workspaceId, ends, () => runner.run(name, input, ends));
        }),
    };
  }

  /** Starts a turn on `key`: the previous one's calls are ended first. */
  async function beginTurn(key: string): Promise<TurnActivity> {
    await quiesce(key);
    const turn = new TurnActivity();
    activity.set(key, turn);
    return turn;
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
    if (recorded !== null || files.unrecordedCopyIsAnyones) await evictLocal(owner.conversationId);
    await owners.write(owner);
  }

  async function acquire(request: SandboxRequest): Promise<TurnSandbox> {
    if (request.isolated)
      return acquireIsolatedTurn(
        { tmpDir: dirs.tmp, limits, userFor: (key) => identity.userFor(key), beginTurn, quiesce, toolsFor },
        request,
      );
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
      const paths: RepoPaths = { gitDir: gitDirOf(request.conversationId), workTree: workdir };
      ({ repo, gitWrote } = await prepareRepoTurn(request, paths, entry, cold, dirs.tmp, checkoutQuota));
    } else if (await prepareStorageTurn(files, request, workdir, entry, user)) changed = true;
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
      finish: finishOnce(async (outcome) => {
        // Nothing of the turn may run while its changes are committed or published.
        await quiesce(key);
        try {
          if (!repo) return await finishStorageTurn(files, request, workdir, outcome);
          return await finishRepoTurn(
            request,
            repo,
            entry,
            outcome,
            checkoutQuota,
            baseline,
            limits.diskBytes,
          );
        } finally {
          if (warm.get(key) === entry) keepWarm(key, entry);
        }
      }),
    };
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
    const parentsCopy = recorded === null ? !files.unrecordedCopyIsAnyones : sameOwner(recorded, parent);
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
    await files.forkStored(parent, child);
  }

  /** The outputs folder of the owner's conversation, and what this instance knew of its shared set. */
  async function removeOutputsCopy(owner: CopyOwner): Promise<void> {
    await removeTree(storeDir(owner.workspaceId, owner.agent, owner.conversationId));
    await files.forgetOutputs(owner);
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
    await files.forgetWork(conversationId);
    if (recorded) await removeOutputsCopy(recorded);
    // Last: a copy half removed still names its owner, so the next claim or reconcile finishes the job.
    await owners.remove(conversationId);
  }

  async function remove(owner: CopyOwner): Promise<void> {
    await evictLocal(owner.conversationId);
    // Also where no record named it (a copy older than the records).
    await removeOutputsCopy(owner);
    await files.removeStored(owner);
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
    localBytes: (conversationIds, workspaceId) => measureLocalBytes(layout, conversationIds, workspaceId),
    sandboxUser: identity.mode,
    notices: hostNotices(host, layout.leftovers),
    cgroups: cgroups.version,
    listWorkspaceOutputs: async (workspaceId, agent, conversationId) =>
      listStoreFiles(await files.outputsFolder(workspaceId, agent, conversationId)),
    readWorkspaceOutput: async (workspaceId, agent, conversationId, relPath) =>
      readStoreFile(await files.outputsFolder(workspaceId, agent, conversationId), relPath),
    async close() {
      await Promise.all([...activity.keys()].map(quiesce));
      for (const entry of warm.values()) if (entry.timer) clearTimeout(entry.timer);
      warm.clear();
      files.close();
      await cgroups.close();
      await removeTree(dirs.tmp).catch(() => undefined);
    },
  };
}
