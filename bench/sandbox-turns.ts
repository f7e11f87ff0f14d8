/**
 * Sandbox turn latency: a one-tool turn (acquire → run_command `echo hi` → finish), warm and cold
 * (after the warm sandbox was reclaimed), for a storage agent and a repository agent, against a
 * baseline in the same run: the same command spawned directly with child_process, no sandbox.
 *
 * Run: node_modules/.bin/node bench/sandbox-turns.ts [turns=60]
 */
import { execFileSync } from "node:child_process";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { createSandboxManager } from "../reference-server/sandbox/index.ts";
import { bwrapArgs, bwrapPipes, resolveExecutable } from "../reference-server/sandbox/isolation.ts";
import { DEFAULT_SANDBOX_LIMITS } from "../reference-server/sandbox/limits.ts";
import { runProcess } from "../reference-server/sandbox/process-runner.ts";
import type { SandboxAgent, SandboxManager } from "../reference-server/sandbox/types.ts";
import { percentile } from "./stats.ts";

const TURNS = Math.max(50, Number(process.argv[2] ?? 60));
const RECLAIM_MS = 1;
const TARGET_WARM_OVERHEAD_MS = 25;
const BASELINE = "baseline (direct spawn)";

const median = (samples: number[]) => percentile(samples, 50);

import { setTimeout as sleep } from "node:timers/promises";

/** One process, spawned as the sandbox's commands are (pipes on fds 3..., its own process group). */
async function spawnEcho(
  file = "/bin/sh",
  args = ["-c", "echo hi"],
  pipes: Buffer[] = [Buffer.alloc(0)],
): Promise<void> {
  const result = await runProcess({
    file,
    args,
    pipes,
    cwd: "/",
    env: {},
    timeoutMs: 10_000,
    outputCapBytes: 4096,
  });
  if (result.spawnError !== undefined) throw new Error(result.spawnError);
}

async function oneToolTurn(manager: SandboxManager, agent: SandboxAgent, conversationId: string) {
  const started = performance.now();
  const turn = await manager.acquire({
    conversationId,
    generation: 1,
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

/**
 * Runs every series once per round, TURNS rounds after 5 warm-up rounds (JIT, page cache). Interleaving
 * makes load from other processes fall on all series alike, so their ratios stay meaningful.
 */
async function measure(runners: [string, () => Promise<number>][]): Promise<Map<string, number[]>> {
  for (let i = 0; i < 5; i++) for (const [, run] of runners) await run();
  const samples = new Map<string, number[]>(runners.map(([label]) => [label, []]));
  for (let i = 0; i < TURNS; i++) {
    for (const [label, run] of runners) samples.get(label)?.push(await run());
  }
  return samples;
}

async function main() {
  const work = await mkdtemp(path.join(tmpdir(), "bench-sandbox-"));
  // Like a server's data directory: sandbox users pass through it to their working directories.
  await chmod(work, 0o711);
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

    const warmedUp = new Set<string>();
    const timed = async (fn: () => Promise<unknown>) => {
      const started = performance.now();
      await fn();
      return performance.now() - started;
    };
    const warmTurn = (agent: SandboxAgent) => async () => {
      const { elapsed, cold } = await oneToolTurn(warmManager, agent, `warm-${agent.kind}`);
      // Only the very first turn (a warm-up round) may be cold.
      if (cold && warmedUp.has(agent.kind))
        throw new Error("expected a warm turn, the sandbox was reclaimed");
      warmedUp.add(agent.kind);
      return elapsed;
    };
    const coldTurn = (agent: SandboxAgent) => async () => {
      await sleep(RECLAIM_MS + 4); // let the idle timer reclaim it (not part of the measured turn)
      const { elapsed, cold } = await oneToolTurn(coldManager, agent, `cold-${agent.kind}`);
      if (!cold) throw new Error("expected a cold turn after reclaim");
      return elapsed;
    };

    // The same command in bubblewrap with the sandbox's own arguments, without the manager around it:
    // how much of the overhead is bwrap itself (namespaces, mounts) and how much the turn's bookkeeping.
    const bwrapDir = path.join(work, "bwrap-only");
    await mkdir(bwrapDir);
    const { pipes, inputs } = bwrapPipes({ PATH: "/usr/bin:/bin" });
    const bwrapAlone = () =>
      timed(() =>
        spawnEcho(
          resolveExecutable("bwrap"),
          bwrapArgs(bwrapDir, "echo hi", DEFAULT_SANDBOX_LIMITS, inputs),
          pipes,
        ),
      );
    const runners: [string, () => Promise<number>][] = [
      [BASELINE, () => timed(() => spawnEcho())],
      ...(warmManager.isolation === "bwrap"
        ? [["bwrap alone (no manager)", bwrapAlone] as [string, () => Promise<number>]]
        : []),
      ["storage warm", warmTurn(storage)],
      ["storage cold", coldTurn(storage)],
      ["repo warm", warmTurn(repo)],
      ["repo cold", coldTurn(repo)],
    ];

    process.stderr.write(`sandbox isolation: ${warmManager.isolation}; ${TURNS} turns per series\n`);
    const samples = await measure(runners);
    await warmManager.close();
    await coldManager.close();

    const fmt = (ms: number) => `${ms.toFixed(2)} ms`.padStart(10);
    console.log(`isolation: ${warmManager.isolation}, turns per series: ${TURNS} (series interleaved)`);
    console.log(`${"series".padEnd(26)}${"median".padStart(10)}${"p90".padStart(10)}`);
    for (const [label, values] of samples) {
      console.log(`${label.padEnd(26)}${fmt(median(values))}${fmt(percentile(values, 90))}`);
    }
    if (warmManager.isolation !== "bwrap")
      console.log(
        `NOTE: tools ran with isolation "${warmManager.isolation}", not bubblewrap: no sandbox overhead measured`,
      );
    const get = (label: string) => median(samples.get(label) ?? []);
    const baseline = get(BASELINE);
    for (const kind of ["storage", "repo"]) {
      const warm = get(`${kind} warm`);
      const cold = get(`${kind} cold`);
      const overhead = warm - baseline;
      console.log(
        `${kind}: cold/warm ${(cold / warm).toFixed(2)}x, warm/baseline ${(warm / baseline).toFixed(2)}x, ` +
          `sandbox overhead (warm − baseline) ${overhead.toFixed(2)} ms (target ≤ ${TARGET_WARM_OVERHEAD_MS} ms: ` +
          `${overhead <= TARGET_WARM_OVERHEAD_MS ? "met" : "missed"})`,
      );
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

await main();
