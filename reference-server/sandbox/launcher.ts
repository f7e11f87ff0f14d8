/**
 * How one sandboxed command is started: a tiny `/bin/bash` launcher joins the command's cgroups, prlimit sets
 * its rlimits while it still may, setpriv drops to the sandbox user, and the process becomes bubblewrap. Joining
 * before anything else runs means not one process of the command starts outside its limits.
 *
 * The launcher starts with an empty environment; bubblewrap reads the sandbox's variables from fd 3.
 */
import { bwrapArgs, envArgsPayload } from "./isolation.ts";
import type { SandboxLimits } from "./limits.ts";
import type { HostUser } from "./sandbox-user.ts";

/** The file descriptor on which bubblewrap reads its `--setenv` arguments. */
export const ENV_FD = 3;

export interface LaunchInput {
  bwrapCommand: string;
  /** setpriv, absolute; needed only when `user` is set. */
  setprivCommand: string | null;
  /** prlimit, absolute; null when missing (no rlimits then). */
  prlimitCommand: string | null;
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
}

export interface LaunchSpec {
  file: string;
  args: string[];
  /** Written to fd 3 of the child, then closed. */
  fd3: Buffer;
}

/**
 * Closes every inherited descriptor but 0-3 (a server started with an open file would otherwise hand it to
 * every sandbox, root-only files included), joins each cgroup.procs file given first, then becomes the rest
 * of its arguments. bash, not sh: dash cannot close descriptors above 9.
 */
const LAUNCHER_SCRIPT = [
  "set -e",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a template.
  'for p in /proc/$$/fd/*; do fd=${p##*/}; if [ "$fd" -gt 3 ]; then eval "exec $fd>&-"; fi; done',
  "n=$1; shift",
  'while [ "$n" -gt 0 ]; do echo $$ > "$1"; shift; n=$((n - 1)); done',
  // -c: an empty environment (bash would otherwise export PWD, SHLVL and _ into bwrap's own).
  'exec -c "$@"',
].join("\n");

/** prlimit arguments: set as root before the switch, inherited by the sandbox user, unraisable by it. */
function rlimitArgs(input: LaunchInput): string[] {
  if (!input.prlimitCommand) return [];
  const args = [
    input.prlimitCommand,
    "--core=0",
    // RLIMIT_NPROC counts the sandbox user's processes host-wide: with a uid per conversation, that is the
    // conversation's. It binds only non-root users, which is one reason the launcher switches users.
    `--nproc=${input.limits.pids}`,
    // One file may not outgrow what is left of the disk quota.
    `--fsize=${Math.max(0, Math.floor(input.fileSizeBytes))}`,
  ];
  if (input.memoryRlimit) args.push(`--as=${input.limits.memoryBytes}`);
  args.push("--");
  return args;
}

export function launchSpec(input: LaunchInput): LaunchSpec {
  const bwrap = [input.bwrapCommand, ...bwrapArgs(input.workdir, input.command, input.limits, ENV_FD)];
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
      LAUNCHER_SCRIPT,
      "sandbox-launcher",
      String(input.procsFiles.length),
      ...input.procsFiles,
      ...rlimitArgs(input),
      ...dropped,
    ],
    fd3: envArgsPayload(input.env),
  };
}
