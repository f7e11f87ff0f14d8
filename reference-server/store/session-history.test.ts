/**
 * A session's history is stored one row per message and a turn writes only what it added (issue 13), on a
 * real SQLite file. Triggers installed through a second connection count every write to the rows, so a
 * turn that rewrote the history would show up in the counts, not only in timings.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openSqliteStore } from "./sqlite/index.ts";
import { migrate } from "./sqlite/migrations.ts";
import { conversationRecord } from "./testing.ts";
import type { SessionHistory, Store, TurnWrite } from "./types.ts";

let dir: string;
let file: string;
let store: Store;
let spy: DatabaseSync;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "store-history-"));
  file = join(dir, "agent-api.sqlite");
});

afterEach(async () => {
  if (spy?.isOpen) spy.close();
  store?.close();
  rmSync(dir, { recursive: true, force: true });
});

const conversation = (id: string) => conversationRecord({ id, title: "Long" });

const user = (text: string) => ({ role: "user", content: [{ type: "text", text }] });
const assistant = (text: string) => ({ role: "assistant", content: [{ type: "text", text }] });

function turnWrite(id: string, turnIndex: number, session: TurnWrite["session"]): TurnWrite {
  return {
    conversationId: id,
    turnIndex,
    messages: [
      {
        role: "user",
        text: `q${turnIndex}`,
        authorMemberId: "alice",
        authorName: "Alice",
        isCompactSummary: false,
      },
    ],
    events: [],
    compaction: null,
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, turnIndex)).toISOString(),
    session,
  };
}

/** Counts of row writes to session_messages, and of rewrites of the sessions row's context, so far. */
function installCounters(
  db: DatabaseSync,
): () => { inserts: number; deletes: number; updates: number; contextWrites: number } {
  db.exec(`
    CREATE TABLE IF NOT EXISTS write_counts (what TEXT PRIMARY KEY, n INTEGER NOT NULL);
    INSERT OR IGNORE INTO write_counts VALUES ('inserts', 0), ('deletes', 0), ('updates', 0), ('contextWrites', 0);
    CREATE TRIGGER count_inserts AFTER INSERT ON session_messages BEGIN UPDATE write_counts SET n = n + 1 WHERE what = 'inserts'; END;
    CREATE TRIGGER count_deletes AFTER DELETE ON session_messages BEGIN UPDATE write_counts SET n = n + 1 WHERE what = 'deletes'; END;
    CREATE TRIGGER count_updates AFTER UPDATE ON session_messages BEGIN UPDATE write_counts SET n = n + 1 WHERE what = 'updates'; END;
    CREATE TRIGGER count_context AFTER UPDATE OF context ON sessions WHEN new.context <> 'null'
      BEGIN UPDATE write_counts SET n = n + 1 WHERE what = 'contextWrites'; END;
  `);
  return () =>
    Object.fromEntries(
      (db.prepare("SELECT what, n FROM write_counts").all() as Array<{ what: string; n: number }>).map(
        (r) => [r.what, r.n],
      ),
    ) as { inserts: number; deletes: number; updates: number; contextWrites: number };
}

async function history(store: Store, id: string): Promise<SessionHistory> {
  return (await store.getSession(id))?.context as SessionHistory;
}

