/**
 * The demo's seeded conversations on each store engine: written once, finished when a seeding was cut short
 * between its two writes, and, on PostgreSQL, written once when several instances seed one database at once.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { newConversation } from "../store/new-conversation.ts";
import { openPostgresStore } from "../store/postgres/index.ts";
import { type OpenedStore, STORE_ENGINES } from "../store/testing.ts";
import type { Store } from "../store/types.ts";
import {
  DEMO_CHANNEL_CONVERSATION_ID,
  DEMO_CHANNEL_ID,
  DEMO_NOTEBOOK_CONVERSATION_ID,
  seedDemoConversations,
} from "./conversations.ts";

const SEEDED = [DEMO_CHANNEL_CONVERSATION_ID, DEMO_NOTEBOOK_CONVERSATION_ID];

async function turnsOf(store: Store, id: string): Promise<{ turnCount: number; messages: string[] }> {
  return {
    turnCount: (await store.getConversation(id))?.turnCount ?? -1,
    messages: (await store.listMessages(id)).map((m) => `${m.role}: ${m.text}`),
  };
}

describe.each(STORE_ENGINES)("seedDemoConversations on $name", (engine) => {
  let opened: OpenedStore;

  beforeEach(async (context) => {
    if (engine.skip) context.skip(engine.skip);
    opened = await engine.open();
  });

  afterEach(async () => {
    await opened?.destroy();
  });

  it("writes each conversation with its one turn, once however often it runs", async () => {
    await seedDemoConversations(opened.store);
    await seedDemoConversations(opened.store);
    for (const id of SEEDED) {
      const { turnCount, messages } = await turnsOf(opened.store, id);
      expect(turnCount, id).toBe(1);
      expect(messages, id).toHaveLength(2);
    }
  });

  it("finishes a seeding cut short after the conversation's row was written", async () => {
    // What an instance that died between the row and its turn leaves behind.
    await opened.store.insertConversation(
      newConversation({
        id: DEMO_CHANNEL_CONVERSATION_ID,
        workspaceId: "demo",
        agent: "demo-agent",
        ownerMemberId: null,
        channel: "SLACK",
        channelId: DEMO_CHANNEL_ID,
        notebookPath: null,
        title: "Is the deploy done?",
        createdAt: new Date().toISOString(),
      }),
    );
    await seedDemoConversations(opened.store);
    expect(await turnsOf(opened.store, DEMO_CHANNEL_CONVERSATION_ID)).toEqual({
      turnCount: 1,
      messages: ["user: Is the deploy done?", "assistant: Yes: the last deploy finished without errors."],
    });
  });

  // Only where several instances share the store: a SQLite database serves one process, nothing to race.
  if (engine.name !== "postgres") return;
  it("seeds once when several instances sharing the store start at once", async () => {
    const others = await Promise.all([1, 2, 3].map(() => openPostgresStore(opened.location)));
    try {
      await Promise.all([opened.store, ...others].map((store) => seedDemoConversations(store)));
      for (const id of SEEDED) {
        const { turnCount, messages } = await turnsOf(opened.store, id);
        expect(turnCount, id).toBe(1);
        expect(messages, id).toHaveLength(2);
      }
    } finally {
      await Promise.all(others.map((store) => store.close()));
    }
  });
});
