/**
 * One instance: the local disk is the file store. A working directory stays where the last turn left it, and
 * outputs are copied straight into the workspace store's folder.
 */
import type { ConversationFiles, ConversationFilesContext } from "./conversation-files.ts";
import { publishOutputs } from "./storage.ts";

export function filesOnOneInstance({ storeDir, limits }: ConversationFilesContext): ConversationFiles {
  return {
    unrecordedCopyIsAnyones: false,
    restoreWork: async () => false,
    saveWork: async () => undefined,
    publish: (agent, conversationId, workdir) =>
      publishOutputs(
        workdir,
        storeDir(agent.workspaceId, agent.name, conversationId),
        limits.diskBytes,
        limits.files,
      ),
    outputsFolder: async (workspaceId, agent, conversationId) => storeDir(workspaceId, agent, conversationId),
    forkStored: async () => undefined,
    forgetWork: async () => undefined,
    forgetOutputs: async () => undefined,
    removeStored: async () => undefined,
    close: () => undefined,
  };
}
