import { createHash } from "node:crypto";
/**
 * The sandbox end to end, through the reference server over real HTTP (demo workspace, scripted engine):
 * files that persist between turns (warm, after reclaim, after a restart), storage agents (files restored
 * fresh, outputs/ published), `isolated: true`, and repository agents with `read_only` true and false
 * (commit + push to the default branch of the demo's bare repository). Nothing is mocked.
 */
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Attachment,
  bareGit,
  base64,
  onlyToolResult,
  onlyToolResultOf,
  PHRASES,
  removeDir,
  type SandboxServer,
  sleep,
  startSandboxServer,
  toolResults,
  toolsCalled,
} from "../test/sandbox-server.ts";

const started: SandboxServer[] = [];
async function server(options: Parameters<typeof startSandboxServer>[0] = {}): Promise<SandboxServer> {
  const s = await startSandboxServer(options);
  started.push(s);
  return s;
}
afterAll(async () => {
  for (const s of started) await s.close().catch(() => undefined);
  for (const dir of new Set(started.map((s) => s.dataDir))) await removeDir(dir);
});

let main: SandboxServer;
beforeAll(async () => {
  main = await server();
});

/** Published outputs live in the store under their conversation (one cannot overwrite another's). */
const storePath = (s: SandboxServer, agent: string, conversationId: string, ...rel: string[]) =>
  path.join(
    s.dataDir,
    "sandboxes",
    "workspace-store",
    "demo",
    agent,
    createHash("sha256").update(conversationId).digest("hex"),
    ...rel,
  );
const mainHead = (s: SandboxServer) => bareGit(s.bareRepo, "rev-parse", "refs/heads/main").trim();

describe("a conversation's files persist between turns", () => {
  it("warm: turn 1 writes a file, turn 2 reads it; tools are streamed on request and always in the transcript", async () => {
    const id = "persist-warm";
    const first = await main.turn("demo-agent", PHRASES.write("memo.txt", "kiwi-41"), {
      conversation_id: id,
    });
    expect(first.eventNames.at(-1)).toBe("message_stop");
    const [use, result, text] = first.blocks;
    expect(use).toMatchObject({
      type: "tool_use",
      name: "write_file",
      input: { path: "memo.txt", content: "kiwi-41" },
    });
    expect(result).toMatchObject({ type: "tool_result", is_error: false });
    expect(result.type === "tool_result" && use.type === "tool_use" && result.tool_use_id === use.id).toBe(
      true,
    );
    expect(text).toEqual({ type: "text", text: "Created memo.txt." });

    // Without stream_tool_calls the stream has only the answer, but the transcript still records the tools.
    const second = await main.turn("demo-agent", PHRASES.read("memo.txt"), {
      conversation_id: id,
      stream_tool_calls: false,
    });
    expect(second.blocks).toEqual([{ type: "text", text: "kiwi-41" }]);
    const { events } = await main.transcript("demo-agent", id);
    const turn2 = events.filter((e) => e.turn_index === 1);
    expect(turn2.map((e) => e.type)).toEqual(["tool_use", "tool_result", "text"]);
    expect(turn2[0]).toMatchObject({ name: "read_file", input: { path: "memo.txt" } });
    expect(turn2[1]).toMatchObject({ tool_use_id: turn2[0].id, content: "kiwi-41", is_error: false });
    expect(events.filter((e) => e.turn_index === 0).map((e) => e.type)).toEqual([
      "tool_use",
      "tool_result",
      "text",
    ]);
  });

  it("after the warm sandbox was reclaimed and on a restarted server with the same data directory", async () => {
    const fast = await server({ sandboxIdleMs: 10 });
    const written = [
      ["demo-agent", "reclaim-storage", "storage-value"],
      ["notes-agent", "reclaim-notes", "notes-value"],
      ["acme-widgets", "reclaim-repo", "repo-value"],
    ] as const;
    for (const [agent, id, value] of written) {
      const out = onlyToolResult(
        await fast.turn(agent, PHRASES.write("kept/data.txt", value), { conversation_id: id }),
      );
      expect(out.is_error).toBe(false);
    }
    await sleep(200); // well past sandboxIdleMs: every warm sandbox has been reclaimed
    for (const [agent, id, value] of written) {
      const reply = await fast.turn(agent, PHRASES.read("kept/data.txt"), { conversation_id: id });
      expect(onlyToolResult(reply)).toMatchObject({ content: value, is_error: false });
    }
    await fast.close();

    const restarted = await server({ dataDir: fast.dataDir, sandboxIdleMs: 10 });
    for (const [agent, id, value] of written) {
      const reply = await restarted.turn(agent, PHRASES.read("kept/data.txt"), { conversation_id: id });
      expect(onlyToolResult(reply)).toMatchObject({ content: value, is_error: false });
    }
    // The read-only repo turns committed nothing: the file is the conversation's, not the repository's.
    expect(bareGit(restarted.bareRepo, "ls-tree", "-r", "--name-only", "main").trim().split("\n")).toEqual([
      "README.md",
      "widgets.txt",
    ]);
  });

  it("reclaim is real: a cold turn re-reads the remote's default branch, a warm one keeps what it knew", async () => {
    // Same steps on a server that reclaims at once and one that keeps the sandbox warm: the only
    // difference is whether the turn after the pause is cold, and the push target shows which it was.
    const fast = await server({ sandboxIdleMs: 10 });
    const slow = await server({ sandboxIdleMs: 60_000 });
    for (const s of [fast, slow]) {
      const id = "default-branch";
      await s.turn("acme-widgets", PHRASES.write("one.txt", "1"), { conversation_id: id, read_only: false });
      bareGit(s.bareRepo, "update-ref", "refs/heads/trunk", "refs/heads/main");
      bareGit(s.bareRepo, "symbolic-ref", "HEAD", "refs/heads/trunk");
      await sleep(200);
      await s.turn("acme-widgets", PHRASES.write("two.txt", "2"), { conversation_id: id, read_only: false });
    }
    const files = (s: SandboxServer, branch: string) =>
      bareGit(s.bareRepo, "ls-tree", "-r", "--name-only", branch).trim().split("\n");
    expect(files(fast, "trunk")).toContain("two.txt");
    expect(files(fast, "main")).not.toContain("two.txt");
    expect(files(slow, "main")).toContain("two.txt");
    expect(files(slow, "trunk")).not.toContain("two.txt");
  });
});

