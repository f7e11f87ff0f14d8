/**
 * An isolated turn (`metadata.isolated`): a throwaway working directory of its own under the manager's tmp/,
 * holding only the turn's attachments, removed with everything in it once the turn ends. Nothing of the
 * conversation's files is read or kept, so it is the same on one instance and on several.
 */
import { chown, mkdtemp } from "node:fs/promises";
import path from "node:path";
import { writeAttachments } from "./attachments.ts";
import { createDiskQuota, type DiskQuota } from "./disk-quota.ts";
import { conversationDirName } from "./safe-paths.ts";
import type { HostUser } from "./sandbox-user.ts";
import { removeTree } from "./tree-ops.ts";
import { finishOnce, type TurnActivity } from "./turn-activity.ts";
import type { SandboxAgent, SandboxRequest, TurnSandbox } from "./types.ts";

/** What an isolated turn uses of the manager. */
export interface IsolatedTurnContext {
  tmpDir: string;
  limits: { diskBytes: number; files: number };
  userFor(key: string): HostUser | null;
  beginTurn(key: string): Promise<TurnActivity>;
  quiesce(key: string): Promise<void>;
  toolsFor(
    workdir: string,
    agent: SandboxAgent,
    user: HostUser | null,
    turn: TurnActivity,
    disk: DiskQuota,
  ): TurnSandbox["tools"];
}

export async function acquireIsolatedTurn(
  context: IsolatedTurnContext,
  request: SandboxRequest,
): Promise<TurnSandbox> {
  const { limits } = context;
  const workdir = await mkdtemp(path.join(context.tmpDir, "isolated-"));
  const key = `isolated:${workdir}`;
  const turn = await context.beginTurn(key);
  const user = context.userFor(conversationDirName(request.conversationId));
  if (user) await chown(workdir, user.uid, user.gid);
  const disk = createDiskQuota(workdir, limits.diskBytes, limits.files);
  const attachments = await writeAttachments(workdir, request.attachments, user, disk);
  return {
    workdir,
    cold: true,
    attachments,
    tools: context.toolsFor(workdir, request.agent, user, turn, disk),
    finish: finishOnce(async () => {
      await context.quiesce(key);
      await removeTree(workdir);
      return { pushedCommit: null, publishedOutputs: [] };
    }),
  };
}
