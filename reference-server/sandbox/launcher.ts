/**
 * How one sandboxed command is started: a tiny `/bin/bash` launcher joins the command's cgroups and sets its
 * rlimits while it still may, then becomes (exec, no fork) the wall clock, which starts setpriv dropping to
 * the sandbox user, which becomes bubblewrap. Joining before anything else runs means not one process of the
 * command starts outside its limits.
 *
 * Nothing of it may outlive the server. Every link is the parent of the next and dies with it: the spawner
 * (spawner-child.ts) kills its children when the server goes; the wall clock gets a parent-death signal
 * (setpriv --pdeathsig) from the spawner; bubblewrap's `--die-with-parent` ties it to the wall clock and its
 * sandbox to itself; and the sandbox is a PID namespace, which the kernel empties when its first process dies.
 * The wall clock (coreutils `timeout`, as the server's user, in no namespace the command can see) ends the
 * command at its limit even while the server cannot act.
 *
 * The launcher starts with an empty environment; bubblewrap reads the sandbox's variables from fd 3.
 */
import { readFileSync } from "node:fs";
import { bwrapArgs, bwrapPipes, resolveExecutable } from "./isolation.ts";
import type { SandboxLimits } from "./limits.ts";
import type { HostUser } from "./sandbox-user.ts";
import { runCollected } from "./spawner.ts";

/** Open files per process of a command at most: Linux's usual default, plenty for shells, compilers and test runners. */
export const OPEN_FILES = 1024;

let hostFileTable: number | undefined;

/**
 * Open files per process: OPEN_FILES, or less where every sandbox process of the server together (`totalPids`)
 * holding that many would take more than half the host's file table (fs.file-max); never below 64.
 */
export function openFilesPerProcess(totalPids: number): number {
  if (hostFileTable === undefined) {
    try {
      hostFileTable =
        Number(readFileSync("/proc/sys/fs/file-max", "utf8").trim()) || Number.POSITIVE_INFINITY;
    } catch {
      hostFileTable = Number.POSITIVE_INFINITY;
    }
  }
  return Math.max(64, Math.min(OPEN_FILES, Math.floor(hostFileTable / 2 / Math.max(1, totalPids))));
}

export interface QuotaWatch {
  limitBytes: number;
  limitFiles: number;
  /** What the directory held when the command started: a directory already past the quota may shrink. */
  usedBytes: number;
  usedFiles: number;
  intervalMs: number;
}

export interface LaunchInput {
  bwrapCommand: string;
  /** setpriv, absolute; needed when `user` is set, and gives the wall clock its parent-death signal. */
  setprivCommand: string | null;
  /**
   * coreutils `timeout`, absolute, and the wall-clock limit it holds the command to (ms); null: no limit
   * but the server's own (the start-up probes).
   */
  wallClock: { timeoutCommand: string; limitMs: number } | null;
  /** setpriv understands `--pdeathsig` (see `detectLauncherTools`). */
  parentDeathSignal: boolean;
  /** The disk quota of `workdir`, also held by the launcher itself (see `quotaWatcher`); absent: the server's only. */
  quotaWatch?: QuotaWatch;
  workdir: string;
  command: string;
  env: Record<string, string>;
  user: HostUser | null;
  limits: SandboxLimits;
  /** cgroup.procs files to join; empty when the host has no usable cgroups. */
  procsFiles: string[];
  /** Bytes the working directory may still grow by: the largest file a command may write. */
  fileSizeBytes: number;
  /** No cgroup bounds memory: fall back to an address-space rlimit. */
  memoryRlimit: boolean;
  /**
   * Bytes of output the server reads at most. Set, the command's stdout and stderr go through one pipe to a
   * drain in the command's own cgroup (`head -c`, then `wc -c`), which passes the first bytes on as stdout
   * and writes how many it dropped to stderr: a command flooding its output costs its own CPU share, not the
   * server's, and never sees a closed pipe. The drain is a process substitution, not a pipeline: the launcher
   * still becomes the command, so no shell waiting on a pipeline stands between the spawner and bubblewrap
   * (a parent that outlives the spawner would keep `--die-with-parent` from ever firing).
   */
  outputCapBytes?: number;
}