describe("storage-backed agent (notes-agent)", () => {
  it("restores its files fresh every turn, never writes them back, and publishes outputs/ to the workspace store", async () => {
    const filesReadme = path.join(main.dataDir, "demo", "notes-files", "README.md");
    const original = await readFile(filesReadme, "utf8");
    expect(original).toContain("NOTES-FILE-PRESENT");

    const first = await main.turn(
      "notes-agent",
      [
        PHRASES.read("README.md"),
        PHRASES.write("README.md", "overwritten-by-turn-1"),
        PHRASES.write("outputs/report.txt", "report-1"),
        PHRASES.write("scratch.txt", "mine"),
      ].join("\n"),
      { conversation_id: "notes-1" },
    );
    const results = toolResults(first);
    expect(results.map((r) => r.is_error)).toEqual([false, false, false, false]);
    expect(results[0].content).toBe(original);
    expect(await readFile(storePath(main, "notes-agent", "notes-1", "report.txt"), "utf8")).toBe("report-1");
    expect(await readFile(filesReadme, "utf8")).toBe(original);

    const second = await main.turn(
      "notes-agent",
      [
        PHRASES.read("README.md"),
        PHRASES.list(),
        PHRASES.read("scratch.txt"),
        PHRASES.write("outputs/report.txt", "report-2"),
      ].join("\n"),
      { conversation_id: "notes-1" },
    );
    const [readme, listing, scratch, publish] = toolResults(second);
    expect(readme.content).toBe(original); // turn 1's change is gone
    expect(listing.content.split("\n").sort()).toEqual(["README.md", "outputs/", "scratch.txt"]); // outputs/ starts empty
    expect(scratch).toMatchObject({ content: "mine", is_error: false }); // the conversation's own file stays
    expect(publish.is_error).toBe(false);
    expect(await readFile(storePath(main, "notes-agent", "notes-1", "report.txt"), "utf8")).toBe("report-2");

    // Another conversation publishes beside it, never over it, even at the same path; a turn publishing
    // nothing removes nothing.
    await main.turn("notes-agent", PHRASES.write("outputs/report.txt", "other"), {
      conversation_id: "notes-2",
    });
    await main.turn("notes-agent", PHRASES.write("outputs/sub/other.txt", "other"), {
      conversation_id: "notes-2",
    });
    await main.turn("notes-agent", PHRASES.read("README.md"), { conversation_id: "notes-2" });
    expect(await readFile(storePath(main, "notes-agent", "notes-1", "report.txt"), "utf8")).toBe("report-2");
    expect((await readdir(storePath(main, "notes-agent", "notes-2"), { recursive: true })).sort()).toEqual([
      "report.txt",
      "sub",
      "sub/other.txt",
    ]);
    expect(await readFile(filesReadme, "utf8")).toBe(original);
  });
});

