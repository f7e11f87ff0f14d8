/**
 * A turn's record: the transcript (the user's message, the answer, the raw events, an error), the session
 * pointer moved as the API's states table says, and the session recorded after its delay.
 */

import type { AgentEvent, TurnOutcome } from "../engine/types.ts";
import { ApiError } from "../errors/catalogue.ts";
import type { MessageRecord, SessionRecord, TurnWrite } from "../store/types.ts";
import type { TurnContext } from "./context.ts";
import { isOutput } from "./events.ts";
import type { TurnFailure } from "./failure.ts";
import type { LoadedHistory } from "./history.ts";
import { newSessionId } from "./ids.ts";
import type { TurnPlan } from "./plan.ts";

/** What a finished (or failed) turn hands to the commit. */
export interface TurnResult {
  agentEvents: AgentEvent[];
  outcome: TurnOutcome | undefined;
  resumedSessionId: string | null;
  failure: TurnFailure | undefined;
  /** Repo agents with read_only false: the commit pushed to the default branch. */
  pushedCommit: string | null;
}

/** Writes the turn to the transcript and moves the session pointer as the API's states table says. */
export async function commitTurn(context: TurnContext, plan: TurnPlan, result: TurnResult): Promise<void> {
  const { agentEvents, outcome, resumedSessionId, failure } = result;
  const store = context.store;
  const current = await store.getConversation(plan.record.id);
  // The same conversation, not a new one that took the id after a delete: never write into another's.
  if (
    !current ||
    current.generation !== plan.record.generation ||
    current.createdAt !== plan.record.createdAt ||
    current.ownerMemberId !== plan.record.ownerMemberId ||
    current.workspaceId !== plan.record.workspaceId
  )
    throw new ApiError("AGENT_API_CONVERSATION_DELETED", "the conversation was deleted during the turn");
  const completed = failure === undefined;
  const at = context.now();
  const messages: Array<Omit<MessageRecord, "conversationId" | "turnIndex" | "seq" | "createdAt">> = [];
  // A turn that did not complete did not replace its context, so its compaction did not happen either.
  const compaction = completed ? agentEvents.find((e) => e.kind === "compaction") : undefined;
  if (compaction?.kind === "compaction") {
    // A user message as the API has it, so it carries an author: the member whose turn compacted.
    messages.push({
      role: "user",
      text: compaction.summary,
      authorMemberId: plan.caller.memberId,
      authorName: plan.caller.memberName,
      isCompactSummary: true,
    });
  }
  messages.push({
    role: "user",
    text: plan.prompt,
    authorMemberId: plan.caller.memberId,
    authorName: plan.caller.memberName,
    isCompactSummary: false,
  });
  const answer = agentEvents.flatMap((e) => (e.kind === "text" ? [e.text] : [])).join("\n\n");
  if (answer !== "") messages.push({ role: "assistant", text: answer, ...system(), isCompactSummary: false });
  const events = agentEvents.map(rawEvent);
  if (result.pushedCommit) events.push({ type: "repo_push", commit: result.pushedCommit });
  if (failure !== undefined) events.push(errorRecord(failure));
  // The API's states table: output records a session (the pointer a few seconds later; an existing one
  // is updated in place); a resumed turn without output clears the pointer so the next turn starts clean.
  // A turn that failed or was cut short moves nothing: it is stored with its error, the session kept.
  const producedOutput = agentEvents.some(isOutput);
  // Whether the session is still there; its history was read at the turn's start and is not read again.
  const resumed = resumedSessionId !== null && (await store.hasSession(resumedSessionId));
  let session: TurnWrite["session"];
  let toRecord: SessionRecord | undefined;
  if (completed && producedOutput && outcome !== undefined) {
    const context: LoadedHistory = { messages: outcome.history, tokens: outcome.historyTokens };
    if (resumed)
      session = { append: { id: resumedSessionId as string, history: context, kept: outcome.keptHistory } };
    else
      toRecord = {
        id: newSessionId(),
        conversationId: current.id,
        context,
        createdAt: at,
        updatedAt: at,
        turnIndex: current.turnCount,
      };
  } else if (completed && !producedOutput && resumedSessionId !== null) {
    session = { clearPointer: true };
  }
  await store.commitTurn({
    conversationId: current.id,
    turnIndex: current.turnCount,
    messages,
    events,
    compaction: compaction?.kind === "compaction" ? { summary: compaction.summary } : null,
    at,
    session,
    fence: plan.release.fence,
  });
  if (toRecord) await context.sessions.recordLater(toRecord);
}

function system(): { authorMemberId: null; authorName: null } {
  return { authorMemberId: null, authorName: null };
}

/** The transcript's raw `events` element for an agent event (their shape is "not shown" by the API). */
function rawEvent(event: AgentEvent): Record<string, unknown> {
  if (event.kind === "tool_result") {
    return {
      type: "tool_result",
      tool_use_id: event.toolUseId,
      content: event.content,
      is_error: event.isError,
    };
  }
  const { kind, ...rest } = event;
  return { type: kind, ...rest };
}

/**
 * A failed turn's raw event in the transcript: the message its stream's `error` event carried, and the
 * catalogue code (the API leaves the raw events' shape to the server, unlike the stream's event).
 */
export function errorRecord(failure: TurnFailure): Record<string, unknown> {
  return { type: "error", message: failure.message, code: failure.code };
}
