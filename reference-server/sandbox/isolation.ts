/**
 * Bubblewrap: how a sandboxed command is launched, and whether this machine can launch one at all.
 * The sandbox sees read-only /usr (plus the /bin, /lib... links into it), a private read-only /proc,
 * a minimal /dev, an empty /tmp, its own working directory at /workspace, no network, no capabilities
 * and only the environment it is given.
 */
import { accessSync, constants, lstatSync, readlinkSync } from "node:fs";
import path from "node:path";
import { explainBwrapFailure } from "./isolation-problem.ts";
import { runProcess } from "./process-runner.ts";
import { seccompProgram } from "./seccomp.ts";

export const SANDBOX_WORKDIR = "/workspace";

/** /bin, /lib... are links into /usr on merged-/usr systems and real directories on older ones. */
function rootLinkArgs(): string[] {
  const args: string[] = [];
  for (const name of ["bin", "sbin", "lib", "lib32", "lib64"]) {
    const host = `/${name}`;
    try {
      const stats = lstatSync(host);
      if (stats.isSymbolicLink()) args.push("--symlink", readlinkSync(host), host);
      else if (stats.isDirectory()) args.push("--ro-bind", host, host);
    } catch {
      // Absent on this machine: nothing to expose.
    }
  }
  return args;
}

let cachedRootLinks: string[] | undefined;

/** Sizes of the sandbox's own RAM-backed mounts. */
export interface TmpfsSizes {
  tmpBytes: number;
  shmBytes: number;
}

const PROBE_SIZES: TmpfsSizes = { tmpBytes: 1024 * 1024, shmBytes: 1024 * 1024 };

/** Where bubblewrap reads what is not on its command line. */
export interface BwrapInputs {
  /** `--args`: the sandbox's environment, so no secret ever appears on a command line (`ps`). */
  envFd: number;
  /** `--seccomp`: the filter of seccomp.ts; null where this architecture has none. */
  seccompFd: number | null;
}

/** The argv (after `bwrap`) running `/bin/sh -c command` in `workdir`. */
export function bwrapArgs(
  workdir: string,
  command: string,
  sizes: TmpfsSizes,
  inputs: BwrapInputs,
): string[] {
  cachedRootLinks ??= rootLinkArgs();
  return [
    "--unshare-all",
    // A user namespace of its own (also when the server is root), in which no further one can be made:
    // nested namespaces hand out capabilities over kernel code that most local privilege escalations go through.
    "--unshare-user",
    "--disable-userns",
    ...(inputs.seccompFd === null ? [] : ["--seccomp", String(inputs.seccompFd)]),
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--ro-bind",
    "/usr",
    "/usr",
    ...cachedRootLinks,
    // Some /usr/bin entries are links through /etc/alternatives; nothing else of /etc is shown.
    "--ro-bind-try",
    "/etc/alternatives",
    "/etc/alternatives",
    "--proc",
    "/proc",
    // bwrap 0.8 leaves /proc/sys writable (its own read-only cover is skipped: access() on the directory
    // fails). With the server running as root the sandbox's uid is the host's root, and global sysctls
    // such as kernel.core_pattern would be writable: a way out. So /proc/sys and all of /proc are read-only.
    "--ro-bind",
    "/proc/sys",
    "/proc/sys",
    "--remount-ro",
    "/proc",
    "--dev",
    "/dev",
    // RAM-backed, so sized: an unbounded tmpfs is a way to take the host's memory.
    "--size",
    String(sizes.shmBytes),
    "--tmpfs",
    "/dev/shm",
    "--size",
    String(sizes.tmpBytes),
    "--tmpfs",
    "/tmp",
    "--bind",
    workdir,
    SANDBOX_WORKDIR,
    "--chdir",
    SANDBOX_WORKDIR,
    // --clearenv first: the --setenv pairs read from envFd come after it, in argument order.
    "--clearenv",
    "--args",
    String(inputs.envFd),
    "--",
    "/bin/sh",
    "-c",
    command,
  ];
}

/** `--setenv NAME VALUE` for each variable, NUL-separated, as bwrap's `--args` reads them. */
export function envArgsPayload(env: Record<string, string>): Buffer {
  const parts: string[] = [];
  for (const [name, value] of Object.entries(env)) parts.push("--setenv", name, value);
  return Buffer.from(parts.map((part) => `${part}\0`).join(""));
}

const SECCOMP_PROGRAM = seccompProgram();

/**
 * What bubblewrap reads from descriptors: the environment on fd 3 and the seccomp filter on fd 4, as the
 * payloads to write to them (in fd order) and the fd numbers to give bubblewrap.
 */
export function bwrapPipes(env: Record<string, string>): { pipes: Buffer[]; inputs: BwrapInputs } {
  const pipes = [envArgsPayload(env)];
  if (SECCOMP_PROGRAM) pipes.push(SECCOMP_PROGRAM);
  return { pipes, inputs: { envFd: 3, seccompFd: SECCOMP_PROGRAM ? 4 : null } };
}

/** Null when this machine's architecture has no seccomp table: commands then run without the filter. */
export const seccompMissing: string | null = SECCOMP_PROGRAM
  ? null
  : `no seccomp filter for ${process.arch}: fallocate and io_uring can get around the disk quota`;

/** The bubblewrap executable looked up on PATH (the server may be given another). */
export const DEFAULT_BWRAP_COMMAND = "bwrap";

/**
 * The absolute path of `command` on the server's PATH (or `command` unchanged when it has a `/` or is
 * not found). bwrap is then started with an empty environment: not even the server's PATH reaches
 * the sandbox (its init process keeps the environment it was started with).
 */
export function resolveExecutable(command: string): string {
  if (command.includes("/")) return command;
  for (const dir of (process.env.PATH ?? "/usr/bin:/bin").split(":")) {
    if (!dir) continue;
    const candidate = path.join(dir, command);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not in this directory.
    }
  }
  return command;
}

/** Runs `true` in a sandbox over `probeDir`; resolves whether bubblewrap works here. */
export async function probeBwrap(bwrapCommand: string, probeDir: string): Promise<boolean> {
  return (await probeBwrapProblem(bwrapCommand, probeDir)) === null;
}

/** Runs `true` in a sandbox over `probeDir`; resolves null when bubblewrap works here, else what failed and the fix. */
export async function probeBwrapProblem(bwrapCommand: string, probeDir: string): Promise<string | null> {
  // The same namespaces and filter as every command: where they cannot be had, no command runs.
  const { pipes, inputs } = bwrapPipes({ PATH: "/usr/bin:/bin" });
  const result = await runProcess({
    file: bwrapCommand,
    args: bwrapArgs(probeDir, "true", PROBE_SIZES, inputs),
    pipes,
    cwd: probeDir,
    env: {},
    timeoutMs: 10_000,
    // bwrap's own one-line complaint, which explainBwrapFailure turns into advice.
    outputCapBytes: 2048,
  });
  if (result.exitCode === 0 && result.spawnError === undefined) return null;
  return explainBwrapFailure(bwrapCommand, result);
}
