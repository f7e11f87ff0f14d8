/**
 * A conversation's transcript as JSON text in pieces, read from the store a page of rows at a time: a
 * transcript of any stored size costs a response one page of rows in memory, and the event loop is given
 * back between pages (node:sqlite reads synchronously), so other requests are served while a large one is
 * read. The text is exactly what `JSON.stringify` of the whole Transcript would give.
 */
import type { components } from "@agent-api/client/api-types";
import type { ConversationRecord, MessageRecord, Store } from "../store/types.ts";
import type { Caller } from "./types.ts";
import { toApiConversation } from "./visibility.ts";

type Schemas = components["schemas"];

/**
 * Rows per page. A row is bounded by what a turn may store (a prompt up to the body limit, a tool result up
 * to the output cap), so a page is bounded too; small pages keep the common row (a few KiB) cheap.
 */
export const TRANSCRIPT_PAGE_ROWS = 32;

/** Gives the event loop back: pending I/O (other requests) runs before the next page is read. */
function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** The Transcript's JSON, piece by piece; stops early (between pages) once `signal` is aborted. */
export async function* transcriptJson(
  store: Store,
  record: ConversationRecord,
  caller: Caller,
  signal: AbortSignal,
): AsyncGenerator<string> {
  const id = record.id;
  yield `{"conversation":${JSON.stringify(toApiConversation(record, caller))},"messages":[`;
  let first = true;
  let afterSeq = -1;
  while (!signal.aborted) {
    const rows = await store.listMessages(id, { afterSeq, limit: TRANSCRIPT_PAGE_ROWS });
    if (rows.length === 0) break;
    const parts: string[] = [];
    for (const [i, row] of rows.entries())
      parts.push(JSON.stringify(await transcriptMessage(store, row, rows.slice(i + 1))));
    yield `${first ? "" : ","}${parts.join(",")}`;
    first = false;
    afterSeq = rows[rows.length - 1].seq;
    await yieldToLoop();
  }
  yield `],"events":[`;
  first = true;
  afterSeq = -1;
  while (!signal.aborted) {
    const rows = await store.listEvents(id, { afterSeq, limit: TRANSCRIPT_PAGE_ROWS });
    if (rows.length === 0) break;
    const parts = rows.map((e) => JSON.stringify({ turn_index: e.turnIndex, ...e.event }));
    yield `${first ? "" : ","}${parts.join(",")}`;
    first = false;
    afterSeq = rows[rows.length - 1].seq;
    await yieldToLoop();
  }
  yield "]}";
}

async function transcriptMessage(
  store: Store,
  row: MessageRecord,
  later: MessageRecord[],
): Promise<Schemas["TranscriptMessage"]> {
  const message: Schemas["TranscriptMessage"] = {
    role: row.role,
    content: [{ type: "text", text: row.text }],
    is_compact_summary: row.isCompactSummary,
  };
  if (row.role === "user") {
    const author = row.authorMemberId !== null ? row : await promptOfTurn(store, row, later);
    message.author_user_id = author?.authorMemberId ?? "";
    message.author_name = author?.authorName ?? "";
  }
  return message;
}

/**
 * Summaries stored before they carried an author take the author of their turn's prompt, which is stored
 * right after the summary: in the rest of the page, or at the start of the next one.
 */
async function promptOfTurn(
  store: Store,
  summary: MessageRecord,
  later: MessageRecord[],
): Promise<MessageRecord | undefined> {
  const isPrompt = (r: MessageRecord) =>
    r.turnIndex === summary.turnIndex && r.role === "user" && r.authorMemberId !== null;
  const inPage = later.find(isPrompt);
  if (inPage) return inPage;
  const next = await store.listMessages(summary.conversationId, { afterSeq: summary.seq, limit: 2 });
  return next.find(isPrompt);
}
