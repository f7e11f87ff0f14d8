/**
 * How one sandboxed command is started: a tiny `/bin/bash` launcher joins the command's cgroups and sets its
 * rlimits while it still may, setpriv drops to the sandbox user, and the process becomes bubblewrap. Joining
 * before anything else runs means not one process of the command starts outside its limits.
 *
 * The launcher starts with an empty environment; bubblewrap reads the sandbox's variables from fd 3.
 */
import { readFileSync } from "node:fs";
import { bwrapArgs, bwrapPipes } from "./isolation.ts";
import type { SandboxLimits } from "./limits.ts";
import type { HostUser } from "./sandbox-user.ts";

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

export interface LaunchInput {
  bwrapCommand: string;
  /** setpriv, absolute; needed only when `user` is set. */
  setprivCommand: string | null;
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
   * server's, and never sees a closed pipe.
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
 * its arguments, or, with an output cap, runs them into the drain and exits with their status. bash, not sh:
 * dash cannot close descriptors above 9, and has no PIPESTATUS. Only numbers are written into it.
 */
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
    "n=$1; shift",
    'while [ "$n" -gt 0 ]; do echo $$ > "$1"; shift; n=$((n - 1)); done',
    ...limits,
    // -c: an empty environment (bash would otherwise export PWD, SHLVL and _ into bwrap's own).
    ...(input.outputCapBytes === undefined
      ? ['exec -c "$@"']
      : [
          "set +e",
          // head reads no further than the cap, so wc counts exactly what was dropped.
          `exec -c "$@" 2>&1 | { head -c ${Math.max(0, Math.floor(input.outputCapBytes))}; wc -c >&2; }`,
          // The command's status, as bubblewrap gave it (128 + n for a signal), not the drain's.
          'exit "$PIPESTATUS"',
        ]),
  ].join("\n");
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
      String(input.procsFiles.length),
      ...input.procsFiles,
      ...dropped,
    ],
    pipes,
  };
}
