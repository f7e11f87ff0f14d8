/**
 * Conversations the demo starts with that the API itself cannot create: one owned by a chat channel
 * (visible to every member of the workspace, the API's third visibility rule) and one of a notebook, so
 * the list filters `channel`, `channel_id` and `notebook_path` have something to find. Seeded once, also
 * when several instances sharing one store start at once (under each conversation's turn lease).
 */
import { LeasedLocks } from "../coordination/leased-locks.ts";
import { newConversation } from "../store/new-conversation.ts";
import {
  ConversationExistsError,
  type ConversationRecord,
  type ServerStore,
  type Store,
} from "../store/types.ts";

/** The lease a seeding instance holds: how long the others wait when it dies half-way. */
const SEED_LEASE_MS = 10_000;

export const DEMO_CHANNEL_CONVERSATION_ID = "demo-slack-ops-thread";
export const DEMO_NOTEBOOK_CONVERSATION_ID = "demo-notebook-weekly";
/** The seeded Slack thread's channel and the notebook's path: the list filters' inputs for a check. */
export const DEMO_CHANNEL_ID = "C0DEMOOPS";
export const DEMO_NOTEBOOK_PATH = "notebooks/weekly-report.ipynb";

/** Writes what is missing of one seeded conversation: its row, then its one turn. */
async function seedRows(
  store: Store,
  record: ConversationRecord,
  author: { id: string; name: string },
  prompt: string,
  answer: string,
  fence: number | undefined,
): Promise<void> {
  let existing = await store.getConversation(record.id);
  if (existing === undefined) {
    try {
      await store.insertConversation(record);
    } catch (error) {
      // Without a lease (SQLite) nobody else writes here; kept for a store shared some other way.
      if (!(error instanceof ConversationExistsError)) throw error;
    }
    existing = await store.getConversation(record.id);
  }
  if (existing === undefined || existing.turnCount > 0) return;
  await store.commitTurn({
    conversationId: record.id,
    turnIndex: 0,
    messages: [
      {
        role: "user",
        text: prompt,
        authorMemberId: author.id,
        authorName: author.name,
        isCompactSummary: false,
      },
      { role: "assistant", text: answer, authorMemberId: null, authorName: null, isCompactSummary: false },
    ],
    events: [{ type: "text", text: answer }],
    compaction: null,
    at: record.updatedAt,
    fence,
  });
}

async function seedOne(
  store: Store,
  locks: LeasedLocks | undefined,
  record: ConversationRecord,
  author: { id: string; name: string },
  prompt: string,
  answer: string,
): Promise<void> {
  // Seeded already (the usual start): no lease, so a turn running on it elsewhere never delays a start.
  if (((await store.getConversation(record.id))?.turnCount ?? 0) > 0) return;
  if (locks === undefined) return seedRows(store, record, author, prompt, answer, undefined);
  // The row and its turn are two writes: under the conversation's lease one instance makes both, and one
  // that died between them leaves the turn to whichever instance takes the lease next.
  const release = await locks.acquire(record.id);
  try {
    await seedRows(store, record, author, prompt, answer, release.fence);
  } finally {
    release();
  }
}

export async function seedDemoConversations(store: ServerStore, at: Date = new Date()): Promise<void> {
  const locks =
    store.sharing === "shared" ? new LeasedLocks(store.turnLeases, { leaseMs: SEED_LEASE_MS }) : undefined;
  const time = at.toISOString();
  const base = { workspaceId: "demo", agent: "demo-agent", createdAt: time };
  await seedOne(
    store,
    locks,
    newConversation({
      ...base,
      id: DEMO_CHANNEL_CONVERSATION_ID,
      ownerMemberId: null,
      channel: "SLACK",
      channelId: DEMO_CHANNEL_ID,
      notebookPath: null,
      title: "Is the deploy done?",
    }),
    { id: "slack:U0DEMOBOB", name: "bob (Slack)" },
    "Is the deploy done?",
    "Yes: the last deploy finished without errors.",
  );
  await seedOne(
    store,
    locks,
    newConversation({
      ...base,
      id: DEMO_NOTEBOOK_CONVERSATION_ID,
      ownerMemberId: "alice",
      channel: "NOTEBOOK",
      channelId: null,
      notebookPath: DEMO_NOTEBOOK_PATH,
      title: "Summarise this week's numbers",
    }),
    { id: "alice", name: "Alice Admin" },
    "Summarise this week's numbers",
    "Revenue is up 4% on last week.",
  );
}