describe("isolated: true", () => {
  // Its working directory is /workspace only inside bubblewrap.
  it("runs in a throwaway sandbox with no workspace files, leaving the conversation's own sandbox untouched", {
    tags: ["sandbox"],
  }, async () => {
    const id = "isolated-1";
    await main.turn("notes-agent", PHRASES.write("keep.txt", "kept"), { conversation_id: id });

    const isolated = await main.turn(
      "notes-agent",
      [
        PHRASES.list(),
        PHRASES.read("keep.txt"),
        PHRASES.write("scratch.txt", "throwaway"),
        PHRASES.write("outputs/iso.txt", "never-published"),
        PHRASES.run("pwd"),
      ].join("\n"),
      { conversation_id: id, isolated: true },
    );
    const [listing, keep, scratch, output, pwd] = toolResults(isolated);
    expect(listing).toMatchObject({ content: "(empty)", is_error: false }); // no README.md, no keep.txt
    expect(keep.is_error).toBe(true);
    expect(scratch.is_error).toBe(false);
    expect(output.is_error).toBe(false);
    expect(pwd.content).toBe("/workspace\n");
    // Discarded after the turn, and nothing published.
    expect(
      (await readdir(path.join(main.dataDir, "sandboxes", "tmp"))).filter((n) => n.startsWith("isolated-")),
    ).toEqual([]);
    await expect(readFile(storePath(main, "notes-agent", id, "iso.txt"))).rejects.toThrow();

    const after = await main.turn(
      "notes-agent",
      [PHRASES.read("keep.txt"), PHRASES.read("scratch.txt")].join("\n"),
      {
        conversation_id: id,
      },
    );
    const [kept, gone] = toolResults(after);
    expect(kept).toMatchObject({ content: "kept", is_error: false });
    expect(gone.is_error).toBe(true);
  });

  it("gets no repository clone and never pushes, even with read_only false; attachments still arrive", async () => {
    const before = mainHead(main);
    const reply = await main.turn(
      "acme-widgets",
      [PHRASES.list(), PHRASES.attachments(), PHRASES.write("iso.txt", "x")].join("\n"),
      {
        conversation_id: "isolated-repo",
        isolated: true,
        read_only: false,
        attachments: [{ name: "a.txt", mediaType: "text/plain", dataBase64: base64("attached") }],
      },
    );
    const [listing, write] = toolResults(reply);
    expect(listing.content).toBe(".uploads/\n.uploads/a.txt");
    expect(write.is_error).toBe(false);
    expect(reply.text).toContain("Attached files: .uploads/a.txt");
    expect(mainHead(main)).toBe(before);
    const { events } = await main.transcript("acme-widgets", "isolated-repo");
    expect(events.filter((e) => e.type === "repo_push")).toEqual([]);
  });
});

