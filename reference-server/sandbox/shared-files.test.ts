/**
 * Files as shared state: two sandbox managers with their own roots (two instances' --data) on one PostgreSQL
 * database. A later turn sees what an earlier turn wrote wherever it ran, a warm copy notices it is stale,
 * only changed files move, the quota bounds what is saved and restored, fork and delete act on the stored
 * files, outputs published on one instance are read on the other, and a turn that lost its lease saves
 * nothing. Runs on the test run's cluster (scripts/postgres-cluster.ts); skipped without one.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { lstat, readFile, readlink, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "../errors/catalogue.ts";
import { FileSetConflictError, type FileStore, workingFilesSet } from "../store/file-store.ts";
import { openPostgresStore } from "../store/postgres/index.ts";
import { createTestDatabase, postgresSkipReason } from "../store/testing.ts";
import type { SharedStore } from "../store/types.ts";
import { LazySandbox } from "../turn/lazy-sandbox.ts";
import { DirectorySync } from "./directory-sync.ts";
import type { CreateSandboxManagerOptions } from "./index.ts";
import { copyOwner, storageAgent, TestBed, turnRequest } from "./testing.ts";
import type { SandboxManager } from "./types.ts";

const skip = postgresSkipReason();
const titled = (title: string) => (skip === undefined ? title : `${title} (skipped: ${skip})`);

/** The real file store, counting the blobs that move through it. */
function counted(store: FileStore) {
  const counts = { uploads: 0, downloads: 0 };
  const wrapped: FileStore = {
    ...store,
    putBlob(workspaceId, sha256, size, bytes) {
      counts.uploads++;
      return store.putBlob(workspaceId, sha256, size, bytes);
    },
    getBlob(workspaceId, sha256) {
      counts.downloads++;
      return store.getBlob(workspaceId, sha256);
    },
    putBlobs(workspaceId, blobs) {
      counts.uploads += blobs.length;
      return store.putBlobs(workspaceId, blobs);
    },
    getBlobs(workspaceId, hashes) {
      counts.downloads += hashes.length;
      return store.getBlobs(workspaceId, hashes);
    },
  };
  return { counts, store: wrapped };
}