export interface LaunchSpec {
  file: string;
  args: string[];
  /** Written to fds 3, 4, ... of the child, then closed (bubblewrap's environment and seccomp filter). */
  pipes: Buffer[];
}

/**
 * The launcher: closes every inherited descriptor but 0-2 and bubblewrap's pipes (a server started with an open file would otherwise
 * hand it to every sandbox, root-only files included), joins each cgroup.procs file given first, sets the
 * rlimits while it still may (inherited by the sandbox user, who cannot raise them), then becomes the rest of
 * its arguments (with an output cap, writing into the drain). bash, not sh: dash cannot close descriptors above
 * 9, and has no process substitution. Only numbers are written into it; the watched directory is an argument.
 */
/** Whole numbers for the script: a limit of Infinity (no file quota) as the largest bash compares exactly. */
const whole = (n: number) =>
  String(Number.isFinite(n) ? Math.max(0, Math.floor(n)) : Number.MAX_SAFE_INTEGER);

/**
 * The disk quota held without the server: a background loop of the launcher (as the server's user, in the
 * command's cgroup, so its walks cost the command's CPU share) measures the working directory like the server
 * does (the larger of blocks and size per entry; entries; one file system; links not followed) and KILLs what
 * the launcher became (the wall clock, or bubblewrap: the sandbox goes with it) once the directory is past the
 * quota and grew since its previous look. It holds no descriptor of the command's output (the call ends when
 * the command does) and ends when the launcher's process is gone. The server's own, finer check runs while it can.
 */
function quotaWatcher(watch: QuotaWatch, lastFd: number): string {
  // mawk's %d stops at 2^31: bytes are printed as a float without decimals.
  // Each entry counts the larger of its blocks and its size, as disk-quota.ts measures (sparse files).
  const measure = `find "$watch_dir" -xdev -printf '%b %s\\n' 2>/dev/null | awk '{ x = $1 * 512; if ($2 > x) x = $2; b += x } END { printf "%.0f %d\\n", b, NR }'`;
  return [
    "(",
    // Not bubblewrap's pipes either (3 ... lastFd).
    `  exec </dev/null >/dev/null 2>&1; for fd in $(seq 3 ${lastFd}); do eval "exec $fd<&-"; done`,
    `  pb=${whole(watch.usedBytes)}; pf=${whole(watch.usedFiles)}`,
    `  while sleep ${(Math.max(100, watch.intervalMs) / 1000).toFixed(3)}; do`,
    "    kill -0 $$ || exit 0",
    `    read -r b f < <(${measure}) || continue`,
    `    if { [ "$b" -gt ${whole(watch.limitBytes)} ] || [ "$f" -gt ${whole(watch.limitFiles)} ]; } && { [ "$b" -gt "$pb" ] || [ "$f" -gt "$pf" ]; }; then kill -KILL $$; exit 0; fi`,
    "    pb=$b; pf=$f",
    "  done",
    ") &",
  ].join("\n");
}

function launcherScript(input: LaunchInput, lastFd: number): string {
  const limits = [
    "ulimit -c 0",
    // RLIMIT_NPROC counts the sandbox user's processes host-wide: with a uid per conversation, that is the
    // conversation's. It binds only non-root users, which is one reason the launcher switches users.
    `ulimit -u ${input.limits.pids}`,
    // Open files: the server's own limit (often 2^20) times the process limit is more than the host's whole
    // file table (fs.file-max), which is then full for every unprivileged process of the host. Bounded so
    // that all sandboxes together (totalPids) stay within half of it.
    `ulimit -n ${openFilesPerProcess(input.limits.totalPids)}`,
    // One file may not outgrow what is left of the disk quota (bash counts 1024-byte blocks).
    `ulimit -f ${Math.max(0, Math.floor(input.fileSizeBytes / 1024))}`,
  ];
  if (input.memoryRlimit)
    limits.push(`ulimit -v ${Math.max(1024, Math.floor(input.limits.memoryBytes / 1024))}`);
  return [
    "set -e",
    `for p in /proc/$$/fd/*; do fd=\${p##*/}; if [ "$fd" -gt ${lastFd} ]; then eval "exec $fd>&-"; fi; done`,
    "watch_dir=$1; shift",
    "n=$1; shift",
    'while [ "$n" -gt 0 ]; do echo $$ > "$1"; shift; n=$((n - 1)); done',
    ...(input.quotaWatch ? [quotaWatcher(input.quotaWatch, lastFd)] : []),
    ...limits,
    // -c: an empty environment (bash would otherwise export PWD, SHLVL and _ into bwrap's own). The exit status
    // is the command's, as bubblewrap gives it (128 + n for a signal), not the drain's.
    input.outputCapBytes === undefined
      ? 'exec -c "$@"'
      : // head reads no further than the cap, so wc counts exactly what was dropped; it ends when the last
        // writer (the command, or the wall clock that killed it) is gone.
        `exec -c "$@" > >(head -c ${Math.max(0, Math.floor(input.outputCapBytes))}; wc -c >&2) 2>&1`,
  ].join("\n");
}

