/**
 * What the host offers the sandbox, found once at start: whether bubblewrap works, setpriv, GNU timeout and
 * the parent-death signal, the sandbox users, cgroups; and the notices the server prints about what is
 * missing. Secure by default: when commands should run as an unprivileged user and cannot, they do not run.
 */
import { chown, mkdtemp, rm } from "node:fs/promises";
import path from "node:path";
import { type CgroupSupport, detectCgroups } from "./cgroups.ts";
import { DEFAULT_BWRAP_COMMAND, probeBwrapProblem, resolveExecutable } from "./isolation.ts";
import { BWRAP_NOT_INSTALLED } from "./isolation-problem.ts";
import { detectLauncherTools, launchSpec } from "./launcher.ts";
import { DEFAULT_SANDBOX_LIMITS, type SandboxLimits } from "./limits.ts";
import { runProcess } from "./process-runner.ts";
import { type HostUser, resolveSandboxIdentity, type SandboxIdentity } from "./sandbox-user.ts";
import type { IsolationMode } from "./tool-runner.ts";
import type { SandboxManagerOptions } from "./types.ts";

export interface HostSetup {
  bwrapCommand: string;
  isolation: IsolationMode;
  setprivCommand: string | null;
  timeoutCommand: string | null;
  parentDeathSignal: boolean;
  identity: SandboxIdentity;
  cgroups: CgroupSupport;
  limits: SandboxLimits;
  /** Why commands cannot run as an unprivileged user (tools are then refused), or null. */
  userProblem: string | null;
  /** Why bubblewrap cannot build a sandbox here, with the fix; null when it can. */
  bwrapProblem: string | null;
}

/** `tmpDir` holds the probes' scratch directories; `root` is named in the advice when the user switch fails. */
export async function detectHost(
  options: SandboxManagerOptions & { bwrapCommand?: string },
  root: string,
  tmpDir: string,
): Promise<HostSetup> {
  const bwrapCommand = resolveExecutable(options.bwrapCommand ?? DEFAULT_BWRAP_COMMAND);
  const probeDir = await mkdtemp(path.join(tmpDir, "probe-"));
  // A bare name means it is not on the server's PATH: that is "not installed". (Spawned with an empty
  // environment, the bare name would still be found in /usr/bin or /bin, whatever PATH says.)
  const bwrapProblem = bwrapCommand.includes("/")
    ? await probeBwrapProblem(bwrapCommand, probeDir)
    : BWRAP_NOT_INSTALLED;
  const bwrapWorks = bwrapProblem === null;
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
  const cgroups: CgroupSupport =
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
  const host = {
    bwrapCommand,
    isolation,
    setprivCommand,
    timeoutCommand,
    parentDeathSignal,
    identity,
    cgroups,
    limits,
    userProblem: null,
    bwrapProblem,
  };
  const userProblem = identity.mode === "server" ? null : await probeUserSwitch(host, root, tmpDir);
  if (userProblem !== null) isolation = "unavailable";
  return { ...host, isolation, userProblem };
}

/** Runs `true` as a sandbox user over a directory of its own, as every command will be run. */
async function probeUserSwitch(host: HostSetup, root: string, tmpDir: string): Promise<string | null> {
  const { bwrapCommand, setprivCommand, identity, limits, parentDeathSignal } = host;
  const dir = await mkdtemp(path.join(tmpDir, "probe-user-"));
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

/** What the server says at start about what the host lacks (and what that costs). */
export function hostNotices(host: HostSetup, leftovers: string | null): string[] {
  const { isolation, userProblem, bwrapProblem, identity, timeoutCommand, parentDeathSignal, cgroups } = host;
  return [
    ...(leftovers ? [leftovers] : []),
    ...(isolation === "unavailable" && bwrapProblem ? [`tools refused: ${bwrapProblem}`] : []),
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
  ];
}
