/**
 * Instances sharing a store: conversations' files and published outputs are sets of the shared file store,
 * and each instance's directories are caches of them (DirectorySync), brought to the stored generation before
 * they are used and saved after a turn.
 */
import { mkdir, readdir } from "node:fs/promises";
import path from "node:path";
import { type FileStore, outputsSet, type WriteFence, workingFilesSet } from "../store/file-store.ts";
import type { ConversationFiles, ConversationFilesContext } from "./conversation-files.ts";
import { DirectorySync } from "./directory-sync.ts";
import { OUTPUTS_DIR, publishOutputs } from "./storage.ts";

const SWEEP_AFTER_MS = 60 * 60_000;
const SWEEP_EVERY_MS = 10 * 60_000;

function fenceOf(request: { conversationId: string; fence?: number }): WriteFence | undefined {
  return request.fence === undefined
    ? undefined
    : { conversationId: request.conversationId, token: request.fence };
}

/** Whether a directory holds anything (a missing one does not). */
async function holdsEntries(dir: string): Promise<boolean> {
  const entries = await readdir(dir).catch(() => []);
  return entries.length > 0;
}

/** `root`: the manager's root, where what this instance knows of each set is kept. */
export async function sharedFiles(
  fileStore: FileStore,
  root: string,
  { storeDir, limits }: ConversationFilesContext,
): Promise<ConversationFiles> {
  const stateDir = path.join(root, "shared-state");
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  const sync = new DirectorySync(fileStore, stateDir);
  /** What a working directory, or a conversation's outputs folder, may hold: what a restore may write. */
  const syncLimits = { bytes: limits.diskBytes, entries: limits.files };

  // Blobs no conversation refers to any more (deleted, overwritten, or uploaded by a turn that could not
  // commit), swept by every instance now and then; an hour leaves any writer time to commit what it asked for.
  const sweeper = setInterval(
    () => void fileStore.sweep(SWEEP_AFTER_MS).catch(() => undefined),
    SWEEP_EVERY_MS,
  );
  sweeper.unref();

  return {
    unrecordedCopyIsAnyones: true,

    // Another instance may have run the last turn: the local copy is brought to the stored generation first.
    async restoreWork(request, workdir, user) {
      const pulled = await sync.pull(
        request.agent.workspaceId,
        workingFilesSet(request.conversationId),
        workdir,
        user,
        syncLimits,
      );
      return pulled.changed;
    },

    async saveWork(request, workdir) {
      await sync.push(
        request.agent.workspaceId,
        workingFilesSet(request.conversationId),
        workdir,
        syncLimits,
        {
          // outputs/ is emptied at every turn's start: what it held is in the workspace store.
          exclude: (rel) => rel === OUTPUTS_DIR || rel.startsWith(`${OUTPUTS_DIR}/`),
          fence: fenceOf(request),
        },
      );
    },

    // The folder is first brought to the stored generation (so the store folder's quota counts every
    // instance's earlier outputs) and saved after.
    async publish(agent, conversationId, workdir, fence) {
      // Most turns publish nothing: no query for them.
      if (!(await holdsEntries(path.join(workdir, OUTPUTS_DIR)))) return [];
      const folder = storeDir(agent.workspaceId, agent.name, conversationId);
      const set = outputsSet(agent.workspaceId, agent.name, conversationId);
      await sync.pull(agent.workspaceId, set, folder, null, syncLimits);
      const published = await publishOutputs(workdir, folder, limits.diskBytes, limits.files);
      if (published.length > 0)
        await sync.push(agent.workspaceId, set, folder, syncLimits, {
          fence: fenceOf({ conversationId, fence }),
        });
      return published;
    },

    async outputsFolder(workspaceId, agent, conversationId) {
      const folder = storeDir(workspaceId, agent, conversationId);
      await sync.pull(workspaceId, outputsSet(workspaceId, agent, conversationId), folder, null, syncLimits);
      return folder;
    },

    // The stored files are the parent's as its last turn left them, wherever it ran; the local copy only
    // saves the child's first turn here the downloads.
    async forkStored(parent, child) {
      await fileStore.copy(
        child.workspaceId,
        workingFilesSet(parent.conversationId),
        workingFilesSet(child.conversationId),
      );
    },

    forgetWork: (conversationId) => sync.forget(workingFilesSet(conversationId)),
    forgetOutputs: (owner) => sync.forget(outputsSet(owner.workspaceId, owner.agent, owner.conversationId)),

    async removeStored(owner) {
      await fileStore.remove(workingFilesSet(owner.conversationId));
      await fileStore.remove(outputsSet(owner.workspaceId, owner.agent, owner.conversationId));
    },

    close: () => clearInterval(sweeper),
  };
}
