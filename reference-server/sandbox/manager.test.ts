import { mkdir, readdir, readFile, realpath, rm, stat, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { refusedNoIsolation } from "./index.ts";
import { copyOwner, storageAgent, TestBed, turnRequest } from "./testing.ts";

const bed = new TestBed();
afterEach(() => bed.cleanup());

describe("conversation working directory", () => {
  it("keeps a file written in turn 1 for turn 2 (warm)", async () => {
    const manager = await bed.manager(await bed.dir("root"));
    const first = await manager.acquire(turnRequest("conv one", storageAgent()));
    expect(first.cold).toBe(true);
    expect(await first.tools.run("write_file", { path: "notes/plan.txt", content: "step 1" })).toEqual({
      content: "wrote 6 bytes to notes/plan.txt",
      isError: false,
    });
    await first.finish();

    const second = await manager.acquire(turnRequest("conv one", storageAgent()));
    expect(second.cold).toBe(false);
    expect(second.workdir).toBe(first.workdir);
    expect(await second.tools.run("read_file", { path: "notes/plan.txt" })).toEqual({
      content: "step 1",
      isError: false,
    });
    await second.finish();
  });

  it("keeps files across a restart (a new manager on the same root)", async () => {
    const root = await bed.dir("root");
    const before = await bed.manager(root);
    const turn = await before.acquire(turnRequest("../../etc/weird id", storageAgent()));
    await turn.tools.run("write_file", { path: "memo.md", content: "remember me" });
    await turn.finish();
    await before.close();

    const after = await bed.manager(root);
    const resumed = await after.acquire(turnRequest("../../etc/weird id", storageAgent()));
    expect(resumed.cold).toBe(true);
    expect((await resumed.tools.run("read_file", { path: "memo.md" })).content).toBe("remember me");
    // The id never shapes the path: the directory is a hash below the root.
    expect(path.dirname(resumed.workdir)).toBe(path.join(await realpath(root), "conversations"));
  });

  it("reclaims an idle sandbox: next turn is cold and still sees the files", async () => {
    const manager = await bed.manager(await bed.dir("root"), { idleMs: 30 });
    const first = await manager.acquire(turnRequest("c", storageAgent()));
    await first.tools.run("write_file", { path: "kept.txt", content: "still here" });
    await first.finish();
    await new Promise((resolve) => setTimeout(resolve, 150));
    const second = await manager.acquire(turnRequest("c", storageAgent()));
    expect(second.cold).toBe(true);
    expect((await second.tools.run("read_file", { path: "kept.txt" })).content).toBe("still here");
  });

  it("keeps conversations apart", async () => {
    const manager = await bed.manager(await bed.dir("root"));
    const a = await manager.acquire(turnRequest("a", storageAgent()));
    await a.tools.run("write_file", { path: "secret.txt", content: "only a" });
    const b = await manager.acquire(turnRequest("b", storageAgent()));
    expect(b.workdir).not.toBe(a.workdir);
    const outcome = await b.tools.run("read_file", { path: "secret.txt" });
    expect(outcome.isError).toBe(true);
    const escaped = await b.tools.run("read_file", { path: `../${path.basename(a.workdir)}/secret.txt` });
    expect(escaped).toEqual({
      content: expect.stringContaining("escapes the working directory"),
      isError: true,
    });
  });

  it("never hands a copy made for another generation or workspace of the id to a turn, nor to a fork", async () => {
    const root = await bed.dir("root");
    const manager = await bed.manager(root);
    const first = await manager.acquire(turnRequest("reused", storageAgent()));
    await first.tools.run("write_file", { path: "old.txt", content: "first generation" });
    await first.finish();
    // The same id created again (the delete's clean-up never ran here): the old files are not this one's.
    const again = await manager.acquire(turnRequest("reused", storageAgent(), { generation: 2 }));
    expect(again.cold).toBe(true);
    expect((await again.tools.run("read_file", { path: "old.txt" })).isError).toBe(true);
    await again.tools.run("write_file", { path: "old.txt", content: "second generation" });
    await again.finish();
    // Another workspace taking the id, on a manager started afresh over the same root.
    const restarted = await bed.manager(root);
    const other = storageAgent({ workspaceId: "ws2" });
    const taken = await restarted.acquire(turnRequest("reused", other, { generation: 3 }));
    expect((await taken.tools.run("read_file", { path: "old.txt" })).isError).toBe(true);
    await taken.finish();
    // A fork names its parent's generation: a copy of another one is not copied.
    await restarted.fork(
      copyOwner("reused", storageAgent(), 2),
      copyOwner("reused-child", storageAgent(), 4),
    );
    const child = await restarted.acquire(turnRequest("reused-child", storageAgent(), { generation: 4 }));
    expect((await child.tools.run("read_file", { path: "old.txt" })).isError).toBe(true);
    await child.finish();
  });

  it("forks a conversation's files and removes a conversation", async () => {
    const manager = await bed.manager(await bed.dir("root"));
    const parent = await manager.acquire(turnRequest("parent", storageAgent()));
    await parent.tools.run("write_file", { path: "a.txt", content: "from parent" });
    await parent.finish();
    await manager.fork(copyOwner("parent"), copyOwner("child"));
    const child = await manager.acquire(turnRequest("child", storageAgent()));
    expect((await child.tools.run("read_file", { path: "a.txt" })).content).toBe("from parent");
    await child.tools.run("write_file", { path: "a.txt", content: "child changed it" });
    const parentAgain = await manager.acquire(turnRequest("parent", storageAgent()));
    expect((await parentAgain.tools.run("read_file", { path: "a.txt" })).content).toBe("from parent");

    await manager.remove(copyOwner("parent"));
    await expect(stat(parent.workdir)).rejects.toThrow();
    const fresh = await manager.acquire(turnRequest("parent", storageAgent()));
    expect(fresh.cold).toBe(true);
    expect((await fresh.tools.run("read_file", { path: "a.txt" })).isError).toBe(true);
  });
});

describe("isolated turns", () => {
  it("run in a throwaway directory that is discarded, leaving the conversation untouched", async () => {
    const filesDir = await bed.dir("files");
    await writeFile(path.join(filesDir, "agent.md"), "agent file");
    const agent = storageAgent({ filesDir });
    const manager = await bed.manager(await bed.dir("root"));
    const normal = await manager.acquire(turnRequest("conv", agent));
    await normal.tools.run("write_file", { path: "mine.txt", content: "conversation file" });
    await normal.finish();

    const attachment = {
      name: "in.txt",
      mediaType: "text/plain",
      dataBase64: Buffer.from("hi").toString("base64"),
    };
    const isolated = await manager.acquire(
      turnRequest("conv", agent, { isolated: true, attachments: [attachment] }),
    );
    expect(isolated.workdir).not.toBe(normal.workdir);
    expect(isolated.attachments).toEqual([".uploads/in.txt"]);
    expect((await isolated.tools.run("list_files", {})).content).toBe(".uploads/\n.uploads/in.txt");
    expect((await isolated.tools.run("read_file", { path: "mine.txt" })).isError).toBe(true);
    await isolated.tools.run("write_file", { path: "outputs/x.txt", content: "throwaway" });
    await isolated.tools.run("write_file", { path: "mine.txt", content: "overwritten?" });
    expect(await isolated.finish()).toEqual({ pushedCommit: null, publishedOutputs: [] });
    await expect(stat(isolated.workdir)).rejects.toThrow();

    expect(await readFile(path.join(normal.workdir, "mine.txt"), "utf8")).toBe("conversation file");
    expect(await manager.listWorkspaceOutputs("ws1", "helper", "conv")).toEqual([]);
  });
});

describe("storage-backed agents", () => {
  it("restore the agent's files fresh each turn, keep scratch files, publish outputs/", async () => {
    const filesDir = await bed.dir("files");
    await mkdir(path.join(filesDir, "docs"));
    await writeFile(path.join(filesDir, "docs", "guide.md"), "original guide");
    await writeFile(path.join(filesDir, "config.json"), "{}");
    const agent = storageAgent({ filesDir });
    const manager = await bed.manager(await bed.dir("root"));

    const first = await manager.acquire(turnRequest("s1", agent));
    expect((await first.tools.run("read_file", { path: "docs/guide.md" })).content).toBe("original guide");
    await first.tools.run("write_file", { path: "docs/guide.md", content: "edited by the turn" });
    await first.tools.run("write_file", { path: "scratch.txt", content: "my notes" });
    await first.tools.run("write_file", { path: "outputs/report.md", content: "# Report" });
    await first.tools.run("write_file", { path: "outputs/data/table.csv", content: "a,b" });
    expect(await first.finish()).toEqual({
      pushedCommit: null,
      publishedOutputs: ["data/table.csv", "report.md"],
    });
    // finish is idempotent
    expect((await first.finish()).publishedOutputs).toEqual(["data/table.csv", "report.md"]);

    expect(await manager.listWorkspaceOutputs("ws1", "helper", "s1")).toEqual([
      "data/table.csv",
      "report.md",
    ]);
    expect((await manager.readWorkspaceOutput("ws1", "helper", "s1", "report.md")).toString()).toBe(
      "# Report",
    );
    await expect(manager.readWorkspaceOutput("ws1", "helper", "s1", "../../conversations")).rejects.toThrow(
      /escapes/,
    );
    await expect(manager.readWorkspaceOutput("ws1", "helper", "s1", "missing.md")).rejects.toThrow(
      /no such file/,
    );
    // What the turn changed in the agent's files was not written back.
    expect(await readFile(path.join(filesDir, "docs", "guide.md"), "utf8")).toBe("original guide");

    const second = await manager.acquire(turnRequest("s1", agent));
    expect(second.cold).toBe(false);
    expect((await second.tools.run("read_file", { path: "docs/guide.md" })).content).toBe("original guide");
    expect((await second.tools.run("read_file", { path: "scratch.txt" })).content).toBe("my notes");
    // outputs/ is the turn's outbox: empty again; the published copies live in the store.
    expect(await readdir(path.join(second.workdir, "outputs"))).toEqual([]);
    expect(await second.finish()).toEqual({ pushedCommit: null, publishedOutputs: [] });
    expect(await manager.listWorkspaceOutputs("ws1", "helper", "s1")).toEqual([
      "data/table.csv",
      "report.md",
    ]);
  });

  it("restore picks up a changed agent file on a warm turn and a deleted one on a cold turn", async () => {
    const filesDir = await bed.dir("files");
    await writeFile(path.join(filesDir, "a.txt"), "v1");
    const agent = storageAgent({ filesDir });
    const root = await bed.dir("root");
    const manager = await bed.manager(root);
    await (await manager.acquire(turnRequest("s", agent))).finish();
    await writeFile(path.join(filesDir, "a.txt"), "v2 longer");
    const warm = await manager.acquire(turnRequest("s", agent));
    expect(warm.cold).toBe(false);
    expect((await warm.tools.run("read_file", { path: "a.txt" })).content).toBe("v2 longer");
    await warm.tools.run("run_command", { command: "rm a.txt" });
    await warm.finish();
    const reclaiming = await bed.manager(root, { idleMs: 10 });
    await (await reclaiming.acquire(turnRequest("s", agent))).finish();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const cold = await reclaiming.acquire(turnRequest("s", agent));
    expect(cold.cold).toBe(true);
    expect((await cold.tools.run("read_file", { path: "a.txt" })).content).toBe("v2 longer");
  });

  it("never follows a link the turn planted in outputs/ or over an agent file", async () => {
    const filesDir = await bed.dir("files");
    const outside = await bed.dir("outside");
    await writeFile(path.join(outside, "server-secret.txt"), "do not publish");
    await writeFile(path.join(filesDir, "a.txt"), "agent");
    const agent = storageAgent({ filesDir });
    const manager = await bed.manager(await bed.dir("root"));
    const turn = await manager.acquire(turnRequest("links", agent));
    await symlink(path.join(outside, "server-secret.txt"), path.join(turn.workdir, "outputs", "leak.txt"));
    await symlink(outside, path.join(turn.workdir, "outputs", "dir"));
    await writeFile(path.join(turn.workdir, "outputs", "ok.txt"), "fine");
    await rm(path.join(turn.workdir, "a.txt"));
    await symlink(path.join(outside, "server-secret.txt"), path.join(turn.workdir, "a.txt"));
    expect((await turn.finish()).publishedOutputs).toEqual(["ok.txt"]);
    const next = await manager.acquire(turnRequest("links", agent));
    expect(await readFile(path.join(outside, "server-secret.txt"), "utf8")).toBe("do not publish");
    expect((await next.tools.run("read_file", { path: "a.txt" })).content).toBe("agent");
  });
});

describe("without isolation", () => {
  it("refuses every tool unless started unsafe", async () => {
    const manager = await bed.manager(await bed.dir("root"), {
      unsafeNoIsolation: false,
      bwrapCommand: "/nonexistent/bwrap",
    });
    expect(manager.isolation).toBe("unavailable");
    expect(manager.isolationProblem).toMatch(/^bubblewrap \(\/nonexistent\/bwrap\) could not be started/);
    const turn = await manager.acquire(turnRequest("c", storageAgent()));
    for (const [name, input] of [
      ["run_command", { command: "echo hi" }],
      ["write_file", { path: "a", content: "b" }],
      ["read_file", { path: "a" }],
      ["list_files", {}],
    ] as const) {
      expect(await turn.tools.run(name, input)).toEqual({
        content: refusedNoIsolation(manager.isolationProblem),
        isError: true,
      });
    }
  });

  it("runs with a scrubbed environment and the working directory as cwd when started unsafe", async () => {
    process.env.SANDBOX_TEST_CANARY = "server-only-value";
    const manager = await bed.manager(await bed.dir("root"), { bwrapCommand: "/nonexistent/bwrap" });
    expect(manager.isolation).toBe("none");
    const turn = await manager.acquire(
      turnRequest("c", storageAgent({ secrets: { API_TOKEN: "agent-secret" } })),
    );
    const outcome = await turn.tools.run("run_command", { command: "pwd; env" });
    expect(outcome.isError).toBe(false);
    expect(outcome.content).toContain(turn.workdir);
    expect(outcome.content).toContain("API_TOKEN=agent-secret");
    expect(outcome.content).not.toContain("server-only-value");
    delete process.env.SANDBOX_TEST_CANARY;
  });
});
