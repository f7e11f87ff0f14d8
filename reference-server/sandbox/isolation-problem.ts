/**
 * Why bubblewrap cannot build the tools' sandbox here, in the words of the operator who has to fix it. The
 * bare bwrap message ("Can't mount proc on /newroot/proc: Operation not permitted") names neither the
 * container runtime's setting at fault nor the flag that fixes it; this does, for the failures seen on hosts
 * and in containers (docs/container.md).
 */

/** Where the container recipe lives, named in each piece of advice. */
const CONTAINER_GUIDE = "docs/container.md of the agent-api kit";

/** The first line bwrap wrote, without its `bwrap: ` prefix (bounded: it is shown on every refused tool). */
function firstLine(output: string): string {
  const line =
    output
      .split("\n")
      .map((l) => l.trim())
      .find((l) => l.length > 0) ?? "";
  return line.replace(/^bwrap: /, "").slice(0, 200);
}

export interface BwrapFailure {
  output: string;
  exitCode: number | null;
  spawnError?: string;
}

/** What failed and the fix, for a bwrap that is installed but could not start a sandbox. */
export function explainBwrapFailure(bwrapCommand: string, failure: BwrapFailure): string {
  if (failure.spawnError !== undefined) {
    return `bubblewrap (${bwrapCommand}) could not be started (${failure.spawnError}): reinstall it (apt-get install bubblewrap)`;
  }
  const said = firstLine(failure.output);
  const quoted = said ? ` ("${said}")` : ` (exit ${failure.exitCode})`;
  const lower = said.toLowerCase();
  if (lower.includes("mount proc") || lower.includes("/proc")) {
    return `bubblewrap could not mount /proc${quoted}: the container masks /proc paths; start it with --security-opt systempaths=unconfined besides the seccomp profile docker/seccomp.json (${CONTAINER_GUIDE})`;
  }
  if (lower.includes("namespace") || lower.includes("uid map") || lower.includes("operation not permitted")) {
    return `bubblewrap could not create the sandbox's namespaces${quoted}: in a container, start it with --security-opt seccomp=docker/seccomp.json and --security-opt apparmor=unconfined (Docker's default profiles refuse user namespaces; ${CONTAINER_GUIDE}); on a host, allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces above 0) or run the server as root`;
  }
  return `bubblewrap (${bwrapCommand}) cannot create a sandbox here${quoted}: it needs user namespaces and a /proc it may mount (${CONTAINER_GUIDE})`;
}

export const BWRAP_NOT_INSTALLED =
  "bubblewrap is not installed (the bwrap command is not on the server's PATH): apt-get install bubblewrap";
