/**
 * Per-sandbox resource limits: their defaults, and how a command is held to them. cgroups (cgroups.ts) cap
 * processes, memory and CPU for the whole command; rlimits, set as the sandbox user, are the fallback where
 * no cgroup is usable and bound single files (the disk quota); tmpfs sizes bound /tmp and /dev/shm.
 */

export interface SandboxLimits {
  /** Processes and threads of one command alive at once (a fork bomb stops here). */
  pids: number;
  /** Memory of one command, tmpfs pages included. */
  memoryBytes: number;
  /** CPU time per wall second, in CPUs. */
  cpus: number;
  /** Bytes a conversation's working directory may hold; a write past it fails as a tool error. */
  diskBytes: number;
  /** Sizes of the command's private /tmp and /dev/shm (RAM-backed, so also inside memoryBytes). */
  tmpBytes: number;
  shmBytes: number;
  /** All sandboxes of the server together (the parent cgroup): many conversations at once cannot exhaust the host. */
  totalMemoryBytes: number;
  totalPids: number;
  /** Files and directories a conversation's working directory may hold (inodes cost the host even when empty). */
  files: number;
  /**
   * Tool calls of one workspace running at once (command-shares.ts): its share of the pool above, kept by
   * the server, so it holds without cgroups too.
   */
  commandsPerWorkspace: number;
}

import { totalmem } from "node:os";

const MiB = 1024 * 1024;

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = {
  pids: 256,
  memoryBytes: 1024 * MiB,
  cpus: 1,
  diskBytes: 1024 * MiB,
  tmpBytes: 64 * MiB,
  shmBytes: 64 * MiB,
  totalMemoryBytes: Math.floor(totalmem() / 2),
  totalPids: 4096,
  files: 100_000,
  // Half the pool: 8 calls × 256 processes is 2,048 of the 4,096, so another workspace always has the rest.
  commandsPerWorkspace: 8,
};

/** `512M`, `2G`, `1048576`: the flags' size syntax (binary units). */
export function parseSize(text: string): number {
  const match = /^(\d+)([KMG]?)i?B?$/i.exec(text.trim());
  if (!match) throw new Error(`not a size: "${text}" (use e.g. 512M, 2G or a number of bytes)`);
  const unit = { "": 1, K: 1024, M: MiB, G: 1024 * MiB }[match[2].toUpperCase() as "" | "K" | "M" | "G"];
  const bytes = Number(match[1]) * unit;
  if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new Error(`size out of range: "${text}"`);
  return bytes;
}
