/**
 * Files shared between instances (PostgreSQL file store): what a turn pays for them. Two sandbox managers with
 * their own roots on one database (a cluster of its own), storage agent, no isolation (the commands are not
 * what is measured):
 * - a warm one-tool turn that changes nothing, with and without the file store (the one generation query);
 * - saving a turn that wrote N small files, restoring them on the other instance (cold), then a turn that
 *   changes one of them and the other instance catching up (stale warm copy);
 * - one large file saved and restored, with the process's peak RSS (blobs move in 1 MiB chunks).
 *
 * Run: node_modules/.bin/node bench/shared-files.ts [files=1000] [largeMiB=100]
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { createSandboxManager } from "../reference-server/sandbox/index.ts";
import type { SandboxAgent, SandboxManager } from "../reference-server/sandbox/types.ts";
import type { FileStore } from "../reference-server/store/file-store.ts";
import { openPostgresStore } from "../reference-server/store/postgres/index.ts";
import { startPostgresCluster } from "../scripts/postgres-cluster.ts";
import { percentile } from "./stats.ts";

const FILES = Number(process.argv[2] ?? 1000);
const LARGE_MIB = Number(process.argv[3] ?? 100);
const WARM_TURNS = 40;
const agent: SandboxAgent = { workspaceId: "bench", name: "bench", kind: "storage", secrets: {} };

async function manager(root: string, fileStore?: FileStore): Promise<SandboxManager> {
  return createSandboxManager({
    rootDir: root,
    idleMs: 600_000,
    unsafeNoIsolation: true,
    toolTimeoutMs: 120_000,
    toolOutputCapBytes: 64 * 1024,
    fileStore,
    limits: { diskBytes: 2 * LARGE_MIB * 1024 * 1024, files: 100_000 },
  });
}

/** One turn: acquire, `command`, finish; milliseconds of acquire (restore) and of finish (save). */
async function turn(m: SandboxManager, conversationId: string, command: string) {
  const started = performance.now();
  const sandbox = await m.acquire({
    conversationId,
    generation: 1,
    agent,
    isolated: false,
    readOnly: true,
    attachments: [],
  });
  const acquired = performance.now();
  const outcome = await sandbox.tools.run("run_command", { command });
  if (outcome.isError) throw new Error(outcome.content);
  const ran = performance.now();
  await sandbox.finish();
  return {
    acquireMs: acquired - started,
    finishMs: performance.now() - ran,
    totalMs: performance.now() - started,
  };
}

const ms = (value: number) => `${value.toFixed(1)} ms`;

async function main(): Promise<void> {
  const cluster = await startPostgresCluster();
  const dir = await mkdtemp(path.join(tmpdir(), "bench-shared-files-"));
  // The sandbox users pass through it to their working directories, as through a server's data directory.
  await chmod(dir, 0o711);
  const store = await openPostgresStore(cluster.url);
  try {
    const fileStore = store.fileStore as FileStore;
    const local = await manager(path.join(dir, "local"));
    const a = await manager(path.join(dir, "a"), fileStore);
    const b = await manager(path.join(dir, "b"), fileStore);

    const warm = async (m: SandboxManager, id: string) => {
      await turn(m, id, "echo hi");
      const samples: number[] = [];
      for (let i = 0; i < WARM_TURNS; i++) samples.push((await turn(m, id, "echo hi")).totalMs);
      return percentile(samples, 50);
    };
    const warmLocal = await warm(local, "warm");
    const warmShared = await warm(a, "warm");
    console.log(
      `warm one-tool turn, nothing changed: ${ms(warmLocal)} local, ${ms(warmShared)} shared (median of ${WARM_TURNS})`,
    );

    const write = await turn(
      a,
      "many",
      `mkdir d && for i in $(seq ${FILES}); do head -c 1024 /dev/urandom > d/f$i; done`,
    );
    console.log(`save ${FILES} new files of 1 KiB: ${ms(write.finishMs)}`);
    const cold = await turn(b, "many", "true");
    console.log(`restore them on another instance (cold): ${ms(cold.acquireMs)}`);
    const one = await turn(b, "many", "head -c 1024 /dev/urandom > d/f1");
    console.log(`save a turn that changed 1 of ${FILES} files: ${ms(one.finishMs)}`);
    const stale = await turn(a, "many", "true");
    console.log(`catch up a stale warm copy (1 file changed elsewhere): ${ms(stale.acquireMs)}`);

    const rssBefore = Math.round(process.memoryUsage().rss / 1024 / 1024);
    const large = await turn(a, "large", `head -c ${LARGE_MIB * 1024 * 1024} /dev/urandom > big.bin`);
    const restored = await turn(b, "large", "true");
    console.log(
      `one file of ${LARGE_MIB} MiB: saved in ${ms(large.finishMs)}, restored in ${ms(restored.acquireMs)}; this process's RSS ${rssBefore} MiB before, peak ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB`,
    );
    for (const m of [local, a, b]) await m.close();
  } finally {
    await store.close();
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
