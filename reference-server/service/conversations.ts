/**
 * The conversation endpoints other than send-message: list, get, transcript, last compaction, share
 * toggle, fork and delete, with the API's visibility and owner-only rules.
 */

import type { components } from "@agent-api/client/api-types";
import type { ConversationLocks } from "../coordination/leased-locks.ts";
import { KeyedMutex } from "../coordination/locks.ts";
import type { SessionRecordings } from "../coordination/session-recorder.ts";
import { badRequest, conflict, conversationNotFound, forbidden } from "../errors/catalogue.ts";
import {
  type Channel,
  ConversationExistsError,
  type ConversationRecord,
  type SessionRecord,
} from "../store/types.ts";
import type { InterruptCode } from "../turn/failure.ts";
import type { SessionTextEntry } from "../turn/history.ts";
import { newConversationId, newSessionId } from "../turn/ids.ts";
import { checkModel, findAgent } from "./agents.ts";
import { copyOwnerOf } from "./local-copies-reconcile.ts";
import { checkConversationId } from "./prompt.ts";
import { transcriptJson } from "./transcript-pages.ts";
import type { Caller, ServiceDeps } from "./types.ts";
import { type ApiConversation, canSee, isOwner, toApiConversation } from "./visibility.ts";

type Schemas = components["schemas"];

export interface ListQuery {
  channel?: Channel;
  channel_id?: string;
  notebook_path?: string;
  automation?: string;
  since?: string;
  limit?: number;
}

export const DEFAULT_LIST_LIMIT = 50;

export class ConversationService {
  readonly #deps: ServiceDeps;
  readonly #sessions: SessionRecordings;
  /** The per-conversation locks turns take: a fork waits for a running turn on its parent. */
  readonly #locks: ConversationLocks;
  /**
   * Fork and delete of one conversation, one at a time: a fork never copies a parent that a concurrent
   * delete is removing underneath it (that was a 500, and a child left behind). Delete does not wait for a
   * running turn (it ends that turn with an error event).
   */
  readonly #copyOrRemove = new KeyedMutex();

  /** Ends a conversation's running turn (delete does not wait for the agent to finish). */
  readonly #interruptTurn: (conversationId: string, code: InterruptCode) => void;

  /** Tells the other instances a delete is done (their local copies go). */
  readonly #announceDeleted: (conversationId: string) => void;

  constructor(
    deps: ServiceDeps,
    sessions: SessionRecordings,
    locks: ConversationLocks = new KeyedMutex(),
    interruptTurn: (conversationId: string, code: InterruptCode) => void = () => undefined,
    announceDeleted: (conversationId: string) => void = () => undefined,
  ) {
    this.#announceDeleted = announceDeleted;
    this.#deps = deps;
    this.#sessions = sessions;
    this.#locks = locks;
    this.#interruptTurn = interruptTurn;
  }

  #now(): string {
    return (this.#deps.now?.() ?? new Date()).toISOString();
  }

  /** The conversation if the caller may read it; 404 `Conversation not found` otherwise (never leaks). */
  async visible(caller: Caller, agent: string, id: string): Promise<ConversationRecord> {
    findAgent(this.#deps.config, caller, agent);
    const record = await this.#deps.store.getConversation(id);
    if (!record || !canSee(record, caller, agent)) throw conversationNotFound();
    return record;
  }

  /** Visible and owned by the caller: 404 when it cannot see it, 403 when it can but does not own it. */
  async #owned(caller: Caller, agent: string, id: string, action: string): Promise<ConversationRecord> {
    const record = await this.visible(caller, agent, id);
    if (!isOwner(record, caller)) throw forbidden(`Only the conversation owner may ${action}`);
    return record;
  }

