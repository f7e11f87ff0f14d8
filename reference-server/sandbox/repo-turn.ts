/**
 * A repo agent's turn: the clone made or brought up to date before the turn, and what the turn wrote
 * committed and pushed after it.
 */
import { readFile, rm, stat } from "node:fs/promises";
import path from "node:path";
import {
  type CheckoutQuota,
  cloneInto,
  commitAndPush,
  excludeUploads,
  pruneLooseObjects,
  type RepoPaths,
  refresh,
  remoteDefaultBranch,
} from "./repo.ts";
import type { FinishReport, SandboxRequest } from "./types.ts";

/**
 * Before the turn: the clone ready in the working directory; whether the server's git wrote the work tree
 * since the sandbox user was last given it (a fetch, a merge, an earlier turn's rebase: the head tells).
 */
export async function prepareRepoTurn(
  request: SandboxRequest,
  paths: RepoPaths,
  entry: { branch: string | null; ownedHead?: string | null },
  cold: boolean,
  tmpDir: string,
  checkoutQuota: CheckoutQuota,
): Promise<{ repo: RepoPaths; gitWrote: boolean }> {
  const url = request.agent.repoUrl;
  if (!url) throw new Error(`repo agent ${request.agent.name} has no repoUrl`);
  const repo = await prepareRepo(url, paths, entry, cold, tmpDir, checkoutQuota);
  const head = await workTreeHead(repo.gitDir);
  const gitWrote = head !== entry.ownedHead;
  entry.ownedHead = head;
  return { repo, gitWrote };
}

/** After the turn: what it wrote committed and pushed. A turn cut short, or a read-only one, pushes nothing. */
export async function finishRepoTurn(
  request: SandboxRequest,
  repo: RepoPaths,
  entry: { branch: string | null },
  outcome: "completed" | "failed",
  checkoutQuota: CheckoutQuota,
  baseline: string | null | undefined,
  diskBytes: number,
): Promise<FinishReport> {
  if (outcome === "failed" || request.readOnly) return { pushedCommit: null, publishedOutputs: [] };
  const pushedCommit = await pushTurn(
    repo,
    entry.branch,
    request.conversationId,
    checkoutQuota,
    baseline,
    diskBytes,
  );
  return { pushedCommit, publishedOutputs: [] };
}

/** Pushed to when the remote is empty and names no default branch. */
const FALLBACK_BRANCH = "main";

/**
 * The conversation's clone ready in `repo`: on a warm turn brought up to date, on a cold one cloned anew
 * (or its git directory of an earlier run reused). Sets `entry.branch` to the remote's default branch.
 */
export async function prepareRepo(
  url: string,
  repo: RepoPaths,
  entry: { branch: string | null },
  cold: boolean,
  tmpDir: string,
  checkoutQuota: CheckoutQuota,
): Promise<RepoPaths> {
  if (!cold) {
    await refresh(repo, entry.branch, false, checkoutQuota);
    return repo;
  }
  if (await exists(path.join(repo.gitDir, "HEAD"))) {
    await excludeUploads(repo);
    entry.branch = await remoteDefaultBranch(repo);
    await refresh(repo, entry.branch, true, checkoutQuota);
  } else {
    await rm(repo.gitDir, { recursive: true, force: true });
    await cloneInto(url, repo, tmpDir, checkoutQuota);
    entry.branch = await remoteDefaultBranch(repo);
  }
  return repo;
}

/** Commits and pushes what a writable turn changed since `baseline`; the pushed commit, or null. */
export async function pushTurn(
  repo: RepoPaths,
  branch: string | null,
  conversationId: string,
  checkoutQuota: CheckoutQuota,
  baseline: string | null | undefined,
  diskBytes: number,
): Promise<string | null> {
  try {
    return await commitAndPush(repo, branch ?? FALLBACK_BRANCH, conversationId, checkoutQuota, baseline);
  } finally {
    // A writable turn staged what it wrote (twice: the baseline and the commit), committed or not.
    await pruneLooseObjects(repo, diskBytes).catch(() => undefined);
  }
}

/** The work tree's checked-out commit (HEAD's target) read from the git directory, or null. */
export async function workTreeHead(gitDir: string): Promise<string | null> {
  const head = await readFile(path.join(gitDir, "HEAD"), "utf8").catch(() => null);
  if (head === null) return null;
  const ref = /^ref: (.+)$/m.exec(head)?.[1];
  if (!ref) return head.trim();
  const loose = await readFile(path.join(gitDir, ref), "utf8").catch(() => null);
  return loose?.trim() ?? `${ref}@packed`;
}

export async function exists(p: string): Promise<boolean> {
  return stat(p).then(
    () => true,
    () => false,
  );
}
