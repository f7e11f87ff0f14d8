/**
 * Where a turn runs: a per-conversation working directory plus tools executed as isolated child
 * processes. The service asks for a TurnSandbox at the start of a turn and finishes it at the end.
 */

import type { FileStore } from "../store/file-store.ts";
import type { SandboxLimits } from "./limits.ts";
import type { CopyOwner } from "./local-copies.ts";
import type { SandboxUserSetting } from "./sandbox-user.ts";

export type ToolName = "write_file" | "read_file" | "list_files" | "run_command";

export interface ToolOutcome {
  content: string;
  isError: boolean;
}

/**
 * Inputs: write_file {path, content}; read_file {path}; list_files {path?}; run_command {command}.
 * When `signal` aborts, the call ends: a command is killed with everything it started, and the outcome is
 * an error saying so.
 */
export interface ToolRunner {
  run(name: ToolName, input: Record<string, unknown>, signal?: AbortSignal): Promise<ToolOutcome>;
}

/** What the sandbox needs to know about the agent (the config layer maps its agent to this). */
export interface SandboxAgent {
  workspaceId: string;
  name: string;
  kind: "storage" | "repo";
  /** Environment variables the agent's tools see; nothing else of the server's environment. */
  secrets: Record<string, string>;
  /** repo agents: git URL (a local bare repository path/URL in the demo and tests). */
  repoUrl?: string;
  /** storage agents: directory holding the agent's working files, restored fresh each turn. */
  filesDir?: string;
}

export interface SandboxRequest {
  /** Key of the conversation's persistent working directory (the conversation id; any string). */
  conversationId: string;
  /**
   * The conversation's generation in the database (ConversationRecord.generation): a local copy made for
   * another generation of the id is never used, it is wiped.
   */
  generation: number;
  agent: SandboxAgent;
  /** Throwaway directory, nothing restored, discarded after the turn. */
  isolated: boolean;
  /** Repo agents: when false, finish() commits and pushes changes to the default branch. */
  readOnly: boolean;
  /** Raw `metadata.attachments` from the request (unvalidated: malformed entries are dropped here). */
  attachments: unknown;
  /**
   * The fencing token of the conversation's turn lease, where the lock is one (several instances): files are
   * saved to the shared file store only while the lease is still this turn's.
   */
  fence?: number;
}

export interface FinishReport {
  /** Repo agents with readOnly false: the pushed commit, or null when nothing changed. */
  pushedCommit: string | null;
  /** Storage agents: paths (relative to outputs/) published to the workspace store this turn. */
  publishedOutputs: string[];
}

export interface TurnSandbox {
  readonly workdir: string;
  /** True when the working directory had to be rebuilt (first turn, or after reclaim). */
  readonly cold: boolean;
  /** Accepted attachment paths relative to workdir, e.g. `.uploads/a (1).txt`. */
  readonly attachments: string[];
  readonly tools: ToolRunner;
  /**
   * Ends the turn: every process of it is ended first; then a completed turn commits/pushes or publishes as
   * the agent kind says, while a failed or cut-short one does neither (its files stay in the working
   * directory). Keeps the sandbox warm. Idempotent: the first call decides.
   */
  finish(outcome?: "completed" | "failed"): Promise<FinishReport>;
}

export interface SandboxManagerOptions {
  /** Root for conversation directories, clones, workspace stores (under the server's --data dir). */
  rootDir: string;
  /** Idle time after which a warm sandbox is reclaimed (its files persist on disk). */
  idleMs: number;
  /** Allow running tools without bubblewrap (prints a warning). */
  unsafeNoIsolation: boolean;
  /** Per-tool wall-clock limit and output cap. */
  toolTimeoutMs: number;
  toolOutputCapBytes: number;
  /** Per-command and per-conversation limits; unset fields take DEFAULT_SANDBOX_LIMITS. */
  limits?: Partial<SandboxLimits>;
  /** Host user of the commands (see sandbox-user.ts); default "auto". */
  sandboxUser?: SandboxUserSetting;
  /**
   * Where several instances share the store: storage agents' working files and published outputs live there,
   * and the local directories are a cache of it. Absent (one instance), the local disk is the only copy.
   */
  fileStore?: FileStore;
}

export interface SandboxManager {
  /** "bwrap" when tools run in bubblewrap; "none" when unsafeNoIsolation; "unavailable" = tools refused. */
  readonly isolation: "bwrap" | "none" | "unavailable";
  /** With isolation "unavailable": why (what failed and the fix), as every refused tool says it; else null. */
  readonly isolationProblem: string | null;
  /** Who commands run as: a uid per conversation, one fixed uid, or the server's own user. */
  readonly sandboxUser: "per-conversation" | "fixed" | "server";
  /** Which cgroups bound each command ("none": rlimits only). */
  readonly cgroups: "v1" | "v2" | "none";
  /** Lines the server prints at start: how the host weakens the sandbox (no user switch, no cgroups). */
  readonly notices: string[];
  acquire(request: SandboxRequest): Promise<TurnSandbox>;
  /** Copies a conversation's persistent files to a new conversation (fork). */
  fork(parent: CopyOwner, child: CopyOwner): Promise<void>;
  /** Deletes a conversation's files, its published outputs included (delete). */
  remove(owner: CopyOwner): Promise<void>;
  /**
   * Drops this instance's local copy of a conversation another instance deleted (its directories and what
   * this instance knew of the shared set); the shared store is left alone. Without it, every instance would
   * keep a copy of every conversation it ever served, deleted or not.
   */
  evictLocal(conversationId: string): Promise<void>;
  /** The conversations this instance holds a local copy of (what reconciling with the database walks). */
  localCopies(): Promise<CopyOwner[]>;
  /** Whose the id's local copy is, or null when there is none. */
  localCopyOwner(conversationId: string): Promise<CopyOwner | null>;
  /**
   * Bytes these conversations' local files take on this instance's disk, and the workspace's published
   * outputs when `workspaceId` is given.
   */
  localBytes(conversationIds: readonly string[], workspaceId?: string): Promise<number>;
  /** Files a conversation published to the workspace store (storage agents' outputs/). */
  listWorkspaceOutputs(workspaceId: string, agent: string, conversationId: string): Promise<string[]>;
  readWorkspaceOutput(
    workspaceId: string,
    agent: string,
    conversationId: string,
    path: string,
  ): Promise<Buffer>;
  close(): Promise<void>;
}
