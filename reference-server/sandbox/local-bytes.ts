/**
 * The bytes a workspace's conversations hold on this instance's disk: their working directories, their git
 * directories (repository agents' clones) and the workspace's published outputs. One `find` per batch of
 * directories (spawning is most of a small directory's cost); each entry counts the larger of its blocks
 * and its size, as the per-conversation quota counts (disk-quota.ts). A walk that times out counts as
 * Infinity: a tree too large to measure is over any share.
 */
import { stat } from "node:fs/promises";
import path from "node:path";
import type { SandboxLayout } from "./layout.ts";
import { safeSegment } from "./safe-paths.ts";
import { sumFind } from "./tree-ops.ts";

const BATCH = 200;
const MEASURE_TIMEOUT_MS = 30_000;

function entryBytes(line: string): number {
  const space = line.indexOf(" ");
  return Math.max((Number(line.slice(0, space)) || 0) * 512, Number(line.slice(space + 1)) || 0);
}

export async function measureLocalBytes(
  layout: SandboxLayout,
  conversationIds: readonly string[],
  workspaceId?: string,
): Promise<number> {
  const candidates = conversationIds.flatMap((id) => [layout.conversationDir(id), layout.gitDirOf(id)]);
  if (workspaceId !== undefined) candidates.push(path.join(layout.dirs.store, safeSegment(workspaceId)));
  const present: string[] = [];
  for (const dir of candidates)
    if (
      await stat(dir).then(
        () => true,
        () => false,
      )
    )
      present.push(dir);
  let total = 0;
  for (let start = 0; start < present.length; start += BATCH) {
    const walk = await sumFind(
      [...present.slice(start, start + BATCH), "-xdev", "-printf", "%b %s\\n"],
      MEASURE_TIMEOUT_MS,
      entryBytes,
    );
    if (walk === null) return Number.POSITIVE_INFINITY;
    total += walk.sum;
  }
  return total;
}
