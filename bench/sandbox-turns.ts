/**
 * Sandbox turn latency: a one-tool turn (acquire → run_command `echo hi` → finish), warm and cold
 * (after the warm sandbox was reclaimed), for a storage agent and a repository agent, against a
 * baseline in the same run: the same command spawned directly with child_process, no sandbox.
 *
 * Run: node_modules/.bin/node bench/sandbox-turns.ts [turns=60]
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { createSandboxManager } from "../reference-server/sandbox/index.ts";
import type { SandboxAgent, SandboxManager } from "../reference-server/sandbox/types.ts";

const TURNS = Math.max(50, Number(process.argv[2] ?? 60));
const RECLAIM_MS = 1;
const TARGET_WARM_OVERHEAD_MS = 25;

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const median = (samples: number[]) => percentile(samples, 50);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function spawnEcho(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("/bin/sh", ["-c", "echo hi"], { stdio: ["ignore", "pipe", "pipe"], env: {} });
    child.stdout.resume();
    child.on("error", reject);
    child.on("close", () => resolve());
  });
}

async function oneToolTurn(manager: SandboxManager, agent: SandboxAgent, conversationId: string) {
  const started = performance.now();
  const turn = await manager.acquire({
    conversationId,
    agent,
    isolated: false,
    readOnly: true,
    attachments: [],
  });
  const outcome = await turn.tools.run("run_command", { command: "echo hi" });
  await turn.finish();
  const elapsed = performance.now() - started;
  if (outcome.isError || outcome.content !== "hi\n") throw new Error(`tool failed: ${outcome.content}`);
  return { elapsed, cold: turn.cold };
}

async function measure(label: string, run: () => Promise<number>): Promise<number[]> {
  for (let i = 0; i < 5; i++) await run(); // warm-up: JIT, page cache
  const samples: number[] = [];
  for (let i = 0; i < TURNS; i++) samples.push(await run());
  process.stderr.write(`  measured ${label}\n`);
  return samples;
}

async function main() {
  const work = await mkdtemp(path.join(tmpdir(), "bench-sandbox-"));
  try {
    const filesDir = path.join(work, "agent-files");
    await mkdir(path.join(filesDir, "docs"), { recursive: true });
    for (let i = 0; i < 20; i++)
      await writeFile(path.join(filesDir, "docs", `page-${i}.md`), "x".repeat(4096));

    const bare = path.join(work, "repo.git");
    const seed = path.join(work, "seed");
    const gitEnv = {
      ...process.env,
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_AUTHOR_NAME: "b",
      GIT_AUTHOR_EMAIL: "b@b",
      GIT_COMMITTER_NAME: "b",
      GIT_COMMITTER_EMAIL: "b@b",
    };
    execFileSync("git", ["init", "-q", "--bare", "--initial-branch=main", bare], { env: gitEnv });
    execFileSync("git", ["clone", "-q", bare, seed], { env: gitEnv, stdio: "ignore" });
    for (let i = 0; i < 20; i++) await writeFile(path.join(seed, `file-${i}.txt`), "y".repeat(4096));
    execFileSync("git", ["-C", seed, "add", "-A"], { env: gitEnv });
    execFileSync("git", ["-C", seed, "commit", "-qm", "seed"], { env: gitEnv });
    execFileSync("git", ["-C", seed, "push", "-q", "origin", "HEAD:main"], { env: gitEnv });

    const common = { unsafeNoIsolation: true, toolTimeoutMs: 10_000, toolOutputCapBytes: 64 * 1024 };
    const warmManager = await createSandboxManager({
      ...common,
      rootDir: path.join(work, "warm"),
      idleMs: 600_000,
    });
    const coldManager = await createSandboxManager({
      ...common,
      rootDir: path.join(work, "cold"),
      idleMs: RECLAIM_MS,
    });
    const storage: SandboxAgent = {
      workspaceId: "ws",
      name: "bench",
      kind: "storage",
      secrets: {},
      filesDir,
    };
    const repo: SandboxAgent = {
      workspaceId: "ws",
      name: "acme-repo",
      kind: "repo",
      secrets: {},
      repoUrl: bare,
    };

    const timed = async (fn: () => Promise<unknown>) => {
      const started = performance.now();
      await fn();
      return performance.now() - started;
    };
    const warmTurn = (agent: SandboxAgent) => async () => {
      const { elapsed, cold } = await oneToolTurn(warmManager, agent, `warm-${agent.kind}`);
      return cold ? Number.NaN : elapsed;
    };
    const coldTurn = (agent: SandboxAgent) => async () => {
      await sleep(RECLAIM_MS + 4); // let the idle timer reclaim it (not part of the measured turn)
      const { elapsed, cold } = await oneToolTurn(coldManager, agent, `cold-${agent.kind}`);
      if (!cold) throw new Error("expected a cold turn after reclaim");
      return elapsed;
    };

    process.stderr.write(`sandbox isolation: ${warmManager.isolation}; ${TURNS} turns per series\n`);
    const baseline = await measure("baseline", () => timed(spawnEcho));
    const series: [string, number[]][] = [
      ["storage warm", (await measure("storage warm", warmTurn(storage))).filter((n) => !Number.isNaN(n))],
      ["storage cold", await measure("storage cold", coldTurn(storage))],
      ["repo warm", (await measure("repo warm", warmTurn(repo))).filter((n) => !Number.isNaN(n))],
      ["repo cold", await measure("repo cold", coldTurn(repo))],
    ];
    await warmManager.close();
    await coldManager.close();

    const fmt = (ms: number) => `${ms.toFixed(2)} ms`.padStart(10);
    console.log(`isolation: ${warmManager.isolation}, turns per series: ${TURNS}`);
    console.log(`${"series".padEnd(26)}${"median".padStart(10)}${"p90".padStart(10)}`);
    console.log(
      `${"baseline (direct spawn)".padEnd(26)}${fmt(median(baseline))}${fmt(percentile(baseline, 90))}`,
    );
    for (const [label, samples] of series) {
      console.log(`${label.padEnd(26)}${fmt(median(samples))}${fmt(percentile(samples, 90))}`);
    }
    const get = (label: string) => median(series.find(([l]) => l === label)?.[1] ?? []);
    for (const kind of ["storage", "repo"]) {
      const warm = get(`${kind} warm`);
      const cold = get(`${kind} cold`);
      const overhead = warm - median(baseline);
      console.log(
        `${kind}: cold/warm ${(cold / warm).toFixed(2)}x, warm/baseline ${(warm / median(baseline)).toFixed(2)}x, ` +
          `sandbox overhead (warm − baseline) ${overhead.toFixed(2)} ms (target ≤ ${TARGET_WARM_OVERHEAD_MS} ms: ` +
          `${overhead <= TARGET_WARM_OVERHEAD_MS ? "met" : "missed"})`,
      );
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

await main();