describe("repository-backed agent (acme-widgets)", () => {
  it("read_only (default true, or true) never commits or pushes; the change stays in the conversation", async () => {
    const before = mainHead(main);
    for (const [id, metadata] of [
      ["ro-default", {}],
      ["ro-true", { read_only: true }],
    ] as const) {
      const write = await main.turn(
        "acme-widgets",
        [PHRASES.read("widgets.txt"), PHRASES.write("widgets.txt", "changed")].join("\n"),
        { conversation_id: id, ...metadata },
      );
      const [read, written] = toolResults(write);
      expect(read.content).toBe("sprocket\ngear\nflange\n"); // the clone is readable
      expect(written.is_error).toBe(false);
      expect(mainHead(main)).toBe(before);
      const again = await main.turn("acme-widgets", PHRASES.read("widgets.txt"), {
        conversation_id: id,
        ...metadata,
      });
      expect(onlyToolResult(again).content).toBe("changed");
      const { events } = await main.transcript("acme-widgets", id);
      expect(events.filter((e) => e.type === "repo_push")).toEqual([]);
    }
    expect(bareGit(main.bareRepo, "log", "--format=%s", "main").trim()).toBe("Initial commit");
  });

  it("read_only false: a changing turn commits as the agent and pushes to the default branch; a no-change turn pushes nothing; attachments are never committed", async () => {
    const s = await server(); // its own bare repository, so the log below is exactly this test's
    const id = "rw-1";
    const before = mainHead(s);
    const upload: Attachment = {
      name: "upload.txt",
      mediaType: "text/plain",
      dataBase64: base64("not for git"),
    };
    const changing = await s.turn("acme-widgets", PHRASES.write("docs/new.md", '"hello repo"'), {
      conversation_id: id,
      read_only: false,
      attachments: [upload],
    });
    expect(onlyToolResult(changing).is_error).toBe(false);
    const pushed = mainHead(s);
    expect(pushed).not.toBe(before);
    expect(bareGit(s.bareRepo, "log", "--format=%an <%ae> %cn <%ce> %s", "main").trim().split("\n")).toEqual([
      `Agent <agent@agent-api.local> Agent <agent@agent-api.local> agent turn on conversation ${id}`,
      "Reference Server Demo <demo@agent-api.invalid> Reference Server Demo <demo@agent-api.invalid> Initial commit",
    ]);
    expect(bareGit(s.bareRepo, "rev-parse", `${pushed}^`).trim()).toBe(before);
    expect(bareGit(s.bareRepo, "show", "main:docs/new.md")).toBe("hello repo");
    expect(bareGit(s.bareRepo, "ls-tree", "-r", "--name-only", "main").trim().split("\n")).toEqual([
      "README.md",
      "docs/new.md",
      "widgets.txt",
    ]);
    expect(bareGit(s.bareRepo, "for-each-ref", "--format=%(refname)").trim()).toBe("refs/heads/main");
    const transcript = await s.transcript("acme-widgets", id);
    expect(transcript.events.filter((e) => e.type === "repo_push")).toEqual([
      { turn_index: 0, type: "repo_push", commit: pushed },
    ]);

    // Reading, or only receiving an attachment, changes nothing: no commit, no push.
    const reading = await s.turn(
      "acme-widgets",
      [PHRASES.read("docs/new.md"), PHRASES.attachments()].join("\n"),
      { conversation_id: id, read_only: false, attachments: [upload] },
    );
    expect(toolsCalled(reading)).toEqual(["read_file", "list_files"]);
    expect(onlyToolResultOf(reading, "read_file").content).toBe("hello repo");
    expect(onlyToolResultOf(reading, "list_files").content).toBe("upload (1).txt\nupload.txt");
    expect(reading.text).toContain(".uploads/upload (1).txt");
    expect(mainHead(s)).toBe(pushed);

    // A second change is a second commit on the same branch, still without the attachments.
    await s.turn("acme-widgets", PHRASES.write("widgets.txt", "cog"), {
      conversation_id: id,
      read_only: false,
    });
    expect(bareGit(s.bareRepo, "rev-parse", "main^").trim()).toBe(pushed);
    expect(bareGit(s.bareRepo, "show", "main:widgets.txt")).toBe("cog");
    expect(bareGit(s.bareRepo, "log", "--format=%s", "--name-only", "main")).not.toContain(".uploads");
    const events = (await s.transcript("acme-widgets", id)).events.filter((e) => e.type === "repo_push");
    expect(events.map((e) => e.turn_index)).toEqual([0, 2]);
  });
});

describe("repository-backed agent: read-only changes left in the clone", () => {
  it("are not pushed by a read_only false turn that changes nothing itself", async () => {
    const s = await server();
    const id = "ro-then-rw";
    await s.turn("acme-widgets", PHRASES.write("left.txt", "from-read-only"), { conversation_id: id });
    const before = mainHead(s);
    const reading = await s.turn("acme-widgets", PHRASES.read("README.md"), {
      conversation_id: id,
      read_only: false,
    });
    expect(onlyToolResult(reading).is_error).toBe(false);
    expect(mainHead(s)).toBe(before);
  });

  it("go with the next read_only false turn that changes something ('stages all changes')", async () => {
    const s = await server();
    const id = "ro-then-rw-change";
    await s.turn("acme-widgets", PHRASES.write("left.txt", "from-read-only"), { conversation_id: id });
    await s.turn("acme-widgets", PHRASES.write("mine.txt", "from-writable"), {
      conversation_id: id,
      read_only: false,
    });
    expect(bareGit(s.bareRepo, "show", "main:mine.txt")).toBe("from-writable");
    expect(bareGit(s.bareRepo, "show", "main:left.txt")).toBe("from-read-only");
  });
});