/** Seconds for `timeout`, rounded up to the millisecond. */
const seconds = (ms: number) => `${(Math.ceil(ms) / 1000).toFixed(3)}s`;

/** What the launcher can use on this host (asked once, at start). */
export interface LauncherTools {
  /** GNU `timeout`, absolute, when it takes the options the wall clock uses (busybox's does not); else null. */
  timeoutCommand: string | null;
  /** setpriv understands `--pdeathsig` (util-linux 2.33 and later). */
  parentDeathSignal: boolean;
}

export async function detectLauncherTools(setprivCommand: string | null): Promise<LauncherTools> {
  const run = (file: string, args: string[]) =>
    runCollected({ file, args, env: {}, timeoutMs: 10_000, maxBuffer: 64 * 1024 });
  const timeoutFound = resolveExecutable("timeout");
  const [clock, help] = await Promise.all([
    // A bare name is not on the server's PATH: no wall clock.
    timeoutFound.includes("/")
      ? run(timeoutFound, ["--foreground", "--signal=KILL", seconds(10_000), "/bin/sh", "-c", ":"])
      : null,
    setprivCommand === null ? null : run(setprivCommand, ["--help"]),
  ]);
  return {
    timeoutCommand: clock?.code === 0 ? timeoutFound : null,
    parentDeathSignal: help?.stdout.toString("utf8").includes("--pdeathsig") === true,
  };
}

/**
 * `command` under the wall clock: `timeout` KILLs bubblewrap at the limit (bubblewrap's sandbox dies with
 * it). `--foreground`: only bubblewrap is signalled, not the launcher's process group, so the drain lives to
 * report what it dropped. The clock stands between the spawner and bubblewrap, so it must die with the
 * spawner: setpriv gives it a parent-death SIGKILL (kept across exec).
 */
function withWallClock(input: LaunchInput, command: string[]): string[] {
  if (input.wallClock === null) return command;
  return [
    ...(input.setprivCommand && input.parentDeathSignal
      ? [input.setprivCommand, "--pdeathsig", "KILL", "--"]
      : []),
    input.wallClock.timeoutCommand,
    "--foreground",
    "--signal=KILL",
    seconds(input.wallClock.limitMs),
    ...command,
  ];
}

export function launchSpec(input: LaunchInput): LaunchSpec {
  const { pipes, inputs } = bwrapPipes(input.env);
  const bwrap = [input.bwrapCommand, ...bwrapArgs(input.workdir, input.command, input.limits, inputs)];
  const dropped =
    input.user && input.setprivCommand
      ? [
          input.setprivCommand,
          `--reuid=${input.user.uid}`,
          `--regid=${input.user.gid}`,
          "--clear-groups",
          // Until bubblewrap sets its own (--die-with-parent): the gap without one is only setpriv's start.
          ...(input.parentDeathSignal ? ["--pdeathsig", "KILL"] : []),
          "--",
          ...bwrap,
        ]
      : bwrap;
  return {
    file: "/bin/bash",
    args: [
      "-c",
      launcherScript(input, 2 + pipes.length),
      "sandbox-launcher",
      input.workdir,
      String(input.procsFiles.length),
      ...input.procsFiles,
      ...withWallClock(input, dropped),
    ],
    pipes,
  };
}
