/**
 * Durable state behind the service, one contract for two engines: SQLite through node:sqlite (WAL, the
 * embedded default; sqlite/) and PostgreSQL (postgres/), one module per table in each. Every method returns a promise, as a network
 * database's driver does; each call is atomic on its own.
 */

import type { FileStore } from "./file-store.ts";
import type { StoredBytes } from "./stored-bytes.ts";

export const CHANNELS = ["INTERACTIVE", "NOTEBOOK", "SLACK", "EMAIL"] as const;
export type Channel = (typeof CHANNELS)[number];

export interface ConversationRecord {
  /** Caller-chosen or generated; globally unique across agents and workspaces. */
  id: string;
  workspaceId: string;
  agent: string;
  /** null for conversations owned by a channel (chat channel, e-mail): visible to the whole workspace. */
  ownerMemberId: string | null;
  channel: Channel;
  channelId: string | null;
  notebookPath: string | null;
  /** Automation the conversation was started with (list filter `automation`). */
  automation: string | null;
  title: string;
  shared: boolean;
  agentSessionId: string | null;
  parentConversationId: string | null;
  forkedAtTurnIndex: number | null;
  /** Defaults recorded on a fork for the child's future turns. */
  defaultModel: string | null;
  defaultAutomation: string | null;
  /**
   * The model and automation named by the request of the latest turn (null: it named none); a fork's
   * child inherits them.
   */
  turnModel: string | null;
  turnAutomation: string | null;
  /** `metadata.test`: hidden test run (not listed). */
  hidden: boolean;
  /** ISO 8601 UTC with milliseconds. */
  createdAt: string;
  updatedAt: string;
  turnCount: number;
  /**
   * Assigned by the database when the row is inserted, from a counter that never repeats (0 until then): a
   * conversation deleted and created again under the same id is another generation, so nothing kept for the
   * old one (a local copy of its files on some instance) is ever taken for the new one's.
   */
  generation: number;
}

export interface MessageRecord {
  conversationId: string;
  /** 0-based turn the message belongs to. */
  turnIndex: number;
  /** Order within the conversation. */
  seq: number;
  role: "user" | "assistant";
  text: string;
  authorMemberId: string | null;
  authorName: string | null;
  isCompactSummary: boolean;
  createdAt: string;
}

/** A keyset page of a conversation's rows: those with `seq` above `afterSeq`, at most `limit` of them. */
export interface RowPage {
  afterSeq: number;
  limit: number;
}

export interface EventRecord {
  conversationId: string;
  turnIndex: number;
  seq: number;
  /** The raw agent event (JSON-serialisable object). */
  event: Record<string, unknown>;
  createdAt: string;
}

/**
 * A session's Messages history as the store keeps it: one row per message, so a turn writes only the
 * messages it added. A SessionRecord whose context has this shape is stored that way.
 */
export interface SessionHistory {
  messages: unknown[];
  tokens: number;
}

export function isSessionHistory(value: unknown): value is SessionHistory {
  return (
    typeof value === "object" &&
    value !== null &&
    Array.isArray((value as SessionHistory).messages) &&
    typeof (value as SessionHistory).tokens === "number"
  );
}

export interface SessionRecord {
  id: string;
  conversationId: string;
  /**
   * JSON-serialisable session context: a SessionHistory (read back as one), or any other value (the
   * text entries a fork writes), kept as it is.
   */
  context: unknown;
  createdAt: string;
  updatedAt: string;
  /** The turn whose messages a new history holds (a fork reads the history as it stood after any turn). */
  turnIndex?: number;
}

/** The session a fork's child gets: the parent's history as it stood when turn `uptoTurn` began. */
export interface SessionFork {
  parentConversationId: string;
  uptoTurn: number;
  session: Omit<SessionRecord, "context" | "turnIndex">;
}

export interface CompactionRecord {
  conversationId: string;
  turnIndex: number;
  summary: string;
  createdAt: string;
}

export interface ListFilter {
  workspaceId: string;
  agent: string;
  /** The caller: sees own, shared, and channel-owned (ownerMemberId null) conversations. */
  viewerMemberId: string;
  channel?: Channel;
  channelId?: string;
  notebookPath?: string;
  automation?: string;
  /** ISO 8601: only conversations with updatedAt >= since. */
  since?: string;
  limit: number;
}