describe("files a tool shaped to trap the server", () => {
  it("a FIFO is refused by read_file and write_file instead of hanging the turn", async () => {
    const id = "fifo-1";
    expect(
      onlyToolResult(
        await main.turn("demo-agent", PHRASES.run("mkfifo pipe && echo made"), { conversation_id: id }),
      ),
    ).toEqual({ type: "tool_result", tool_use_id: expect.any(String), content: "made\n", is_error: false });
    const started = performance.now();
    const read = await main.turn("demo-agent", PHRASES.read("pipe"), { conversation_id: id });
    expect(read.eventNames.at(-1)).toBe("message_stop");
    expect(onlyToolResult(read)).toMatchObject({
      is_error: true,
      content: expect.stringContaining("not a regular file"),
    });
    const write = await main.turn("demo-agent", PHRASES.write("pipe", "x"), { conversation_id: id });
    expect(onlyToolResult(write)).toMatchObject({
      is_error: true,
      content: expect.stringContaining("not a regular file"),
    });
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it("a conversation holding a FIFO can still be forked (the FIFO is not copied)", async () => {
    const id = "fifo-fork";
    await main.turn(
      "demo-agent",
      [PHRASES.write("a.txt", "fork-me"), PHRASES.run("mkfifo pipe")].join("\n"),
      {
        conversation_id: id,
      },
    );
    const response = await fetch(`${main.url}/api/agents/demo-agent/conversations/${id}/fork`, {
      method: "POST",
      headers: { "x-api-key": "demo-admin-key", "content-type": "application/json" },
      body: JSON.stringify({ conversation_id: "fifo-fork-child" }),
    });
    expect(response.status).toBe(200);
    const child = await main.turn("demo-agent", [PHRASES.read("a.txt"), PHRASES.run("ls")].join("\n"), {
      conversation_id: "fifo-fork-child",
    });
    const [a, ls] = toolResults(child);
    expect(a.content).toBe("fork-me");
    expect(ls.content).toBe("a.txt\noutputs\n");
  });

  it("a huge sparse file is read up to the output cap, not loaded whole", async () => {
    const id = "sparse-1";
    // 900 MiB: within the default 1 GiB disk quota (RLIMIT_FSIZE counts a sparse file's length).
    await main.turn("demo-agent", PHRASES.run("truncate -s 900M big.bin"), { conversation_id: id });
    const read = await main.turn("demo-agent", PHRASES.read("big.bin"), { conversation_id: id });
    const result = onlyToolResult(read);
    const cap = 64 * 1024;
    expect(result.is_error).toBe(false);
    expect(result.content).toBe(
      `${"\0".repeat(cap)}\n[output truncated: ${900 * 1024 ** 2 - cap} more bytes not shown]`,
    );
    await main.turn("demo-agent", PHRASES.run("rm big.bin"), { conversation_id: id });
  });

  it("git ignores a FIFO in the clone: a read-write turn still commits and pushes", async () => {
    const s = await server();
    const before = mainHead(s);
    const reply = await s.turn(
      "acme-widgets",
      [PHRASES.run("mkfifo pipe"), PHRASES.write("after-fifo.txt", "ok")].join("\n"),
      { conversation_id: "fifo-repo", read_only: false },
    );
    expect(reply.error).toBeUndefined();
    expect(mainHead(s)).not.toBe(before);
    expect(bareGit(s.bareRepo, "ls-tree", "-r", "--name-only", "main").trim().split("\n")).toEqual([
      "README.md",
      "after-fifo.txt",
      "widgets.txt",
    ]);
  });
});

describe("repository-backed agent: concurrent pushes", () => {
  it("several conversations pushing to the default branch at once all land, none lost", async () => {
    const s = await server();
    const before = Number(bareGit(s.bareRepo, "rev-list", "--count", "refs/heads/main").trim());
    const ids = ["push-a", "push-b", "push-c", "push-d", "push-e"];
    const replies = await Promise.all(
      ids.map((id) =>
        s.turn("acme-widgets", PHRASES.write(`${id}.txt`, id), { conversation_id: id, read_only: false }),
      ),
    );
    for (const reply of replies) expect(reply.error).toBeUndefined();
    const files = bareGit(s.bareRepo, "ls-tree", "-r", "--name-only", "refs/heads/main");
    for (const id of ids) expect(files).toContain(`${id}.txt`);
    const after = Number(bareGit(s.bareRepo, "rev-list", "--count", "refs/heads/main").trim());
    expect(after - before).toBe(ids.length);
  });
});