describe("session history", () => {
  it("a turn inserts only its own messages; turn 300 writes what turn 1 wrote", async () => {
    store = openSqliteStore(file);
    spy = new DatabaseSync(file);
    const counts = installCounters(spy);
    await store.insertConversation(conversation("c1"));
    const messages: unknown[] = [user("q0"), assistant("a0")];
    await store.commitTurn(turnWrite("c1", 0, undefined));
    await store.recordSession({
      id: "s1",
      conversationId: "c1",
      context: { messages: [...messages], tokens: 10 },
      createdAt: "t",
      updatedAt: "t",
    });
    expect(counts().inserts).toBe(2);
    for (let turn = 1; turn <= 300; turn++) {
      const before = counts();
      const kept = messages.length;
      messages.push(user(`q${turn}`), assistant(`a${turn}`));
      await store.commitTurn(
        turnWrite("c1", turn, {
          append: { id: "s1", history: { messages: [...messages], tokens: 10 + turn }, kept },
        }),
      );
      const after = counts();
      expect({
        inserts: after.inserts - before.inserts,
        deletes: after.deletes - before.deletes,
        updates: after.updates - before.updates,
      }).toEqual({ inserts: 2, deletes: 0, updates: 0 });
    }
    expect(counts().contextWrites).toBe(0);
    expect(await history(store, "s1")).toEqual({ messages, tokens: 310 });
    // A restart reads the same history back.
    await store.close();
    store = openSqliteStore(file);
    expect(await history(store, "s1")).toEqual({ messages, tokens: 310 });
  });

  it("a prompt joined to a trailing user message replaces that one row; a compaction replaces the rest (rows written, counted)", async () => {
    store = openSqliteStore(file);
    spy = new DatabaseSync(file);
    const counts = installCounters(spy);
    await store.insertConversation(conversation("c1"));
    await store.commitTurn(turnWrite("c1", 0, undefined));
    const start = [user("q0"), assistant("a0"), user("tool results")];
    await store.recordSession({
      id: "s1",
      conversationId: "c1",
      context: { messages: start, tokens: 5 },
      createdAt: "t",
      updatedAt: "t",
      turnIndex: 0,
    });
    const joined = [
      user("q0"),
      assistant("a0"),
      {
        role: "user",
        content: [
          { type: "text", text: "tool results" },
          { type: "text", text: "q1" },
        ],
      },
      assistant("a1"),
    ];
    let before = counts();
    await store.commitTurn(
      turnWrite("c1", 1, { append: { id: "s1", history: { messages: joined, tokens: 6 }, kept: 2 } }),
    );
    expect(counts().inserts - before.inserts).toBe(2);
    expect(counts().updates - before.updates).toBe(1);
    expect(await history(store, "s1")).toEqual({ messages: joined, tokens: 6 });

    const compacted = [user("summary\nq2"), assistant("a2")];
    before = counts();
    await store.commitTurn(
      turnWrite("c1", 2, { append: { id: "s1", history: { messages: compacted, tokens: 2 }, kept: 0 } }),
    );
    expect(counts().updates - before.updates).toBe(4);
    expect(counts().deletes).toBe(0);
    expect(await history(store, "s1")).toEqual({ messages: compacted, tokens: 2 });
    const next = [...compacted, user("q3"), assistant("a3")];
    await store.commitTurn(
      turnWrite("c1", 3, { append: { id: "s1", history: { messages: next, tokens: 4 }, kept: 2 } }),
    );

    // How a fork reads these rows as they stood after any turn: store.test.ts, on both engines.
  });

  it("deleting the conversation removes its session's rows", async () => {
    store = openSqliteStore(file);
    for (const id of ["gone", "kept"]) {
      await store.insertConversation(conversation(id));
      await store.recordSession({
        id: `s-${id}`,
        conversationId: id,
        context: { messages: [user("x"), assistant("y")], tokens: 1 },
        createdAt: "t",
        updatedAt: "t",
      });
    }
    await store.deleteConversation("gone");
    const db = new DatabaseSync(file);
    try {
      expect(
        db.prepare("SELECT session_id, COUNT(*) AS n FROM session_messages GROUP BY session_id").all(),
      ).toEqual([{ session_id: "s-kept", n: 2 }]);
    } finally {
      db.close();
    }
  });

  it("a database an earlier version wrote keeps its sessions; their next turn moves them into rows once", async () => {
    // Schema 4, as the previous version left it: the whole history in sessions.context.
    const old = new DatabaseSync(file);
    migrate(old, 4);
    const earlier = [user("Remember this code word: kiwi."), assistant("OK")];
    old
      .prepare(
        `INSERT INTO conversations (id, workspace_id, agent, owner_member_id, channel, title, created_at, updated_at, turn_count, agent_session_id)
       VALUES ('c1', 'demo', 'demo-agent', 'alice', 'INTERACTIVE', 'Old', 't', 't', 1, 's-old')`,
      )
      .run();
    old
      .prepare(
        "INSERT INTO sessions (id, conversation_id, context, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
      )
      .run("s-old", "c1", JSON.stringify({ messages: earlier, tokens: 12 }), "t", "t");
    // A fork's session, in the text-entry form.
    old
      .prepare(
        "INSERT INTO sessions (id, conversation_id, context, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
      )
      .run("s-fork", "c1", JSON.stringify([{ role: "user", text: "hi" }]), "t", "t");
    await old.close();

    store = openSqliteStore(file);
    expect(await history(store, "s-old")).toEqual({ messages: earlier, tokens: 12 });
    expect((await store.getSession("s-fork"))?.context).toEqual([{ role: "user", text: "hi" }]);
    spy = new DatabaseSync(file);
    const counts = installCounters(spy);
    const next = [...earlier, user("q1"), assistant("a1")];
    await store.commitTurn(
      turnWrite("c1", 1, { append: { id: "s-old", history: { messages: next, tokens: 20 }, kept: 2 } }),
    );
    // Written whole, once: the rows did not exist yet.
    expect(counts().inserts).toBe(4);
    expect(await history(store, "s-old")).toEqual({ messages: next, tokens: 20 });
    const last = [...next, user("q2"), assistant("a2")];
    await store.commitTurn(
      turnWrite("c1", 2, { append: { id: "s-old", history: { messages: last, tokens: 28 }, kept: 4 } }),
    );
    expect(counts().inserts).toBe(6);
    expect(await history(store, "s-old")).toEqual({ messages: last, tokens: 28 });
  });

  it("a turn whose write fails leaves the history as it was, in memory as on disk", async () => {
    store = openSqliteStore(file);
    await store.insertConversation(conversation("c1"));
    const start = [user("q0"), assistant("a0")];
    await store.recordSession({
      id: "s1",
      conversationId: "c1",
      context: { messages: start, tokens: 1 },
      createdAt: "t",
      updatedAt: "t",
    });
    expect(await history(store, "s1")).toEqual({ messages: start, tokens: 1 });
    // The second new message cannot be serialised: the first one was already inserted when it throws.
    const broken = [...start, user("q1"), { role: "assistant", content: [{ type: "text", text: 1n }] }];
    await expect(
      store.commitTurn(
        turnWrite("c1", 1, { append: { id: "s1", history: { messages: broken, tokens: 2 }, kept: 2 } }),
      ),
    ).rejects.toThrow();
    expect(await history(store, "s1")).toEqual({ messages: start, tokens: 1 });
    const good = [...start, user("q1"), assistant("a1")];
    await store.commitTurn(
      turnWrite("c1", 1, { append: { id: "s1", history: { messages: good, tokens: 2 }, kept: 2 } }),
    );
    expect(await history(store, "s1")).toEqual({ messages: good, tokens: 2 });
    const other = openSqliteStore(file);
    try {
      expect(await history(other, "s1")).toEqual({ messages: good, tokens: 2 });
    } finally {
      await other.close();
    }
  });

  it("with the cache off, the same histories are read from the rows", async () => {
    store = openSqliteStore(file, { historyCacheChars: 0 });
    await store.insertConversation(conversation("c1"));
    const messages: unknown[] = [user("q0"), assistant("a0")];
    await store.recordSession({
      id: "s1",
      conversationId: "c1",
      context: { messages: [...messages], tokens: 1 },
      createdAt: "t",
      updatedAt: "t",
    });
    for (let turn = 1; turn <= 5; turn++) {
      const kept = messages.length;
      messages.push(user(`q${turn}`), assistant(`a${turn}`));
      await store.commitTurn(
        turnWrite("c1", turn, {
          append: { id: "s1", history: { messages: [...messages], tokens: turn }, kept },
        }),
      );
      expect(await history(store, "s1")).toEqual({ messages, tokens: turn });
    }
  });
});
