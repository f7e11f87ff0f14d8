/**
 * Conversations the demo starts with that the API itself cannot create: one owned by a chat channel
 * (visible to every member of the workspace, the API's third visibility rule) and one of a notebook, so
 * the list filters `channel`, `channel_id` and `notebook_path` have something to find. Seeded once.
 */
import { newConversation } from "../store/new-conversation.ts";
import { ConversationExistsError, type ConversationRecord, type Store } from "../store/types.ts";

export const DEMO_CHANNEL_CONVERSATION_ID = "demo-slack-ops-thread";
export const DEMO_NOTEBOOK_CONVERSATION_ID = "demo-notebook-weekly";
/** The seeded Slack thread's channel and the notebook's path: the list filters' inputs for a check. */
export const DEMO_CHANNEL_ID = "C0DEMOOPS";
export const DEMO_NOTEBOOK_PATH = "notebooks/weekly-report.ipynb";

async function seedOne(
  store: Store,
  record: ConversationRecord,
  author: { id: string; name: string },
  prompt: string,
  answer: string,
): Promise<void> {
  if (await store.getConversation(record.id)) return;
  try {
    await store.insertConversation(record);
  } catch (error) {
    // Another instance on the same store seeded it first.
    if (error instanceof ConversationExistsError) return;
    throw error;
  }
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
  });
}

export async function seedDemoConversations(store: Store, at: Date = new Date()): Promise<void> {
  const time = at.toISOString();
  const base = { workspaceId: "demo", agent: "demo-agent", createdAt: time };
  await seedOne(
    store,
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
