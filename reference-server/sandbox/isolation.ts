/**
 * Bubblewrap: how a sandboxed command is launched, and whether this machine can launch one at all.
 * The sandbox sees read-only /usr (plus the /bin, /lib... links into it), a private read-only /proc,
 * a minimal /dev, an empty /tmp, its own working directory at /workspace, no network, no capabilities
 * and only the environment it is given.
 */
import { spawn } from "node:child_process";
import { accessSync, constants, lstatSync, readlinkSync } from "node:fs";
import path from "node:path";

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

/** The argv (after `bwrap`) running `/bin/sh -c command` in `workdir` with exactly `env`. */
export function bwrapArgs(workdir: string, env: Record<string, string>, command: string): string[] {
  cachedRootLinks ??= rootLinkArgs();
  const args = [
    "--unshare-all",
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
    "--tmpfs",
    "/tmp",
    "--bind",
    workdir,
    SANDBOX_WORKDIR,
    "--chdir",
    SANDBOX_WORKDIR,
    "--clearenv",
  ];
  for (const [name, value] of Object.entries(env)) args.push("--setenv", name, value);
  args.push("--", "/bin/sh", "-c", command);
  return args;
}

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
export function probeBwrap(bwrapCommand: string, probeDir: string): Promise<boolean> {
  return new Promise((resolve) => {
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(bwrapCommand, bwrapArgs(probeDir, { PATH: "/usr/bin:/bin" }, "true"), {
        stdio: "ignore",
        env: {},
      });
    } catch {
      resolve(false);
      return;
    }
    child.on("error", () => resolve(false));
    child.on("close", (code) => resolve(code === 0));
  });
}
