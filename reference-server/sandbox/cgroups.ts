/**
 * Control groups for sandboxed commands: each command runs in a fresh group that caps its processes,
 * memory and CPU, and that the server empties (kills every member) before the command counts as ended.
 *
 * cgroup v1 (the pids, memory and cpu hierarchies) and cgroup v2 (a delegated subtree with those
 * controllers) are both used where writable. Groups nest under the server's own group, so a host that
 * confines the server also confines its sandboxes. Where neither is usable, `detectCgroups` says why
 * and the server falls back to rlimits (see launcher.ts).
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readdir, readFile, rmdir, writeFile } from "node:fs/promises";
import path from "node:path";

export interface CgroupLimits {
  /** Processes and threads alive at once. */
  pids: number;
  /** Memory, including tmpfs pages the command writes (/tmp, /dev/shm). */
  memoryBytes: number;
  /** CPU time per wall second, in CPUs (1 = one core). */
  cpus: number;
}

/** One group per command: join it, empty it, remove it. */
/** Caps on the server's parent group: every sandbox's commands together. */
export interface CgroupTotals {
  pids: number;
  memoryBytes: number;
}

export interface CommandCgroup {
  /** `cgroup.procs` files a launcher writes its own pid to before starting the command. */
  readonly procsFiles: string[];
  /** SIGKILLs every process in the group until none is left. */
  killAll(): Promise<void>;
  remove(): Promise<void>;
}

export interface CgroupSupport {
  /** "v1" or "v2" when commands get their own group; "none" when limits fall back to rlimits. */
  readonly version: "v1" | "v2" | "none";
  /** Why there are no cgroups (for the server's start-up line); empty when there are. */
  readonly reason: string;
  create(limits: CgroupLimits): Promise<CommandCgroup | null>;
  /** Removes the server's own parent groups (on close). */
  close(): Promise<void>;
}

const V1_ROOT = "/sys/fs/cgroup";
const CPU_PERIOD_US = 100_000;
const CONTROLLERS = ["pids", "memory", "cpu"] as const;

/** The server's own group path per hierarchy, from /proc/self/cgroup (`id:controllers:path`). */
function ownGroups(): Map<string, string> {
  const groups = new Map<string, string>();
  let text = "";
  try {
    text = readFileSync("/proc/self/cgroup", "utf8");
  } catch {
    return groups;
  }
  for (const line of text.split("\n")) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!match) continue;
    const [, controllers, groupPath] = match;
    if (controllers === "") groups.set("", groupPath);
    for (const name of controllers.split(",")) groups.set(name, groupPath);
  }
  return groups;
}

async function tryWrite(file: string, value: string): Promise<boolean> {
  try {
    await writeFile(file, value);
    return true;
  } catch {
    return false;
  }
}