describe.skipIf(skip !== undefined)(titled("files shared between instances (PostgreSQL)"), () => {
  const bed = new TestBed();
  let database: { url: string; drop(): Promise<void> };
  let store: SharedStore;
  let admin: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase();
    store = await openPostgresStore(database.url);
    admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
  });
  afterEach(() => bed.cleanup());
  afterAll(async () => {
    await admin?.end();
    await store?.close();
    await database?.drop();
  });

  /** Two instances: each its own root, both on the one database; counts of what each moved. */
  async function instances(overrides: Partial<CreateSandboxManagerOptions> = {}) {
    const made = [];
    for (const name of ["a", "b"]) {
      const files = counted(store.fileStore);
      const root = await bed.dir(`instance-${name}`);
      const manager = await bed.manager(root, { fileStore: files.store, ...overrides });
      made.push({ manager, counts: files.counts, root });
    }
    return made;
  }

  async function turn(
    manager: SandboxManager,
    conversationId: string,
    work: (run: (command: string) => Promise<string>) => Promise<void>,
    outcome: "completed" | "failed" = "completed",
  ) {
    const sandbox = await manager.acquire(turnRequest(conversationId, storageAgent()));
    const run = async (command: string) => {
      const result = await sandbox.tools.run("run_command", { command });
      if (result.isError) throw new Error(result.content);
      return result.content;
    };
    await work(run);
    return { sandbox, report: await sandbox.finish(outcome) };
  }

  it("a turn on one instance sees the files a turn on another wrote, with their modes, owner and links", async () => {
    const [a, b] = await instances();
    const { sandbox: first } = await turn(a.manager, "conv-resume", async (run) => {
      await run("mkdir -p notes/deep && printf 'step 1' > notes/plan.txt && printf x > notes/deep/x");
      await run(
        "printf '#!/bin/sh\\necho hi' > run.sh && chmod 750 run.sh && ln -s notes/plan.txt plan-link",
      );
      await run("mkdir empty && mkfifo pipe");
    });
    const second = await b.manager.acquire(turnRequest("conv-resume", storageAgent()));
    expect(second.workdir).not.toBe(first.workdir);
    expect(await second.tools.run("read_file", { path: "notes/plan.txt" })).toEqual({
      content: "step 1",
      isError: false,
    });
    expect((await second.tools.run("read_file", { path: "plan-link" })).content).toBe("step 1");
    expect(await readlink(path.join(second.workdir, "plan-link"))).toBe("notes/plan.txt");
    expect((await stat(path.join(second.workdir, "run.sh"))).mode & 0o777).toBe(0o750);
    expect((await stat(path.join(second.workdir, "empty"))).isDirectory()).toBe(true);
    // A FIFO is no file: it is not saved (as a fork does not copy it).
    await expect(lstat(path.join(second.workdir, "pipe"))).rejects.toThrow();
    // Restored files belong to the conversation's sandbox user, as those its tools write.
    const owner = (await stat(second.workdir)).uid;
    expect((await stat(path.join(second.workdir, "notes/deep/x"))).uid).toBe(owner);
    await second.finish();
  });

  it("a warm copy notices another instance changed the files: a file deleted there is gone here", async () => {
    const [a, b] = await instances();
    await turn(a.manager, "conv-stale", async (run) => {
      await run("printf one > one.txt && printf two > two.txt");
    });
    await turn(b.manager, "conv-stale", async (run) => {
      await run("rm one.txt && printf 'two, changed' > two.txt");
    });
    // A is still warm (its entry and local copy are current as of its own turn).
    const { sandbox } = await turn(a.manager, "conv-stale", async (run) => {
      expect(await run("ls")).not.toContain("one.txt");
      expect(await run("cat two.txt")).toBe("two, changed");
    });
    expect(sandbox.cold).toBe(false);
  });

  it("only changed files move: a turn uploads what it changed and the other instance downloads only that", async () => {
    const [a, b] = await instances();
    await turn(a.manager, "conv-moves", async (run) => {
      await run(
        'for i in 1 2 3 4 5; do printf "file $i" > f$i.txt; done; printf same > copy1; printf same > copy2',
      );
    });
    // Five distinct contents and one shared by two files.
    expect(a.counts.uploads).toBe(6);
    await turn(a.manager, "conv-moves", async (run) => {
      await run("printf 'file 3, edited' > f3.txt");
    });
    expect(a.counts.uploads).toBe(7);
    await turn(b.manager, "conv-moves", async (run) => {
      await run("printf 'file 4, edited on b' > f4.txt");
    });
    expect(b.counts.downloads).toBe(6);
    expect(b.counts.uploads).toBe(1);
    await turn(a.manager, "conv-moves", async (run) => {
      expect(await run("cat f4.txt")).toBe("file 4, edited on b");
    });
    expect(a.counts.downloads).toBe(1);
    // A turn that writes nothing moves nothing, not even a manifest row.
    const before = await store.fileStore.generation(workingFilesSet("conv-moves"));
    await turn(b.manager, "conv-moves", async () => undefined);
    expect(b.counts.uploads).toBe(1);
    expect(await store.fileStore.generation(workingFilesSet("conv-moves"))).toBe(before);
  });

  it("a failed turn's files are saved too (the API: files a turn wrote persist)", async () => {
    const [a, b] = await instances();
    await turn(
      a.manager,
      "conv-failed",
      (run) => run("printf partial > half.txt").then(() => undefined),
      "failed",
    );
    await turn(b.manager, "conv-failed", async (run) => {
      expect(await run("cat half.txt")).toBe("partial");
    });
  });

  it("an instance that dies mid-turn: the next turn elsewhere has the files its earlier turns wrote", async () => {
    const [a, b] = await instances();
    await turn(a.manager, "conv-killed", async (run) => {
      await run("printf 'from turn 1' > earlier.txt");
    });
    // Turn 2 on A writes and never finishes (A was killed): nothing of it was saved.
    const dying = await a.manager.acquire(turnRequest("conv-killed", storageAgent()));
    await dying.tools.run("write_file", { path: "unfinished.txt", content: "lost with the instance" });
    await turn(b.manager, "conv-killed", async (run) => {
      expect(await run("cat earlier.txt")).toBe("from turn 1");
      expect(await run("ls")).not.toContain("unfinished.txt");
    });
  });

  it("the quota holds: a tree past it is not saved, and a stored set past this instance's quota is not restored", async () => {
    const [a] = await instances({ limits: { diskBytes: 256 * 1024 } });
    const sandbox = await a.manager.acquire(turnRequest("conv-quota", storageAgent()));
    await sandbox.tools.run("write_file", { path: "small.txt", content: "fits" });
    // What a command writes between two measurements of the quota (the sandbox README's "Disk, exactly").
    await writeFile(path.join(sandbox.workdir, "big.bin"), Buffer.alloc(300 * 1024, 1));
    await expect(sandbox.finish()).rejects.toThrow(/past the quota .*not saved/);
    expect(await store.fileStore.generation(workingFilesSet("conv-quota"))).toBe(0);

    const [big] = await instances({ limits: { diskBytes: 1024 * 1024 } });
    await turn(big.manager, "conv-quota-restore", async (run) => {
      await run("head -c 300000 /dev/zero > big.bin");
    });
    const [, small] = await instances({ limits: { diskBytes: 256 * 1024 } });
    await expect(small.manager.acquire(turnRequest("conv-quota-restore", storageAgent()))).rejects.toThrow(
      /exceed this server's quota/,
    );
    const local = execFileSync("find", [small.root, "-name", "big.bin"], { encoding: "utf8" });
    expect(local).toBe("");
  });

  it("sparse files count their size: the model is told at once, and the save past the quota says why", async () => {
    const [a] = await instances({ limits: { diskBytes: 256 * 1024 } });
    const sandbox = new LazySandbox(() => a.manager.acquire(turnRequest("conv-sparse", storageAgent())));
    // Two holes of 200 KiB hold no blocks; copied (restored on another instance) they take 400 KiB.
    const made = await sandbox.tools.run("run_command", {
      command: "truncate -s 200K a.bin && truncate -s 200K b.bin && echo made",
    });
    expect(made.content).toContain("disk quota exceeded");
    const refusal = await sandbox.finish().catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(ApiError);
    expect(refusal).toMatchObject({ code: "AGENT_API_FILES_OVER_QUOTA" });
    expect((refusal as ApiError).message).toMatch(/past the quota .*not saved/);
  });

  it("fork copies the stored files (no blob copied), delete removes them for every instance", async () => {
    const [a, b] = await instances();
    await turn(a.manager, "conv-parent", async (run) => {
      await run("printf 'from the parent' > p.txt");
    });
    const blobs = Number((await admin.query("SELECT count(*) AS n FROM file_blobs")).rows[0].n);
    await a.manager.fork(copyOwner("conv-parent"), copyOwner("conv-child"));
    expect(Number((await admin.query("SELECT count(*) AS n FROM file_blobs")).rows[0].n)).toBe(blobs);
    await turn(b.manager, "conv-child", async (run) => {
      expect(await run("cat p.txt")).toBe("from the parent");
      await run("printf 'child only' > c.txt");
    });
    await turn(a.manager, "conv-parent", async (run) => {
      expect(await run("ls")).not.toContain("c.txt");
    });
    // Deleted on B; a new conversation taking the id on A (warm, with the old copy) starts empty.
    await b.manager.remove(copyOwner("conv-parent"));
    expect(await store.fileStore.generation(workingFilesSet("conv-parent"))).toBe(0);
    await turn(a.manager, "conv-parent", async (run) => {
      expect(await run("ls -A")).toBe("outputs\n");
    });
  });

  it("outputs published on one instance are listed and read on another", async () => {
    const [a, b] = await instances();
    const { report } = await turn(a.manager, "conv-outputs", async (run) => {
      await run(
        "mkdir -p outputs/charts && printf 'q3 report' > outputs/report.md && printf svg > outputs/charts/c.svg",
      );
    });
    expect(report.publishedOutputs).toEqual(["charts/c.svg", "report.md"]);
    expect(await b.manager.listWorkspaceOutputs("ws1", "helper", "conv-outputs")).toEqual([
      "charts/c.svg",
      "report.md",
    ]);
    expect(
      (await b.manager.readWorkspaceOutput("ws1", "helper", "conv-outputs", "report.md")).toString(),
    ).toBe("q3 report");
    // A later turn on B adds to them; A reads B's.
    await turn(b.manager, "conv-outputs", async (run) => {
      await run("printf 'q4 report' > outputs/q4.md");
    });
    expect(await a.manager.listWorkspaceOutputs("ws1", "helper", "conv-outputs")).toEqual([
      "charts/c.svg",
      "q4.md",
      "report.md",
    ]);
    // The working files never hold outputs/: it is the turn's outbox, emptied at each start.
    const rows = await admin.query(
      "SELECT convert_from(path, 'UTF8') AS path FROM file_entries WHERE set_key = $1 ORDER BY path",
      [workingFilesSet("conv-outputs")],
    );
    expect(rows.rows).toEqual([]);
  });

  it("a turn that lost its lease saves nothing (fencing token)", async () => {
    const [a, b] = await instances();
    const leases = store.turnLeases;
    const stale = (await leases.tryAcquire("conv-fenced", "paused", 50)) as number;
    const sandbox = await a.manager.acquire({ ...turnRequest("conv-fenced", storageAgent()), fence: stale });
    await sandbox.tools.run("write_file", { path: "late.txt", content: "written after the lease was lost" });
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Another holder takes the expired lease before the paused turn finishes.
    const current = (await leases.tryAcquire("conv-fenced", "next", 10_000)) as number;
    await expect(sandbox.finish()).rejects.toBeInstanceOf(FileSetConflictError);
    const next = await b.manager.acquire({ ...turnRequest("conv-fenced", storageAgent()), fence: current });
    expect((await next.tools.run("read_file", { path: "late.txt" })).isError).toBe(true);
    await next.finish();
    await leases.release("conv-fenced", current);
  });

  it("a local copy left too deep to list is only a cache: it is emptied and restored whole", async () => {
    const [a, b] = await instances();
    const { sandbox } = await turn(a.manager, "conv-deep", async (run) => {
      await run("printf 'kept' > kept.txt");
    });
    // Left in A's copy past the listing's 256 levels (as a command killed mid-turn might), then B moves on.
    execFileSync("mkdir", ["-p", path.join(sandbox.workdir, ...Array.from({ length: 300 }, () => "d"))]);
    await turn(b.manager, "conv-deep", async (run) => {
      await run("printf 'changed on b' > kept.txt");
    });
    await turn(a.manager, "conv-deep", async (run) => {
      expect(await run("cat kept.txt")).toBe("changed on b");
      expect(await run("ls -A")).toBe("kept.txt\noutputs\n");
    });
  });

  it("a sweep deletes only old blobs no conversation refers to", async () => {
    const [a] = await instances();
    await turn(a.manager, "conv-sweep-kept", async (run) => {
      await run("printf 'still referred to' > kept.txt");
    });
    await turn(a.manager, "conv-sweep-gone", async (run) => {
      await run("printf 'only in a deleted conversation' > gone.txt");
    });
    await a.manager.remove(copyOwner("conv-sweep-gone"));
    const fileStore = store.fileStore;
    const blobs = async () =>
      (await admin.query("SELECT encode(sha256, 'hex') AS h FROM file_blobs")).rows.map((r) => r.h as string);
    const hash = (text: string) => createHash("sha256").update(text).digest("hex");
    const gone = hash("only in a deleted conversation");
    const kept = hash("still referred to");
    // Young blobs stay whatever refers to them: a writer may be about to commit a manifest naming them.
    await fileStore.sweep(60_000);
    expect(await blobs()).toContain(gone);
    await admin.query("UPDATE file_blobs SET created_at = created_at - interval '2 hours'");
    // Asking whether a blob is stored makes it young again (a push about to refer to it).
    await fileStore.missing("ws1", [gone]);
    await fileStore.sweep(60_000);
    expect(await blobs()).toContain(gone);
    await admin.query("UPDATE file_blobs SET created_at = created_at - interval '2 hours'");
    expect(await fileStore.sweep(60_000)).toBeGreaterThan(0);
    expect(await blobs()).not.toContain(gone);
    expect(await blobs()).toContain(kept);
    expect(
      Number(
        (
          await admin.query(
            "SELECT count(*) AS n FROM file_chunks c WHERE NOT EXISTS (SELECT 1 FROM file_blobs b WHERE b.sha256 = c.sha256)",
          )
        ).rows[0].n,
      ),
    ).toBe(0);
  });

  it("restores whole files of any size in bounded chunks (a file of several chunks round-trips)", async () => {
    const [a, b] = await instances();
    const { sandbox } = await turn(a.manager, "conv-chunks", async (run) => {
      await run("head -c 2500000 /dev/urandom > random.bin");
    });
    const original = await readFile(path.join(sandbox.workdir, "random.bin"));
    const chunks = await admin.query(
      "SELECT count(*) AS n FROM file_chunks c JOIN file_blobs b USING (sha256) WHERE b.size = 2500000",
    );
    expect(Number(chunks.rows[0].n)).toBe(3);
    const restored = await b.manager.acquire(turnRequest("conv-chunks", storageAgent()));
    expect((await readFile(path.join(restored.workdir, "random.bin"))).equals(original)).toBe(true);
    await restored.finish();
  });
  it("a stored row's setuid, setgid or sticky bit is never restored, and a row naming a path outside the directory restores nothing", async () => {
    const [, b] = await instances();
    const files = store.fileStore;
    const bytes = Buffer.from("#!/bin/sh\nid\n");
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    await files.putBlobs("ws1", [{ sha256, bytes }]);
    const file = { kind: "file" as const, size: bytes.length, sha256, target: null };
    const dir = { kind: "dir" as const, size: 0, sha256: null, target: null };
    // Rows no push of this server writes (it lists permission bits only): an older or other writer's.
    await files.commit("ws1", workingFilesSet("conv-modes"), {
      expected: 0,
      upserts: [
        { ...file, path: "suid.sh", mode: 0o4755 },
        { ...dir, path: "shared", mode: 0o3777 },
      ],
      deletes: [],
    });
    const sandbox = await b.manager.acquire(turnRequest("conv-modes", storageAgent()));
    expect((await stat(path.join(sandbox.workdir, "suid.sh"))).mode & 0o7777).toBe(0o755);
    expect((await stat(path.join(sandbox.workdir, "shared"))).mode & 0o7777).toBe(0o777);
    await sandbox.finish();

    await files.commit("ws1", workingFilesSet("conv-escape"), {
      expected: 0,
      upserts: [{ ...file, path: "../../escaped.sh", mode: 0o644 }],
      deletes: [],
    });
    await b.manager.acquire(turnRequest("conv-escape", storageAgent())).then(
      (escaped) => escaped.finish(),
      () => undefined,
    );
    const found = execFileSync("find", [b.root, "-name", "escaped.sh"], { encoding: "utf8" });
    expect(found).toBe("");

    // A link to a directory outside, then a file beneath the link: the file lands in a real directory here.
    const outside = await bed.dir("outside");
    await files.commit("ws1", workingFilesSet("conv-through-link"), {
      expected: 0,
      upserts: [
        { kind: "link", size: 0, sha256: null, target: outside, path: "out", mode: 0o777 },
        { ...file, path: "out/planted.sh", mode: 0o755 },
      ],
      deletes: [],
    });
    await b.manager.acquire(turnRequest("conv-through-link", storageAgent())).then(
      (through) => through.finish(),
      () => undefined,
    );
    expect(execFileSync("ls", ["-A", outside], { encoding: "utf8" })).toBe("");
  });
  it("a restore that only adds a directory, changes a mode or copies a local file reports the directory changed (the quota measures it anew)", async () => {
    const files = store.fileStore;
    const source = await bed.dir("sync-source");
    const copy = await bed.dir("sync-copy");
    const limits = { bytes: 1024 * 1024, entries: 1000 };
    const set = workingFilesSet("conv-dirs-only");
    const writer = new DirectorySync(files, await bed.dir("state-writer"));
    const reader = new DirectorySync(files, await bed.dir("state-reader"));
    await writeFile(path.join(source, "kept.txt"), "kept");
    await writer.push("ws1", set, source, limits);
    expect((await reader.pull("ws1", set, copy, null, limits)).changed).toBe(true);

    execFileSync("mkdir", [path.join(source, "new-dir")]);
    await writer.push("ws1", set, source, limits);
    expect((await reader.pull("ws1", set, copy, null, limits)).changed).toBe(true);
    expect((await stat(path.join(copy, "new-dir"))).isDirectory()).toBe(true);

    execFileSync("chmod", ["600", path.join(source, "kept.txt")]);
    await writer.push("ws1", set, source, limits);
    expect((await reader.pull("ws1", set, copy, null, limits)).changed).toBe(true);
    expect((await stat(path.join(copy, "kept.txt"))).mode & 0o777).toBe(0o600);

    // A new file whose content a local file holds already is copied here, not downloaded: a change all the same.
    execFileSync("cp", ["-p", path.join(source, "kept.txt"), path.join(source, "copied.txt")]);
    await writer.push("ws1", set, source, limits);
    expect((await reader.pull("ws1", set, copy, null, limits)).changed).toBe(true);
    expect(await readFile(path.join(copy, "copied.txt"), "utf8")).toBe("kept");
  });
  it("two writers storing the same new small blobs in opposite orders at once both succeed (no deadlock)", async () => {
    const files = store.fileStore;
    for (let round = 0; round < 20; round++) {
      const blobs = Array.from({ length: 300 }, (_, i) => {
        const bytes = Buffer.from(`round ${round} blob ${i} ${Math.random()}`);
        return { sha256: createHash("sha256").update(bytes).digest("hex"), bytes };
      });
      await Promise.all([files.putBlobs("ws1", blobs), files.putBlobs("ws1", [...blobs].reverse())]);
    }
  });
  it("a local copy gone from the disk (a cache cleared) while its record stays is restored, not saved as empty", async () => {
    const [a] = await instances();
    const { sandbox } = await turn(a.manager, "conv-cleared", async (run) => {
      await run("printf kept > kept.txt");
    });
    execFileSync("rm", ["-rf", sandbox.workdir]);
    // The instance restarted on its --data (cold), and as it ran (warm).
    const restarted = await bed.manager(a.root, { fileStore: store.fileStore });
    for (const manager of [restarted, a.manager])
      await turn(manager, "conv-cleared", async (run) => {
        expect(await run("cat kept.txt")).toBe("kept");
      });
    const stored = await store.fileStore.read(workingFilesSet("conv-cleared"));
    expect(stored?.entries.map((entry) => entry.path)).toContain("kept.txt");
  });
});