/** What one completed turn writes, atomically. */
export interface TurnWrite {
  conversationId: string;
  turnIndex: number;
  messages: Array<Omit<MessageRecord, "conversationId" | "turnIndex" | "seq" | "createdAt">>;
  events: Array<Record<string, unknown>>;
  compaction: { summary: string } | null;
  /** New updatedAt; turnCount becomes turnIndex + 1. */
  at: string;
  /**
   * The turn's session bookkeeping, in the same transaction: `append` stores the resumed session's history
   * after a turn with output; `clearPointer` sets the conversation's agent_session_id to null (a resumed
   * turn with no output).
   */
  session?: { append: SessionAppend } | { clearPointer: true };
  /**
   * The fencing token of the turn lease the writer holds (TurnLeases): the write is refused unless that lease
   * is still the conversation's, so a holder that paused past its lease cannot write after another took it.
   */
  fence?: number;
}

/**
 * A session's history after a turn: the first `kept` messages are those read at the turn's start,
 * unchanged, so only `history.messages.slice(kept)` is written (and any stored row past `kept` replaced).
 * `kept` 0 (a compaction) rewrites the history; a session still in an earlier version's form is written
 * whole once.
 */
export interface SessionAppend {
  id: string;
  history: SessionHistory;
  kept: number;
}

/** A turn acknowledged to its caller and not yet committed: its user message, kept durably meanwhile. */
export interface PendingTurn {
  conversationId: string;
  turnIndex: number;
  text: string;
  authorMemberId: string | null;
  authorName: string | null;
  startedAt: string;
}

/**
 * The conversation's turn lock held in the store, for instances that share it: a lease of `leaseMs` that its
 * holder renews while the turn runs and that frees itself when the holder dies. Each acquisition gets a new,
 * larger fencing token. Times are the database's clock, so the instances' clocks need not agree.
 */
export interface TurnLeases {
  /** Takes the lease if it is free or expired: its fencing token, else undefined (held by a live holder). */
  tryAcquire(conversationId: string, holder: string, leaseMs: number): Promise<number | undefined>;
  /** Extends the lease held under `token`; false when it was lost (expired and taken by another). */
  renew(conversationId: string, token: number, leaseMs: number): Promise<boolean>;
  /** Frees the lease held under `token` (nothing when it was lost). */
  release(conversationId: string, token: number): Promise<void>;
  /**
   * Whether the grant of `token` took over an expired lease that its holder never released (that holder
   * stopped, or could not renew in time): asked once, by the new holder.
   */
  tookOver(token: number): boolean;
}

/**
 * Pending `agent_session_id` recordings kept in the store, for instances that share it: each has a due time
 * on the database's clock, and whichever instance is alive records it once due (recordDue), so a recording
 * outlives the instance that ran the turn.
 */
export interface ScheduledRecordings {
  /** Schedules `session` to be recorded `delayMs` from now, replacing the conversation's earlier one. */
  schedule(session: SessionRecord, delayMs: number): Promise<void>;
  /** Forgets the conversation's pending recording (a newer turn started, the conversation was deleted). */
  cancel(conversationId: string): Promise<void>;
  /** The conversation's pending recording, if any. */
  get(conversationId: string): Promise<SessionRecord | undefined>;
  /** Records (recordSession) every recording that is due, each exactly once across instances; how many. */
  recordDue(): Promise<number>;
}

/**
 * Word to the other instances that a conversation's running turn must end (a delete on another instance):
 * each instance subscribes and ends the turn if it runs there.
 */
export interface TurnInterrupts {
  publish(conversationId: string, reason: string): Promise<void>;
  /**
   * Calls `handler` for every interrupt another instance published (this instance acts on its own at once,
   * before publishing); resolves with unsubscribe. A subscription cut (the database restarted, the connection
   * killed) is made again until it holds; `onReconnect` is called each time it does, since what was published
   * meanwhile was not heard.
   */
  subscribe(
    handler: (conversationId: string, reason: string) => void,
    onReconnect?: () => void,
  ): Promise<() => Promise<void>>;
}

