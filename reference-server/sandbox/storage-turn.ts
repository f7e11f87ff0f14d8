/**
 * A storage agent's turn: its working directory brought to what is stored and to the agent's files before the
 * turn, and after it the outputs published and the directory kept for the next turn (wherever it runs).
 */
import type { ConversationFiles } from "./conversation-files.ts";
import type { HostUser } from "./sandbox-user.ts";
import { type RestoreManifest, resetOutputs, restoreAgentFiles } from "./storage.ts";
import type { FinishReport, SandboxRequest } from "./types.ts";

/** Before the turn; whether the server changed the working directory (the quota then measures it anew). */
export async function prepareStorageTurn(
  files: ConversationFiles,
  request: SandboxRequest,
  workdir: string,
  entry: { manifest: RestoreManifest | null },
  user: HostUser | null,
): Promise<boolean> {
  let changed = false;
  if (await files.restoreWork(request, workdir, user)) changed = true;
  if (request.agent.filesDir) {
    const previous = entry.manifest;
    entry.manifest = await restoreAgentFiles(request.agent.filesDir, workdir, previous, user);
    // A file left as it was keeps its manifest entry (the same object): anything else was copied.
    for (const [rel, stamps] of entry.manifest) if (previous?.get(rel) !== stamps) changed = true;
  }
  if (await resetOutputs(workdir, user)) changed = true;
  return changed;
}

/**
 * After the turn. A turn cut short (disconnect, time-out, failure) does not publish half its work; its files
 * stay, as they would on one instance: they are saved for whichever instance runs the next turn.
 */
export async function finishStorageTurn(
  files: ConversationFiles,
  request: SandboxRequest,
  workdir: string,
  outcome: "completed" | "failed",
): Promise<FinishReport> {
  const publishedOutputs =
    outcome === "failed"
      ? []
      : await files.publish(request.agent, request.conversationId, workdir, request.fence);
  await files.saveWork(request, workdir);
  return { pushedCommit: null, publishedOutputs };
}