  async list(caller: Caller, agent: string, query: ListQuery): Promise<Schemas["ConversationList"]> {
    findAgent(this.#deps.config, caller, agent);
    if (query.since !== undefined && Number.isNaN(Date.parse(query.since)))
      throw badRequest("query.since must be an ISO 8601 time");
    const records = await this.#deps.store.listConversations({
      workspaceId: caller.workspaceId,
      agent,
      viewerMemberId: caller.memberId,
      channel: query.channel,
      channelId: query.channel_id,
      notebookPath: query.notebook_path,
      automation: query.automation,
      since: query.since,
      limit: query.limit ?? DEFAULT_LIST_LIMIT,
    });
    return { conversations: records.map((r) => toApiConversation(r, caller)) };
  }

  async get(caller: Caller, agent: string, id: string): Promise<Schemas["ConversationEnvelope"]> {
    return { conversation: toApiConversation(await this.visible(caller, agent, id), caller) };
  }

  async transcript(caller: Caller, agent: string, id: string): Promise<Schemas["Transcript"]> {
    const record = await this.visible(caller, agent, id);
    const pieces: string[] = [];
    for await (const piece of this.transcriptPieces(caller, record, new AbortController().signal))
      pieces.push(piece);
    return JSON.parse(pieces.join("")) as Schemas["Transcript"];
  }

  /**
   * The JSON of a transcript the caller may read (`visible` first), in pieces read a page at a time
   * (service/transcript-pages.ts); reading stops between pages once `signal` is aborted.
   */
  transcriptPieces(caller: Caller, record: ConversationRecord, signal: AbortSignal): AsyncGenerator<string> {
    return transcriptJson(this.#deps.store, record, caller, signal);
  }

  async lastCompaction(caller: Caller, agent: string, id: string): Promise<Schemas["CompactionInfo"]> {
    await this.visible(caller, agent, id);
    const last = await this.#deps.store.getLastCompaction(id);
    return last ? { compacted: true, summary: last.summary } : { compacted: false, summary: "" };
  }

  async share(
    caller: Caller,
    agent: string,
    id: string,
    shared: boolean,
  ): Promise<{ conversation: ApiConversation }> {
    await this.#owned(caller, agent, id, "change sharing");
    await this.#deps.store.updateConversation(id, { shared });
    return this.get(caller, agent, id);
  }

  async delete(caller: Caller, agent: string, id: string): Promise<void> {
    await this.#owned(caller, agent, id, "delete it");
    // A running turn is ended, not awaited; its lock is then taken so that the turn's last writes, the row
    // and the files all go before the id can be used again (by a send or a fork's child).
    this.#interruptTurn(id, "AGENT_API_CONVERSATION_DELETED");
    const releaseTurn = await this.#locks.acquire(id);
    const release = await this.#copyOrRemove.acquire(id);
    try {
      const record = await this.#owned(caller, agent, id, "delete it");
      await this.#sessions.cancel(id);
      await this.#deps.sandbox.remove(copyOwnerOf(record));
      await this.#deps.store.deleteConversation(id);
      this.#deps.diskShares?.forget(record.workspaceId);
      this.#announceDeleted(id);
    } finally {
      release();
      releaseTurn();
    }
  }

  async fork(
    caller: Caller,
    agent: string,
    id: string,
    body: Schemas["ForkRequest"],
  ): Promise<Schemas["ForkResult"]> {
    await this.visible(caller, agent, id);
    if (body.model !== undefined)
      checkModel(findAgent(this.#deps.config, caller, agent), body.model, "model");
    const childId = body.conversation_id;
    if (childId !== undefined && (await this.#deps.store.getConversation(childId)))
      throw conflict(`Conversation id already taken: ${childId}`);
    // The parent's turn lock (a fork waits for a running turn) and the child id's (no send can create the
    // child between its row and its files); taken in id order so two forks never wait on each other.
    const ids = childId !== undefined && childId !== id ? [id, childId].sort() : [id];
    const releases: Array<() => void> = [];
    try {
      for (const lockId of ids) releases.push(await this.#locks.acquire(lockId));
      releases.push(await this.#copyOrRemove.acquire(id));
      return await this.#fork(caller, agent, id, body);
    } finally {
      for (const release of releases.reverse()) release();
    }
  }

  async #fork(
    caller: Caller,
    agent: string,
    id: string,
    body: Schemas["ForkRequest"],
  ): Promise<Schemas["ForkResult"]> {
    const parent = await this.visible(caller, agent, id);
    if (body.conversation_id !== undefined) checkConversationId(body.conversation_id, "conversation_id");
    const childId = body.conversation_id ?? newConversationId();
    const store = this.#deps.store;
    if (await store.getConversation(childId)) throw conflict(`Conversation id already taken: ${childId}`);
    const atTurn = Math.min(Math.max(0, body.at_turn ?? parent.turnCount), parent.turnCount);
    // The child is a full copy (rows and files) in the forker's workspace: it counts against that workspace's
    // disk share, whoever owns the parent (a Viewer's forks of a large shared conversation filled the disk).
    const shares = this.#deps.diskShares;
    const disk = shares
      ? await shares.reserve(caller.workspaceId, await shares.forkBytes(parent.id))
      : undefined;
    let copied = false;
    try {
      const result = await this.#copy(caller, parent, childId, atTurn, body);
      copied = true;
      return result;
    } finally {
      disk?.done(copied);
    }
  }

  async #copy(
    caller: Caller,
    parent: ConversationRecord,
    childId: string,
    atTurn: number,
    body: Schemas["ForkRequest"],
  ): Promise<Schemas["ForkResult"]> {
    const store = this.#deps.store;
    const at = this.#now();
    const sessionId = newSessionId();
    const child: ConversationRecord = {
      ...parent,
      id: childId,
      ownerMemberId: caller.memberId,
      shared: false,
      hidden: false,
      agentSessionId: sessionId,
      parentConversationId: parent.id,
      forkedAtTurnIndex: atTurn,
      // Inherited (the API): what the parent's latest turn asked for, else what the parent itself inherited
      // or was started with.
      defaultModel: body.model ?? parent.turnModel ?? parent.defaultModel,
      defaultAutomation:
        body.automation ?? parent.turnAutomation ?? parent.defaultAutomation ?? parent.automation,
      turnModel: null,
      turnAutomation: null,
      createdAt: at,
      updatedAt: at,
      turnCount: atTurn,
      generation: 0,
    };
    try {
      child.generation = await store.insertConversation(child);
    } catch (error) {
      if (error instanceof ConversationExistsError)
        throw conflict(`Conversation id already taken: ${childId}`);
      throw error;
    }
    try {
      await store.copyTurns(parent.id, childId, atTurn);
      // The child's session is the parent's history up to at_turn, so its first turn answers from it at once.
      await this.#forkSession(parent.id, atTurn, {
        id: sessionId,
        conversationId: childId,
        createdAt: at,
        updatedAt: at,
      });
      await this.#deps.sandbox.fork(copyOwnerOf(parent), copyOwnerOf(child));
    } catch (error) {
      // No half-made child: a fork that fails leaves nothing behind (the id stays free).
      await store.deleteConversation(childId);
      await this.#deps.sandbox.remove(copyOwnerOf(child)).catch(() => undefined);
      throw error;
    }
    return {
      conversation_id: childId,
      parent_conversation_id: parent.id,
      forked_at_turn: atTurn,
      agent_session_id: sessionId,
    };
  }

  /**
   * The child's session: the parent's full Messages history (every block) as it stood when turn `atTurn`
   * began, sent back unchanged on the child's first turn. The newest turn's history may still wait for its
   * recording delay (then it is the whole of it: such a session starts fresh at that turn). A parent whose
   * history was stored before turns were recorded per message gets its transcript's text instead.
   */
  async #forkSession(
    parentId: string,
    atTurn: number,
    session: Omit<SessionRecord, "context" | "turnIndex">,
  ): Promise<void> {
    const store = this.#deps.store;
    const pending = await this.#sessions.pendingSession(parentId);
    if (pending?.turnIndex !== undefined && pending.turnIndex < atTurn) {
      await store.createSession({ ...session, context: pending.context, turnIndex: pending.turnIndex });
      return;
    }
    if (await store.forkSession({ parentConversationId: parentId, uptoTurn: atTurn, session })) return;
    const copied = (await store.listMessages(parentId))
      .filter((m) => m.turnIndex < atTurn)
      .map<SessionTextEntry>((m) =>
        m.isCompactSummary
          ? { role: m.role, text: m.text, compactSummary: true }
          : { role: m.role, text: m.text },
      );
    await store.createSession({ ...session, context: copied });
  }
}