async function members(procsFile: string): Promise<number[]> {
  const text = await readFile(procsFile, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map(Number);
}

async function killMembers(procsFile: string): Promise<void> {
  // A fork bomb can add members while we kill; pids.max bounds how many, so the loop ends.
  for (let round = 0; round < 1000; round++) {
    const pids = await members(procsFile);
    if (pids.length === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
    await new Promise((resolve) => setTimeout(resolve, round < 10 ? 1 : 10));
  }
}

/** A directory removed, retrying while the kernel still counts a just-killed member. */
async function removeGroupDir(dir: string): Promise<void> {
  for (let round = 0; round < 200; round++) {
    try {
      await rmdir(dir);
      return;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return;
      if (code !== "EBUSY") return;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

/** Group removals still running (the kernel may keep a just-emptied group busy for a moment). */
const pending = new Set<Promise<void>>();

function track(removal: () => Promise<void>): Promise<void> {
  const running = removal().catch(() => undefined);
  pending.add(running);
  void running.then(() => pending.delete(running));
  return running;
}

let sequence = 0;
const nextName = () => `cmd-${++sequence}-${Date.now().toString(36)}`;

async function detectV1(serverTag: string, totals: CgroupTotals): Promise<CgroupSupport | string> {
  const own = ownGroups();
  const parents = new Map<string, string>();
  for (const controller of CONTROLLERS) {
    const mount = path.join(V1_ROOT, controller);
    if (!existsSync(path.join(mount, "cgroup.procs"))) return `cgroup v1 ${controller} is not mounted`;
    const parent = path.join(mount, own.get(controller) ?? "/", serverTag);
    try {
      await mkdir(parent, { recursive: true });
    } catch (error) {
      return `cannot create a cgroup under ${mount}: ${(error as Error).message}`;
    }
    parents.set(controller, parent);
  }
  // Limits of all sandboxes together; children are charged to the parent only with use_hierarchy (settable
  // while the group has no children).
  await tryWrite(path.join(parents.get("memory") as string, "memory.use_hierarchy"), "1");
  await tryWrite(path.join(parents.get("pids") as string, "pids.max"), String(totals.pids));
  await tryWrite(
    path.join(parents.get("memory") as string, "memory.limit_in_bytes"),
    String(totals.memoryBytes),
  );
  const memoryParent = parents.get("memory") as string;
  const hasMemsw = existsSync(path.join(memoryParent, "memory.memsw.limit_in_bytes"));
  return {
    version: "v1",
    reason: "",
    async create(limits) {
      const name = nextName();
      const dirs = CONTROLLERS.map((controller) => path.join(parents.get(controller) as string, name));
      try {
        for (const dir of dirs) await mkdir(dir);
        const [pidsDir, memoryDir, cpuDir] = dirs;
        const ok =
          (await tryWrite(path.join(pidsDir, "pids.max"), String(limits.pids))) &&
          (await tryWrite(path.join(memoryDir, "memory.limit_in_bytes"), String(limits.memoryBytes))) &&
          (await tryWrite(path.join(cpuDir, "cpu.cfs_period_us"), String(CPU_PERIOD_US))) &&
          (await tryWrite(
            path.join(cpuDir, "cpu.cfs_quota_us"),
            String(Math.max(1000, Math.round(limits.cpus * CPU_PERIOD_US))),
          ));
        // Without swap accounting a swapping host would let memory spill past the limit.
        if (ok && hasMemsw)
          await tryWrite(path.join(memoryDir, "memory.memsw.limit_in_bytes"), String(limits.memoryBytes));
        if (!ok) throw new Error("cgroup limits could not be written");
      } catch (error) {
        for (const dir of dirs) await removeGroupDir(dir);
        throw error;
      }
      const procsFiles = dirs.map((dir) => path.join(dir, "cgroup.procs"));
      return {
        procsFiles,
        // The pids hierarchy holds every process the command started, whichever it joined last.
        killAll: () => killMembers(procsFiles[0]),
        remove: () =>
          track(async () => {
            await killMembers(procsFiles[0]);
            for (const dir of dirs) await removeGroupDir(dir);
          }),
      };
    },
    async close() {
      await Promise.all(pending);
      for (const parent of parents.values()) await removeGroupDir(parent);
    },
  };
}

async function detectV2(serverTag: string, totals: CgroupTotals): Promise<CgroupSupport | string> {
  const own = ownGroups().get("");
  const mount = existsSync(path.join(V1_ROOT, "cgroup.controllers"))
    ? V1_ROOT
    : existsSync(path.join(V1_ROOT, "unified", "cgroup.controllers"))
      ? path.join(V1_ROOT, "unified")
      : null;
  if (mount === null || own === undefined) return "cgroup v2 is not mounted";
  // A v2 group with processes cannot hand controllers to children ("no internal processes"): the
  // sandboxes' parent is a sibling of the server's group, under the group that delegated to us.
  const delegating = path.join(mount, path.dirname(own));
  const available = await readFile(path.join(delegating, "cgroup.controllers"), "utf8").catch(() => "");
  const missing = CONTROLLERS.filter((c) => !available.split(/\s+/).includes(c));
  if (missing.length > 0) return `cgroup v2 does not delegate ${missing.join(", ")} here`;
  await tryWrite(path.join(delegating, "cgroup.subtree_control"), CONTROLLERS.map((c) => `+${c}`).join(" "));
  const parent = path.join(delegating, serverTag);
  try {
    await mkdir(parent, { recursive: true });
  } catch (error) {
    return `cannot create a cgroup under ${delegating}: ${(error as Error).message}`;
  }
  if (
    !(await tryWrite(path.join(parent, "cgroup.subtree_control"), CONTROLLERS.map((c) => `+${c}`).join(" ")))
  )
    return `cannot enable ${CONTROLLERS.join(", ")} in ${parent}`;
  await tryWrite(path.join(parent, "pids.max"), String(totals.pids));
  await tryWrite(path.join(parent, "memory.max"), String(totals.memoryBytes));
  return {
    version: "v2",
    reason: "",
    async create(limits) {
      const dir = path.join(parent, nextName());
      await mkdir(dir);
      const ok =
        (await tryWrite(path.join(dir, "pids.max"), String(limits.pids))) &&
        (await tryWrite(path.join(dir, "memory.max"), String(limits.memoryBytes))) &&
        (await tryWrite(path.join(dir, "memory.swap.max"), "0").then(() => true)) &&
        (await tryWrite(
          path.join(dir, "cpu.max"),
          `${Math.max(1000, Math.round(limits.cpus * CPU_PERIOD_US))} ${CPU_PERIOD_US}`,
        ));
      if (!ok) {
        await removeGroupDir(dir);
        throw new Error("cgroup limits could not be written");
      }
      const procs = path.join(dir, "cgroup.procs");
      const killAll = async () => {
        // cgroup.kill (Linux 5.14) kills atomically, forks included; the loop covers older kernels.
        await tryWrite(path.join(dir, "cgroup.kill"), "1");
        await killMembers(procs);
      };
      return {
        procsFiles: [procs],
        killAll,
        remove: () =>
          track(async () => {
            await killAll();
            await removeGroupDir(dir);
          }),
      };
    },
    async close() {
      await Promise.all(pending);
      await removeGroupDir(parent);
    },
  };
}

/** Groups of servers that died without closing: emptied and removed, so they do not pile up. */
async function removeStaleParents(): Promise<void> {
  const own = ownGroups();
  for (const controller of CONTROLLERS) {
    const base = path.join(V1_ROOT, controller, own.get(controller) ?? "/");
    const entries = await readdir(base).catch(() => [] as string[]);
    for (const entry of entries) {
      const match = /^agent-api-sandboxes-(\d+)$/.exec(entry);
      if (!match || processAlive(Number(match[1]))) continue;
      const parent = path.join(base, entry);
      for (const child of await readdir(parent).catch(() => [] as string[])) {
        const dir = path.join(parent, child);
        if (!child.startsWith("cmd-")) continue;
        await killMembers(path.join(dir, "cgroup.procs"));
        await removeGroupDir(dir);
      }
      await removeGroupDir(parent);
    }
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Proves a detected hierarchy works end to end (a group made, limited and removed) before relying on it. */
async function usable(support: CgroupSupport): Promise<CgroupSupport | string> {
  try {
    const probe = await support.create({ pids: 16, memoryBytes: 64 * 1024 * 1024, cpus: 1 });
    await probe?.remove();
    return support;
  } catch (error) {
    await support.close().catch(() => undefined);
    return `cgroup ${support.version} groups cannot be limited here: ${(error as Error).message}`;
  }
}

/** The cgroup support of this host for this server process; never throws. */
export async function detectCgroups(
  totals: CgroupTotals = { pids: 4096, memoryBytes: 8 * 1024 ** 3 },
): Promise<CgroupSupport> {
  const serverTag = `agent-api-sandboxes-${process.pid}`;
  const none = (reason: string): CgroupSupport => ({
    version: "none",
    reason,
    create: async () => null,
    close: async () => undefined,
  });
  if (process.platform !== "linux") return none("cgroups exist only on Linux");
  await removeStaleParents().catch(() => undefined);
  const v2Found = await detectV2(serverTag, totals).catch((error: Error) => error.message);
  const v2 = typeof v2Found === "string" ? v2Found : await usable(v2Found);
  if (typeof v2 !== "string") return v2;
  const v1Found = await detectV1(serverTag, totals).catch((error: Error) => error.message);
  const v1 = typeof v1Found === "string" ? v1Found : await usable(v1Found);
  if (typeof v1 !== "string") return v1;
  return none(`${v2}; ${v1}`);
}
