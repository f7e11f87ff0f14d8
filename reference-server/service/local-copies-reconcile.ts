/**
 * Nothing of a deleted conversation survives on any instance. A delete removes the rows and the shared files at
 * once, and tells the other instances (TurnInterrupts) to drop their local copies; an instance that was down
 * or whose listener was cut at the time never heard it. So each instance reconciles its local copies with the
 * database when it starts and whenever its listener (re)connects: a copy whose conversation is gone, or is now
 * another generation of the id, is removed. (Each turn also checks its own copy before using it: the sandbox
 * manager's claim.)
 */

import type { ConversationLocks } from "../coordination/leased-locks.ts";
import type { CopyOwner } from "../sandbox/local-copies.ts";
import type { SandboxManager } from "../sandbox/types.ts";
import type { ConversationRecord, Store } from "../store/types.ts";

/**
 * Published (TurnInterrupts) once a delete is done, besides the interrupt at its start: a listener that was
 * reconnecting when the interrupt went out reconciled before the rows were gone, and hears this one.
 */
export const DELETE_DONE = "AGENT_API_CONVERSATION_DELETE_DONE";

/** The local copy a conversation's turn, fork or delete works on. */
export function copyOwnerOf(record: ConversationRecord): CopyOwner {
  return {
    conversationId: record.id,
    workspaceId: record.workspaceId,
    agent: record.agent,
    generation: record.generation,
  };
}

export interface ReconcileDeps {
  store: Pick<Store, "conversationGenerations">;
  sandbox: Pick<SandboxManager, "localCopies" | "localCopyOwner" | "evictLocal">;
  locks: ConversationLocks;
}

/** Ids asked of the database at once. */
const BATCH = 500;

/** Removes every local copy the database no longer names as its conversation's; how many went. */
export async function reconcileLocalCopies(deps: ReconcileDeps): Promise<number> {
  const copies = await deps.sandbox.localCopies();
  let removed = 0;
  for (let start = 0; start < copies.length; start += BATCH) {
    const batch = copies.slice(start, start + BATCH);
    const live = await deps.store.conversationGenerations(batch.map((copy) => copy.conversationId));
    for (const copy of batch) {
      if (live.get(copy.conversationId) === copy.generation) continue;
      if (await evictIfStale(deps, copy.conversationId)) removed++;
    }
  }
  return removed;
}

/**
 * Removes the id's local copy unless the database names it as its conversation's. Under the conversation's
 * lock, and checked again there: a turn of a conversation that took the id meanwhile may have made the copy
 * its own, and keeps it.
 */
export async function evictIfStale(deps: ReconcileDeps, conversationId: string): Promise<boolean> {
  const release = await deps.locks.acquire(conversationId);
  try {
    const owner = await deps.sandbox.localCopyOwner(conversationId);
    if (owner === null) return false;
    const live = await deps.store.conversationGenerations([conversationId]);
    if (live.get(conversationId) === owner.generation) return false;
    await deps.sandbox.evictLocal(conversationId);
    return true;
  } finally {
    release();
  }
}
