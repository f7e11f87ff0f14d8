/**
 * What a turn does inside its sandbox, over real HTTP: files written in one turn are there in the next,
 * storage agents' own files are restored fresh, `stream_tool_calls`, thinking blocks, attachments (caps,
 * malformed entries, sanitised names), `isolated`, and `read_only` on the repository-backed agent (a real
 * local bare repository). Tools need a sandbox: without bubblewrap these tests are skipped, with the reason.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import {
  AgentApiError,
  type SendMessageRequest,
  StreamErrorEventError,
  type TurnEvent,
} from "@agent-api/client";
import type { components } from "@agent-api/client/api-types";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import { KEYS, PHRASES, runTurn, sleep, startTestServer, type TestServer } from "./helpers.ts";

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
});

const b64 = (text: string) => Buffer.from(text).toString("base64");
const blockTypes = (events: TurnEvent[]) =>
  events.flatMap((e) => (e.type === "content_block_start" ? [e.content_block.type] : []));

async function statusOf(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
    return 200;
  } catch (error) {
    if (error instanceof AgentApiError) return error.status;
    throw error;
  }
}

describe("the events of a turn", () => {
  it("a thinking block (with its signature) comes first, then the text; blocks are whole with a running index", async () => {
    const turn = await runTurn(t.client(), `${PHRASES.think} Then say something.`);
    const shape = turn.events.map((e) =>
      e.type === "content_block_delta"
        ? `${e.type}:${e.delta.type}#${e.index}`
        : "index" in e
          ? `${e.type}#${e.index}`
          : e.type,
    );
    expect(shape).toEqual([
      "message_start",
      "content_block_start#0",
      "content_block_delta:thinking_delta#0",
      "content_block_delta:signature_delta#0",
      "content_block_stop#0",
      "content_block_start#1",
      "content_block_delta:text_delta#1",
      "content_block_stop#1",
      "message_delta",
      "message_stop",
    ]);
    const start = turn.events[1];
    expect(start.type === "content_block_start" && start.content_block).toEqual({
      type: "thinking",
      thinking: "",
    });
    const delta = turn.events.at(-2);
    if (delta?.type !== "message_delta") throw new Error("no message_delta");
    expect(delta.usage.output_tokens).toBeGreaterThan(0);
    expect(delta.usage.total_cost_usd).toBeGreaterThan(0);
  });
});

describe("tools and files", () => {
  it("files the agent wrote are there in the next turn; tool blocks stream only with stream_tool_calls", {
    tags: ["sandbox"],
  }, async () => {
    const alice = t.client();
    const write = await runTurn(
      alice,
      "Use your tools to create a file named notes.txt containing kept-value.",
    );
    expect(write.text).toBe("Created notes.txt.");
    expect(blockTypes(write.events)).toEqual(["text"]);
    // The tool call is always in the raw events of the transcript.
    const transcript = await alice.getTranscript(write.conversationId);
    expect(transcript.events.map((e) => (e as { type?: string }).type)).toEqual([
      "tool_use",
      "tool_result",
      "text",
    ]);

    const read = await runTurn(
      alice,
      "Use your tools to read the file named notes.txt and reply with its contents.",
      {
        conversation_id: write.conversationId,
        stream_tool_calls: true,
      },
    );
    expect(read.text).toBe("kept-value");
    expect(blockTypes(read.events)).toEqual(["tool_use", "tool_result", "text"]);
    const toolUse = read.events.find(
      (e) => e.type === "content_block_start" && e.content_block.type === "tool_use",
    );
    const inputDelta = read.events.find(
      (e) => e.type === "content_block_delta" && e.delta.type === "input_json_delta",
    );
    expect(toolUse && toolUse.type === "content_block_start" && toolUse.content_block).toMatchObject({
      type: "tool_use",
      name: "read_file",
    });
    expect(
      inputDelta?.type === "content_block_delta" && inputDelta.delta.type === "input_json_delta"
        ? JSON.parse(inputDelta.delta.partial_json)
        : null,
    ).toEqual({ path: "notes.txt" });

    // isolated: a throwaway sandbox with none of the conversation's files.
    const isolated = await runTurn(alice, "Use your tools to list your files.", {
      conversation_id: write.conversationId,
      isolated: true,
    });
    expect(isolated.text).not.toContain("notes.txt");
    // ... and the conversation's own directory is untouched by it.
    const again = await runTurn(
      alice,
      "Use your tools to read the file named notes.txt and reply with its contents.",
      {
        conversation_id: write.conversationId,
      },
    );
    expect(again.text).toBe("kept-value");
    // A fork gets the parent's files.
    const fork = await alice.fork(write.conversationId);
    const inFork = await runTurn(
      alice,
      "Use your tools to read the file named notes.txt and reply with its contents.",
      {
        conversation_id: fork.conversation_id,
      },
    );
    expect(inFork.text).toBe("kept-value");
  });

  it("a storage-backed agent's own files are restored fresh every turn", { tags: ["sandbox"] }, async () => {
    const notes = t.client(KEYS.admin, "notes-agent");
    const first = await runTurn(
      notes,
      "Use your tools to read the file named README.md and reply with its contents.",
    );
    expect(first.text).toContain("NOTES-FILE-PRESENT");
    const overwrite = await runTurn(
      notes,
      "Use your tools to create a file named README.md containing overwritten.",
      {
        conversation_id: first.conversationId,
      },
    );
    expect(overwrite.text).toBe("Created README.md.");
    const next = await runTurn(
      notes,
      "Use your tools to read the file named README.md and reply with its contents.",
      {
        conversation_id: first.conversationId,
      },
    );
    expect(next.text).toContain("NOTES-FILE-PRESENT");
  });
});

describe("delete while a turn runs", () => {
  // The API does not say what a delete does to a running turn; either it waits for the turn or the turn
  // ends with an error event. What must hold: the stream ends properly, the delete wins, the id starts clean.
  it("the running stream ends properly, the conversation is gone afterwards, and the id starts clean", {
    tags: ["sandbox"],
  }, async () => {
    const alice = t.client();
    const id = "deleted-mid-turn";
    const running = await alice.sendMessage({
      messages: [
        { role: "user", content: "Use your tools to run the shell command: sleep 0.4; echo late > late.txt" },
      ],
      metadata: { conversation_id: id },
    });
    expect(running.response.status).toBe(200);
    const ending = (async () => {
      let last = "";
      try {
        for await (const event of running) last = event.type;
        return last;
      } catch (error) {
        if (error instanceof StreamErrorEventError) return "error";
        throw error;
      }
    })();
    await sleep(100);
    await alice.deleteConversation(id);
    expect(["message_stop", "error"]).toContain(await ending);
    expect(await statusOf(alice.getConversation(id))).toBe(404);
    const fresh = await runTurn(alice, "Use your tools to list your files.", { conversation_id: id });
    expect(fresh.text).not.toContain("late.txt");
    expect((await alice.getTranscript(id)).conversation.turn_count).toBe(1);
  });
});

type Attachment = components["schemas"]["Attachment"];

describe("attachments", () => {
  it("are typed as Attachment in the generated request types (the tolerated other shapes are not)", () => {
    type Items = NonNullable<NonNullable<SendMessageRequest["metadata"]>["attachments"]>[number];
    expectTypeOf<Items>().toEqualTypeOf<Attachment>();
    expectTypeOf<Attachment>().toEqualTypeOf<{ name: string; mediaType: string; dataBase64: string }>();
  });

  it("are written to .uploads/ with safe, de-duplicated names; malformed entries are dropped silently", {
    tags: ["sandbox"],
  }, async () => {
    const turn = await runTurn(
      t.client(),
      "List the attached files. Use your tools to read the attached file a.txt and reply with its contents.",
      {
        attachments: [
          { name: "a.txt", mediaType: "text/plain", dataBase64: b64("first A") },
          { name: "a.txt", mediaType: "text/plain", dataBase64: b64("second A") },
          { name: "../../etc/passwd", mediaType: "text/plain", dataBase64: b64("not a password file") },
          { name: "prefixed.txt", mediaType: "text/plain", dataBase64: `data:text/plain;base64,${b64("x")}` },
          // Shapes the generated types refuse (items are Attachment) but the server must tolerate.
          ...([
            { name: "no-data.txt", mediaType: "text/plain" },
            "not an object",
            42,
          ] as unknown as Attachment[]),
        ],
      },
    );
    expect(turn.status).toBe(200);
    expect(turn.text).toBe("Attached files: .uploads/a.txt, .uploads/a (1).txt, .uploads/passwd\n\nfirst A");
  });

  it("at most 10 files and 10 MiB decoded per turn; the rest is dropped silently", async () => {
    const alice = t.client();
    const many = await runTurn(alice, "List the attached files.", {
      attachments: Array.from({ length: 12 }, (_, i) => ({
        name: `f${String(i).padStart(2, "0")}.txt`,
        mediaType: "text/plain",
        dataBase64: b64(`file ${i}`),
      })),
    });
    expect(many.text).toBe(
      `Attached files: ${Array.from({ length: 10 }, (_, i) => `.uploads/f${String(i).padStart(2, "0")}.txt`).join(", ")}`,
    );
    const sixMiB = Buffer.alloc(6 * 1024 * 1024, 1).toString("base64");
    const big = await runTurn(alice, "List the attached files.", {
      attachments: [
        { name: "one.bin", mediaType: "application/octet-stream", dataBase64: sixMiB },
        { name: "two.bin", mediaType: "application/octet-stream", dataBase64: sixMiB },
      ],
    });
    expect(big.text).toBe("Attached files: .uploads/one.bin");
    // Attachments are per turn: the next turn has none.
    const next = await runTurn(alice, "List the attached files.", { conversation_id: big.conversationId });
    expect(next.text).toBe("No files were attached.");
  });
});

describe("read_only on a repository-backed agent", () => {
  const git = (...args: string[]) =>
    execFileSync("git", ["--git-dir", join(t.dataDir, "demo", "acme-widgets.git"), ...args], {
      encoding: "utf8",
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
    }).trim();

  it("API-key turns never push by default; read_only false commits and pushes to the default branch, without attachments", {
    tags: ["sandbox"],
  }, async () => {
    const repo = t.client(KEYS.admin, "acme-widgets");
    const before = git("rev-parse", "refs/heads/main");
    const readOnly = await runTurn(
      repo,
      "Use your tools to create a file named read-only.txt containing nope.",
    );
    expect(readOnly.text).toBe("Created read-only.txt.");
    expect(git("rev-parse", "refs/heads/main")).toBe(before);

    const writable = await runTurn(repo, "Use your tools to create a file named pushed.txt containing yes.", {
      read_only: false,
      attachments: [{ name: "private.txt", mediaType: "text/plain", dataBase64: b64("never committed") }],
    });
    expect(writable.text).toBe("Created pushed.txt.");
    const after = git("rev-parse", "refs/heads/main");
    expect(after).not.toBe(before);
    expect(git("rev-parse", `${after}^`)).toBe(before);
    expect(git("show", `${after}:pushed.txt`)).toBe("yes");
    const files = git("ls-tree", "-r", "--name-only", after).split("\n");
    expect(files).not.toContain("read-only.txt");
    expect(files.some((f) => f.includes("private.txt") || f.startsWith(".uploads"))).toBe(false);
    // The same fixed agent identity on every push (not the caller's).
    const author = git("log", "-1", "--format=%an <%ae>", after);
    expect(author).not.toContain("alice");
    expect(author).toMatch(/<.+@.+>/);
    // No scratch branch: main is the only branch.
    expect(git("for-each-ref", "--format=%(refname)", "refs/heads")).toBe("refs/heads/main");

    // A read_only false turn that changes nothing pushes nothing.
    const unchanged = await runTurn(repo, "Just talk.", { read_only: false });
    expect(unchanged.text).toBe("You said: Just talk.");
    expect(git("rev-parse", "refs/heads/main")).toBe(after);
  });
});
