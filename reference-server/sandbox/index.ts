/**
 * The sandbox manager: where each turn runs. Layout under rootDir:
 *   conversations/<sha256(conversation id)>/   persistent working directory (the one tools see)
 *   repos/<sha256(conversation id)>.git        git directory of a repo agent's clone (never shown to tools)
 *   workspace-store/<workspace>/<agent>/       storage agents' published outputs
 *   tmp/                                       isolated turns' throwaway directories, clone scratch
 * "Warm" is in-memory knowledge about a prepared working directory; reclaiming it loses no files.
 */
import { randomUUID } from "node:crypto";
import { chmod, chown, mkdir, mkdtemp, readFile, realpath, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { writeAttachments } from "./attachments.ts";
import { detectCgroups } from "./cgroups.ts";
import { createDiskQuota, type DiskQuota } from "./disk-quota.ts";
import { DEFAULT_BWRAP_COMMAND, probeBwrap, resolveExecutable } from "./isolation.ts";
import { detectLauncherTools, launchSpec } from "./launcher.ts";
import { DEFAULT_SANDBOX_LIMITS } from "./limits.ts";
import { runProcess } from "./process-runner.ts";
import {
  cloneInto,
  commitAndPush,
  excludeUploads,
  pruneLooseObjects,
  type RepoPaths,
  refresh,
  remoteDefaultBranch,
  snapshotWorkTree,
} from "./repo.ts";
import { conversationDirName, safeSegment } from "./safe-paths.ts";
import { type HostUser, resolveSandboxIdentity, type SandboxIdentity } from "./sandbox-user.ts";
import { anySignal } from "./signals.ts";
import {
  listStoreFiles,
  publishOutputs,
  type RestoreManifest,
  readStoreFile,
  resetOutputs,
  restoreAgentFiles,
} from "./storage.ts";
import { createToolRunner, type IsolationMode } from "./tool-runner.ts";
import { chownTree, copyTree, removeTree } from "./tree-ops.ts";
import type {
  FinishReport,
  SandboxAgent,
  SandboxManager,
  SandboxManagerOptions,
  SandboxRequest,
  ToolName,
  TurnSandbox,
} from "./types.ts";

export { DEFAULT_SANDBOX_LIMITS, parseSize, type SandboxLimits } from "./limits.ts";
export { RepoRefusedError } from "./repo.ts";
export { SandboxPathError } from "./safe-paths.ts";
export { parseSandboxUser, type SandboxUserSetting } from "./sandbox-user.ts";
export { REFUSED_NO_ISOLATION } from "./tool-runner.ts";

/** Pushed to when the remote is empty and names no default branch. */
const FALLBACK_BRANCH = "main";

/**
 * The commands and tool calls of one conversation's turn. Everything the server does to a working directory
 * (restore, attachments, commit, publish, fork, delete, the next turn) first ends the previous turn's calls
 * and waits until they are gone: no process of a turn is ever alive while the server touches its files.
 */
class TurnActivity {
  readonly #abort = new AbortController();
  readonly #calls = new Set<Promise<unknown>>();
  #tail: Promise<unknown> = Promise.resolve();

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** Runs `call` after the turn's earlier calls (one at a time), unless the turn was ended. */
  run<T>(call: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(call, call);
    const settled = result.catch(() => undefined);
    this.#tail = settled;
    this.#calls.add(settled);
    void settled.then(() => this.#calls.delete(settled));
    return result;
  }

  /** Ends every call of the turn (commands are killed with their whole cgroup) and waits for them. */
  async end(): Promise<void> {
    this.#abort.abort();
    await Promise.all([...this.#calls]);
  }
}

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

/** The work tree's checked-out commit (HEAD's target) read from the git directory, or null. */
async function workTreeHead(gitDir: string): Promise<string | null> {
  const head = await readFile(path.join(gitDir, "HEAD"), "utf8").catch(() => null);
  if (head === null) return null;
  const ref = /^ref: (.+)$/m.exec(head)?.[1];
  if (!ref) return head.trim();
  const loose = await readFile(path.join(gitDir, ref), "utf8").catch(() => null);
  return loose?.trim() ?? `${ref}@packed`;
}

async function exists(p: string): Promise<boolean> {
  return stat(p).then(
    () => true,
    () => false,
  );
}

export interface CreateSandboxManagerOptions extends SandboxManagerOptions {
  /** bubblewrap executable; default `bwrap` on PATH (tests name a missing one to get no isolation). */
  bwrapCommand?: string;
}

/** Directories the sandbox users must traverse (never list) to reach their working directory. */
const TRAVERSABLE = 0o711;

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
  // Throwaway directories of a previous run are garbage now; one that cannot go must not stop the server.
  const leftovers = await removeTree(dirs.tmp).then(
    () => null,
    (error: Error) => `could not empty ${dirs.tmp} at start: ${error.message}`,
  );
  for (const dir of Object.values(dirs)) await mkdir(dir, { recursive: true, mode: 0o700 });
  // Sandbox users reach their own directory by its full path (bubblewrap binds it as them); they may pass
  // through these, never list them. The clones and the store stay private to the server.
  for (const dir of [root, dirs.conversations, dirs.tmp]) await chmod(dir, TRAVERSABLE);

  const probeDir = await mkdtemp(path.join(dirs.tmp, "probe-"));
  // A bare name means it is not on the server's PATH: that is "not installed". (Spawned with an empty
  // environment, the bare name would still be found in /usr/bin or /bin, whatever PATH says.)
  const bwrapWorks = bwrapCommand.includes("/") && (await probeBwrap(bwrapCommand, probeDir));
  await rm(probeDir, { recursive: true, force: true });
  let isolation: IsolationMode = bwrapWorks ? "bwrap" : options.unsafeNoIsolation ? "none" : "unavailable";
  // A bare name means setpriv is not on the server's PATH: the server cannot switch users.
  const setprivFound = resolveExecutable("setpriv");
  const setprivCommand = setprivFound.includes("/") ? setprivFound : null;
  // coreutils' timeout (the wall clock each command's launcher holds, whatever becomes of the server) and
  // setpriv's parent-death signal.
  const { timeoutCommand, parentDeathSignal } =
    isolation === "bwrap"
      ? await detectLauncherTools(setprivCommand)
      : { timeoutCommand: null, parentDeathSignal: false };
  const isRoot = process.getuid?.() === 0;
  const identity: SandboxIdentity = resolveSandboxIdentity(
    options.sandboxUser ?? "auto",
    isolation === "bwrap" && isRoot && setprivCommand !== null,
  );
  const cgroups =
    isolation === "bwrap"
      ? await detectCgroups({
          pids: options.limits?.totalPids ?? DEFAULT_SANDBOX_LIMITS.totalPids,
          memoryBytes: options.limits?.totalMemoryBytes ?? DEFAULT_SANDBOX_LIMITS.totalMemoryBytes,
        })
      : {
          version: "none" as const,
          reason: "no isolation",
          create: async () => null,
          close: async () => undefined,
        };
  const limits = { ...DEFAULT_SANDBOX_LIMITS, ...options.limits };
  // What the server's git may check out or push: what one conversation's working directory may hold.
  const checkoutQuota = { bytes: limits.diskBytes, files: limits.files };
  // Secure by default: when commands should run as an unprivileged user and cannot, they do not run.
  const userProblem = identity.mode === "server" ? null : await probeUserSwitch();
  if (userProblem !== null) isolation = "unavailable";

  /** Runs `true` as a sandbox user over a directory of its own, as every command will be run. */
  async function probeUserSwitch(): Promise<string | null> {
    const dir = await mkdtemp(path.join(dirs.tmp, "probe-user-"));
    try {
      const user = identity.userFor("probe") as HostUser;
      await chown(dir, user.uid, user.gid);
      const spec = launchSpec({
        bwrapCommand,
        setprivCommand,
        workdir: dir,
        command: "true",
        env: { PATH: "/usr/bin:/bin" },
        user,
        limits,
        procsFiles: [],
        fileSizeBytes: limits.diskBytes,
        memoryRlimit: false,
        wallClock: null,
        parentDeathSignal,
      });
      const result = await runProcess({
        file: spec.file,
        args: spec.args,
        pipes: spec.pipes,
        cwd: dir,
        env: {},
        timeoutMs: 10_000,
        outputCapBytes: 4096,
      });
      if (result.exitCode === 0) return null;
      return `tools refused: they cannot run as an unprivileged user here (${result.output.trim() || result.spawnError || `exit ${result.exitCode}`}); every directory above ${root} must be searchable by others (chmod o+x), or start with --sandbox-user server to run them as the server's user`;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

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

  const conversationDir = (id: string) => path.join(dirs.conversations, conversationDirName(id));
  const gitDirOf = (id: string) => path.join(dirs.repos, `${conversationDirName(id)}.git`);
  // Each conversation publishes into its own folder: no conversation can overwrite another's outputs.
  const storeDir = (workspaceId: string, agent: string, conversationId: string) =>
    path.join(dirs.store, safeSegment(workspaceId), safeSegment(agent), conversationDirName(conversationId));

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

  async function prepareRepo(request: SandboxRequest, workdir: string, entry: WarmEntry, cold: boolean) {
    const url = request.agent.repoUrl;
    if (!url) throw new Error(`repo agent ${request.agent.name} has no repoUrl`);
    const repo: RepoPaths = { gitDir: gitDirOf(request.conversationId), workTree: workdir };
    if (!cold) {
      await refresh(repo, entry.branch, false, checkoutQuota);
      return repo;
    }
    if (await exists(path.join(repo.gitDir, "HEAD"))) {
      await excludeUploads(repo);
      entry.branch = await remoteDefaultBranch(repo);
      await refresh(repo, entry.branch, true, checkoutQuota);
    } else {
      await rm(repo.gitDir, { recursive: true, force: true });
      await cloneInto(url, repo, dirs.tmp, checkoutQuota);
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
    const turn = await beginTurn(key);
    const user = identity.userFor(key);
    if (cold) await mkdir(workdir, { recursive: true, mode: 0o700 });

    let repo: RepoPaths | null = null;
    let gitWrote = false;
    /** Whether the server changed the working directory since the quota last measured it. */
    let changed = cold;
    if (request.agent.kind === "repo") {
      repo = await prepareRepo(request, workdir, entry, cold);
      // A fetch, merge or an earlier turn's rebase wrote files as the server: the head tells.
      const head = await workTreeHead(repo.gitDir);
      gitWrote = head !== entry.ownedHead;
      entry.ownedHead = head;
    } else {
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
          // A turn cut short (disconnect, time-out, failure) neither pushes nor publishes half its work.
          if (outcome === "failed") return { pushedCommit: null, publishedOutputs: [] };
          if (repo) {
            if (request.readOnly) return { pushedCommit: null, publishedOutputs: [] };
            try {
              const pushedCommit = await commitAndPush(
                repo,
                entry.branch ?? FALLBACK_BRANCH,
                request.conversationId,
                checkoutQuota,
                baseline,
              );
              return { pushedCommit, publishedOutputs: [] };
            } finally {
              // A writable turn staged what it wrote (twice: the baseline and the commit), committed or not.
              await pruneLooseObjects(repo, limits.diskBytes).catch(() => undefined);
            }
          }
          const publishedOutputs = await publishOutputs(
            workdir,
            storeDir(request.agent.workspaceId, request.agent.name, request.conversationId),
            limits.diskBytes,
            limits.files,
          );
          return { pushedCommit: null, publishedOutputs };
        } finally {
          if (warm.get(key) === entry) keepWarm(key, entry);
        }
      }),
    };
  }

  async function fork(parentConversationId: string, childConversationId: string): Promise<void> {
    // The parent's files are copied only while none of its processes runs (no link swapped mid-copy).
    await quiesce(conversationDirName(parentConversationId));
    await remove(childConversationId);
    const pairs: [string, string][] = [
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
  }

  async function remove(conversationId: string): Promise<void> {
    const key = conversationDirName(conversationId);
    await quiesce(key);
    const entry = warm.get(key);
    if (entry?.timer) clearTimeout(entry.timer);
    warm.delete(key);
    quotas.delete(key);
    await removeTree(conversationDir(conversationId));
    await removeTree(gitDirOf(conversationId));
  }

  return {
    isolation,
    acquire,
    fork,
    remove,
    sandboxUser: identity.mode,
    notices: [
      ...(leftovers ? [leftovers] : []),
      ...(userProblem ? [userProblem] : []),
      ...(isolation === "bwrap" && identity.warning ? [identity.warning] : []),
      ...(isolation === "bwrap" && timeoutCommand === null
        ? [
            "no GNU timeout (coreutils) on the server's PATH: a command's time limit is held by the server alone, not while it is stalled",
          ]
        : []),
      ...(isolation === "bwrap" && !parentDeathSignal
        ? [
            "no setpriv with --pdeathsig (util-linux 2.33 or later) on the server's PATH: a command outlives a spawner killed together with the server, until its time limit",
          ]
        : []),
      ...(isolation === "bwrap" && cgroups.version === "none"
        ? [
            `no cgroups for tool limits (${cgroups.reason}): processes and memory per command are bounded by rlimits only, CPU per command not at all`,
          ]
        : []),
    ],
    cgroups: cgroups.version,
    listWorkspaceOutputs: (workspaceId, agent, conversationId) =>
      listStoreFiles(storeDir(workspaceId, agent, conversationId)),
    readWorkspaceOutput: (workspaceId, agent, conversationId, relPath) =>
      readStoreFile(storeDir(workspaceId, agent, conversationId), relPath),
    async close() {
      await Promise.all([...activity.keys()].map(quiesce));
      for (const entry of warm.values()) if (entry.timer) clearTimeout(entry.timer);
      warm.clear();
      await cgroups.close();
      await removeTree(dirs.tmp).catch(() => undefined);
    },
  };
}
