/**
 * Where a conversation's files are kept between turns, the one thing of the sandbox manager that differs
 * between one instance and several, chosen once when the manager is made: on one instance the local disk is
 * the store (files-on-one-instance.ts); where instances share a store, the local directories are caches of its
 * sets, restored before a turn and saved after it (files-shared.ts).
 */
import type { CopyOwner } from "./local-copies.ts";
import type { HostUser } from "./sandbox-user.ts";
import type { SandboxAgent, SandboxRequest } from "./types.ts";

export interface ConversationFiles {
  /**
   * Whether a local copy that no owner record names may be any conversation's: on one instance it is this
   * conversation's (a delete removes the copy at once); where instances share the store it is a cache, and
   * may be anyone's.
   */
  readonly unrecordedCopyIsAnyones: boolean;
  /** Before a storage agent's turn: the working directory brought to the stored files; whether it changed. */
  restoreWork(request: SandboxRequest, workdir: string, user: HostUser | null): Promise<boolean>;
  /** After a storage agent's turn (completed or not): its working directory kept for the next turn. */
  saveWork(request: SandboxRequest, workdir: string): Promise<void>;
  /** Copies the turn's `outputs/` to the conversation's folder of the workspace store; what was published. */
  publish(
    agent: SandboxAgent,
    conversationId: string,
    workdir: string,
    fence: number | undefined,
  ): Promise<string[]>;
  /** The conversation's outputs folder, holding what is stored. */
  outputsFolder(workspaceId: string, agent: string, conversationId: string): Promise<string>;
  /** A fork's stored files, after its local copy: the child holds what the parent holds. */
  forkStored(parent: CopyOwner, child: CopyOwner): Promise<void>;
  /** The local copy of the conversation's working directory went: what this instance knew of it goes too. */
  forgetWork(conversationId: string): Promise<void>;
  /** The local copy of the conversation's outputs went. */
  forgetOutputs(owner: CopyOwner): Promise<void>;
  /** A delete: the conversation's stored files go. */
  removeStored(owner: CopyOwner): Promise<void>;
  close(): void;
}

/** What both kinds need of the manager: the outputs folders' place and the quota of one directory. */
export interface ConversationFilesContext {
  storeDir(workspaceId: string, agent: string, conversationId: string): string;
  limits: { diskBytes: number; files: number };
}