export interface Store {
  getConversation(id: string): Promise<ConversationRecord | undefined>;
  /** Throws ConversationExistsError when the id is taken; the generation the database gave the row. */
  insertConversation(record: ConversationRecord): Promise<number>;
  /** The generation of each of these conversations that exists (ids that do not are absent). */
  conversationGenerations(ids: string[]): Promise<Map<string, number>>;
  updateConversation(id: string, patch: Partial<Omit<ConversationRecord, "id">>): Promise<void>;
  /** Removes the conversation and its messages, events, sessions and compactions. */
  deleteConversation(id: string): Promise<boolean>;
  /** Newest activity (updatedAt, then createdAt, then id) first; hidden conversations excluded. */
  listConversations(filter: ListFilter): Promise<ConversationRecord[]>;
  /** In `seq` order; with `page`, at most `page.limit` rows after `page.afterSeq` (a transcript read in pages). */
  listMessages(conversationId: string, page?: RowPage): Promise<MessageRecord[]>;
  listEvents(conversationId: string, page?: RowPage): Promise<EventRecord[]>;
  /**
   * Appends one completed turn's messages/events/compaction and bumps turnCount/updatedAt in one transaction;
   * the conversation's pending turn, if any, goes in the same transaction.
   */
  commitTurn(write: TurnWrite): Promise<void>;
  /** Records a turn's user message before the turn is acknowledged (replaces an older pending turn). */
  beginTurn(pending: PendingTurn): Promise<void>;
  /** Turns begun and never committed (the process stopped during them). */
  listPendingTurns(): Promise<PendingTurn[]>;
  /** The conversation's turn begun and never committed, if any. */
  getPendingTurn(conversationId: string): Promise<PendingTurn | undefined>;
  /** Copies messages (and events) of turns < uptoTurn from parent to child (fork), in one transaction. */
  copyTurns(parentId: string, childId: string, uptoTurn: number): Promise<void>;
  getLastCompaction(conversationId: string): Promise<CompactionRecord | undefined>;
  createSession(record: SessionRecord): Promise<void>;
  /**
   * Creates the session of a fork's child from the parent's stored Messages history as it stood after turn
   * `uptoTurn - 1` (every block, rows copied unchanged). False, and nothing written, when no session of the
   * parent holds a turn before `uptoTurn` with its turn recorded.
   */
  forkSession(fork: SessionFork): Promise<boolean>;
  getSession(id: string): Promise<SessionRecord | undefined>;
  /** Whether the session exists, without reading its history. */
  hasSession(id: string): Promise<boolean>;
  updateSessionContext(id: string, context: unknown, at: string): Promise<void>;
  /**
   * Writes a session and points its conversation at it, in one transaction; nothing when the conversation
   * is gone (deleted while the recording was pending).
   */
  recordSession(record: SessionRecord): Promise<void>;
  close(): Promise<void>;
  /** The bytes the store holds per workspace (its disk share, service/disk-shares.ts). */
  storedBytes: StoredBytes;
}

/** The Store's parts by table, each engine's module per table implementing one (sqlite/, postgres/). */
export type ConversationsPart = Pick<
  Store,
  | "getConversation"
  | "insertConversation"
  | "conversationGenerations"
  | "updateConversation"
  | "deleteConversation"
  | "listConversations"
>;
export type TranscriptsPart = Pick<
  Store,
  "listMessages" | "listEvents" | "commitTurn" | "copyTurns" | "getLastCompaction"
>;
export type PendingTurnsPart = Pick<Store, "beginTurn" | "listPendingTurns" | "getPendingTurn">;
export type SessionsPart = Pick<
  Store,
  "createSession" | "forkSession" | "getSession" | "hasSession" | "updateSessionContext" | "recordSession"
>;

/**
 * What a store shared by several instances gives their coordination (coordination/index.ts): the turn lock as
 * a lease, the pending session recordings, the interrupts between instances, and the conversations' files,
 * which every instance restores from. A store one process owns gives none of them: that process keeps them in
 * memory and on its own disk.
 */
export interface SharedStoreParts {
  readonly turnLeases: TurnLeases;
  readonly scheduledRecordings: ScheduledRecordings;
  readonly turnInterrupts: TurnInterrupts;
  readonly fileStore: FileStore;
}

/** A store one process owns (SQLite). */
export interface OneInstanceStore extends Store {
  readonly sharing: "one-instance";
}

/** A store several instances share (PostgreSQL). */
export interface SharedStore extends Store, SharedStoreParts {
  readonly sharing: "shared";
}

/** The store a server runs on: which of the two it is decides the coordination, once, at start. */
export type ServerStore = OneInstanceStore | SharedStore;

export class ConversationExistsError extends Error {
  constructor(id: string) {
    super(`conversation ${id} already exists`);
    this.name = "ConversationExistsError";
  }
}

/** A turn's commit fenced by a lease that is no longer the conversation's: another instance holds its lock. */
export class TurnLeaseLostError extends Error {
  constructor() {
    super("the turn lost its conversation's lock (its lease expired and another took it)");
    this.name = "TurnLeaseLostError";
  }
}
