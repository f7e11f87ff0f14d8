/**
 * Race-free paths inside a working directory a turn shaped. Every component is opened relative to the
 * directory opened before it (through `/proc/self/fd/N/<name>`, Linux's openat for a path-based API) with
 * O_NOFOLLOW, so swapping a directory for a symlink between a check and a use can only make the operation
 * fail, never redirect it. Symlinks are resolved by hand, as if the working directory were `/` (like
 * openat2's RESOLVE_IN_ROOT): a link may point anywhere inside it, and never out of it.
 */
import { constants } from "node:fs";
import { type FileHandle, lstat, mkdir, open, readlink, rm } from "node:fs/promises";
import { SandboxPathError } from "./safe-paths.ts";
import type { HostUser } from "./sandbox-user.ts";

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** The kernel's own limit on links followed while resolving one path. */
const MAX_LINKS = 40;
/**
 * Components walked for one path, those of link targets included. Every directory on the way stays open
 * until the call ends (`..` steps back to it): a path of 30,000 components held as many of the server's
 * descriptors, and made as many directories in one call.
 */
export const MAX_PATH_STEPS = 256;

/** A path naming `name` inside an open directory, for the path-based fs calls. */
export function at(dir: FileHandle, name: string): string {
  return `/proc/self/fd/${dir.fd}/${name}`;
}

export interface Beneath {
  /** The open directory that holds the final component. */
  dir: FileHandle;
  /** The final component's name in `dir` ("" when the path names the root itself). */
  name: string;
  /** Every handle opened on the way, `dir` included; closed by `close()`. */
  close(): Promise<void>;
}

export interface ResolveOptions {
  /** Create missing directories on the way (for writes); they are given to `owner`. */
  create: boolean;
  /** Whether a link at the final component is resolved (reads) or left as the final name (writes). */
  followLast: boolean;
  owner: HostUser | null;
  /** Where the server writes: a link or non-directory on the way is replaced by a real directory. */
  replaceOnTheWay?: boolean;
}

function code(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException).code;
}

/**
 * Opens the directories of `parts` below `root` one by one and returns the last directory with the final
 * name. A link on the way is read and its target walked in its place (absolute targets from the working
 * directory's `/workspace` mount point); a target leaving the working directory is refused.
 */
export async function resolveBeneath(
  root: string,
  parts: string[],
  options: ResolveOptions,
): Promise<Beneath> {
  const opened: FileHandle[] = [];
  const close = async () => {
    for (const handle of opened.splice(0).reverse()) await handle.close().catch(() => undefined);
  };
  try {
    const rootHandle = await open(root, DIR_FLAGS);
    opened.push(rootHandle);
    // The stack of directories from the root down: `..` in a link target pops it, never past the root.
    const stack: FileHandle[] = [rootHandle];
    const pending = [...parts];
    let links = 0;
    let steps = 0;
    const shown = parts.join("/");
    while (pending.length > 0) {
      const part = pending.shift() as string;
      const dir = stack[stack.length - 1];
      if (part === "." || part === "") continue;
      if (++steps > MAX_PATH_STEPS)
        throw new SandboxPathError(
          `path too deep for the file tools (more than ${MAX_PATH_STEPS} components, links included): use run_command`,
        );
      if (part === "..") {
        if (stack.length === 1) throw new SandboxPathError(`path escapes the working directory: ${shown}`);
        stack.pop();
        continue;
      }
      const isLast = pending.length === 0;
      const stats = await lstat(at(dir, part)).catch((error) => {
        if (code(error) === "ENOENT") return null;
        throw error;
      });
      if (stats?.isSymbolicLink() && (!isLast || options.followLast) && !options.replaceOnTheWay) {
        if (++links > MAX_LINKS) throw new SandboxPathError(`too many levels of symbolic links: ${shown}`);
        const target = await readlink(at(dir, part)).catch((error) => {
          // EINVAL: no longer a link (swapped back since the lstat): refuse rather than guess.
          if (code(error) === "EINVAL" || code(error) === "ENOENT")
            throw new SandboxPathError(`path changed while in use: ${shown}`);
          throw error;
        });
        let rest = target.split("/");
        if (target.startsWith("/")) {
          // Absolute links count from the sandbox's view: /workspace is the working directory.
          if (target !== "/workspace" && !target.startsWith("/workspace/"))
            throw new SandboxPathError(`symlink leads outside the working directory: ${shown}`);
          stack.length = 1;
          rest = target.slice("/workspace".length).split("/");
        }
        pending.unshift(...rest);
        continue;
      }
      if (isLast) return { dir, name: part, close };
      if (stats === null || (options.replaceOnTheWay && (stats.isSymbolicLink() || !stats.isDirectory()))) {
        if (!options.create) throw new SandboxPathError(`no such file or directory: ${shown}`);
        if (stats !== null) await rm(at(dir, part), { recursive: true, force: true });
        await mkdir(at(dir, part)).catch((error) => {
          if (code(error) !== "EEXIST") throw error;
        });
        const created = await openDirectory(dir, part, shown);
        opened.push(created);
        if (options.owner) await created.chown(options.owner.uid, options.owner.gid);
        stack.push(created);
        continue;
      }
      if (!stats.isDirectory()) throw new SandboxPathError(`not a directory: ${shown}`);
      const next = await openDirectory(dir, part, shown);
      opened.push(next);
      stack.push(next);
    }
    return { dir: stack[stack.length - 1], name: "", close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Opens `name` in `dir` as a directory; anything else there (a link swapped in since) is refused. */
async function openDirectory(dir: FileHandle, name: string, shown: string): Promise<FileHandle> {
  try {
    return await open(at(dir, name), DIR_FLAGS);
  } catch (error) {
    if (code(error) === "ELOOP" || code(error) === "ENOTDIR")
      throw new SandboxPathError(`not a directory (or changed while in use): ${shown}`);
    throw error;
  }
}

/** Runs `use` with the resolved location, closing every handle afterwards. */
export async function withBeneath<T>(
  root: string,
  parts: string[],
  options: ResolveOptions,
  use: (location: Beneath) => Promise<T>,
): Promise<T> {
  const location = await resolveBeneath(root, parts, options);
  try {
    return await use(location);
  } finally {
    await location.close();
  }
}
