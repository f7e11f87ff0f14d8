/**
 * Repository-backed agents: read_only by default for API keys; with read_only false a changing turn
 * commits and pushes to the default branch, never committing attachments. Judged on a clone of --repo-url.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { type CheckContext, sleep } from "../context.ts";
import { fail, skip } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import { attachment, check, ensureStatus, ensureTurnOk, prompts } from "./common.ts";

const run = promisify(execFile);
const SECTION = "Endpoints/Send a message: repository-backed agents";
/** Pause before the second read-only turn that tells an unrelated concurrent push from the deployment's. */
const RECHECK_PAUSE_MS = 2_000;

async function remoteHead(url: string): Promise<string> {
  const { stdout } = await run("git", ["ls-remote", url, "HEAD"], { timeout: 30_000 });
  return stdout.split(/\s/)[0] ?? "";
}

/** Every branch and tag of the remote, and HEAD: ref → object id (server-made refs such as pull requests left out). */
async function remoteRefs(url: string): Promise<Map<string, string>> {
  const { stdout } = await run("git", ["ls-remote", url], { timeout: 30_000 });
  const refs = new Map<string, string>();
  for (const line of stdout.split("\n")) {
    const [sha, ref] = line.trim().split(/\s+/);
    if (!sha || !ref) continue;
    if (ref === "HEAD" || ref.startsWith("refs/heads/") || ref.startsWith("refs/tags/")) refs.set(ref, sha);
  }
  return refs;
}

interface RefChange {
  ref: string;
  before?: string;
  after?: string;
}

function refChanges(before: Map<string, string>, after: Map<string, string>): RefChange[] {
  const names = new Set([...before.keys(), ...after.keys()]);
  return [...names]
    .filter((ref) => before.get(ref) !== after.get(ref))
    .sort()
    .map((ref) => ({ ref, before: before.get(ref), after: after.get(ref) }));
}

/** Who authored the commits the changed refs now name, read from a fresh clone: object id → "name <email>". */
async function authorsOf(url: string, changes: RefChange[]): Promise<Map<string, string>> {
  const authors = new Map<string, string>();
  const wanted = [...new Set(changes.map((c) => c.after).filter((sha): sha is string => !!sha))];
  if (wanted.length === 0) return authors;
  const dir = await mkdtemp(join(tmpdir(), "acc-refs-"));
  try {
    await run("git", ["clone", "--bare", "--quiet", url, dir], { timeout: 60_000 });
    for (const sha of wanted) {
      try {
        const { stdout } = await run("git", ["-C", dir, "log", "-1", "--format=%an <%ae>", sha]);
        authors.set(sha, stdout.trim());
      } catch {
        authors.set(sha, "(commit not found in a fresh clone)");
      }
    }
  } catch (error) {
    for (const sha of wanted)
      authors.set(sha, `(unknown: ${error instanceof Error ? error.message : error})`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return authors;
}

/** What a read-only turn did to the remote's refs. */
interface ReadOnlyRound {
  /** The conversation its turn ran in. */
  id: string;
  before: Map<string, string>;
  after: Map<string, string>;
  changes: RefChange[];
  /** Authors of the commits the changed refs now name. */
  authors: Map<string, string>;
}

/** One read-only turn (an API key, no read_only) that changes a file, with the remote's refs around it. */
async function readOnlyRound(c: CheckContext, key?: string, routed = false): Promise<ReadOnlyRound> {
  const agent = c.inputs.repoAgent as string;
  const url = c.inputs.repoUrl as string;
  const before = await remoteRefs(url);
  const id = c.newConversationId();
  ensureTurnOk(
    await c.turn({
      agent,
      key,
      conversationId: id,
      prompt: prompts.writeFile(`acc-${c.nonce()}.txt`, c.nonce()),
      ...(routed && { routed: true, model: agent }),
    }),
    `read-only turn${key === undefined ? "" : " with the member key"}${routed ? " on the model-routed send" : ""}`,
  );
  // Whatever a deployment does after a turn happens by the time the session is recorded.
  await c.waitForSession(id, { agent, key });
  const after = await remoteRefs(url);
  const changes = refChanges(before, after);
  const authors = changes.length > 0 ? await authorsOf(url, changes) : new Map<string, string>();
  return { id, before, after, changes, authors };
}

function describeChanges(round: ReadOnlyRound): string {
  const short = (sha: string | undefined) => (sha ? sha.slice(0, 10) : "(none)");
  return round.changes
    .map((ch) => {
      const by = ch.after ? `, commit by ${round.authors.get(ch.after) ?? "(unknown)"}` : " (deleted)";
      return `${ch.ref}: ${short(ch.before)} → ${short(ch.after)}${by}`;
    })
    .join("\n");
}

interface RepoRound {
  readOnly: ReadOnlyRound;
  pushHeadBefore: string;
  pushHeadAfter: string;
  file: string;
  content: string;
  /** Files of the pushed commit, its author, and the pushed file's content. */
  tree: string[];
  author: string;
  pushedContent: string | undefined;
}

/** The remote's HEAD once it moved from `before`, or as it is when --session-wait-ms has passed. */
async function headAfter(c: CheckContext, url: string, before: string): Promise<string> {
  let head = await remoteHead(url);
  const deadline = Date.now() + c.inputs.sessionWaitMs;
  while (head === before && Date.now() < deadline) {
    await sleep(250);
    head = await remoteHead(url);
  }
  return head;
}

/** One read-only turn, then one writing turn, sequentially (both judge the same remote). */
function repoRound(ctx: CheckContext): Promise<RepoRound> {
  return ctx.fixture("repo-round", async (c) => {
    const agent = c.inputs.repoAgent as string;
    const url = c.inputs.repoUrl as string;
    const readOnly = await readOnlyRound(c);

    const file = `acc-${c.nonce()}.txt`;
    const content = c.nonce();
    const pushHeadBefore = readOnly.after.get("HEAD") ?? (await remoteHead(url));
    const turn = await c.turn({
      agent,
      conversationId: c.newConversationId(),
      prompt: prompts.writeFile(file, content),
      metadata: { read_only: false, attachments: [attachment("acc-attached.txt", c.nonce())] },
    });
    ensureTurnOk(turn, "read_only: false turn");
    const pushHeadAfter = await headAfter(c, url, pushHeadBefore);
    const dir = await mkdtemp(join(tmpdir(), "acc-clone-"));
    try {
      await run("git", ["clone", "--quiet", url, dir], { timeout: 60_000 });
      const { stdout: files } = await run("git", ["-C", dir, "ls-tree", "-r", "--name-only", "HEAD"]);
      const { stdout: author } = await run("git", ["-C", dir, "log", "-1", "--format=%an <%ae>"]);
      const pushedContent = await readFile(join(dir, file), "utf8").catch(() => undefined);
      return {
        readOnly,
        pushHeadBefore,
        pushHeadAfter,
        file,
        content,
        tree: files.split("\n").filter(Boolean),
        author: author.trim(),
        pushedContent,
      };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
}

export const repoChecks: CheckDef[] = [
  /** API-key turns are read-only by default: nothing is pushed. */
  check({
    id: "REPO-READ-ONLY-DEFAULT",
    level: "MUST",
    section: SECTION,
    title:
      "A turn with an API key and no read_only never commits or pushes (no branch or tag moves), whichever key sends it",
    needs: ["repoAgent", "repoUrl"],
    async run(ctx) {
      const round = await repoRound(ctx);
      const first = round.readOnly;
      if (first.changes.length === 0) {
        // Rule 3 is about "calls made with an API key", any key that may run a turn: the member's too; and the
        // model-routed send has "the same body and behaviour", its default included.
        const others: Array<{ key?: string; routed: boolean; label: string }> = [
          ...(ctx.inputs.memberKey
            ? [{ key: ctx.inputs.memberKey, routed: false, label: "sent with the member key" }]
            : []),
          { routed: true, label: "on the model-routed send" },
        ];
        for (const other of others) {
          const theirs = await readOnlyRound(ctx, other.key, other.routed);
          if (theirs.changes.length === 0) continue;
          await sleep(RECHECK_PAUSE_MS);
          const again = await readOnlyRound(ctx, other.key, other.routed);
          if (again.changes.length > 0)
            fail(
              `refs of the repository moved during two read-only turns ${other.label} (none moved for the run's key on send-message)`,
              `first:\n${describeChanges(theirs)}\nsecond:\n${describeChanges(again)}`,
            );
        }
        return;
      }
      // The agent's identity is the author of the read_only: false turn's push (unknown when nothing was pushed).
      const identity = round.pushHeadAfter !== round.pushHeadBefore ? round.author : "";
      const authors = [...first.authors.values()];
      if (identity !== "" && authors.includes(identity)) {
        fail(
          `refs of the repository moved during a read-only turn, with a commit by the agent's identity ${identity}`,
          describeChanges(first),
        );
      }
      // Not known to be the agent's: one more read-only turn, after a pause, tells an unrelated push that
      // happened to land during the first from a deployment that pushes on read-only turns.
      await sleep(RECHECK_PAUSE_MS);
      const second = await readOnlyRound(ctx);
      if (second.changes.length > 0) {
        fail(
          `refs of the repository moved during two read-only turns (new commits by ${[...new Set([...authors, ...second.authors.values()])].join(", ") || "nobody: refs deleted"}; the agent's identity is ${identity || "unknown: nothing was pushed with read_only false"})`,
          `first read-only turn:\n${describeChanges(first)}\nsecond read-only turn:\n${describeChanges(second)}`,
        );
      }
      ctx.note(
        `refs moved during the first read-only turn (${describeChanges(first).replaceAll("\n", "; ")}), not under the agent's identity (${identity || "unknown"}); a second read-only turn moved nothing: taken as an unrelated concurrent push`,
      );
    },
  }),
  /** read_only false: a changing turn commits and pushes to the default branch. */
  check({
    id: "REPO-READ-ONLY-FALSE-PUSHES",
    level: "MUST",
    section: SECTION,
    title:
      "read_only: false pushes the turn's changes to the default branch under a fixed agent identity, on a conversation's first turn and on a resumed one",
    needs: ["repoAgent", "repoUrl"],
    async run(ctx) {
      const round = await repoRound(ctx);
      if (round.pushHeadAfter === round.pushHeadBefore)
        fail("the default branch did not move after a writing turn");
      if (round.pushedContent?.trim() !== round.content)
        fail(`the pushed ${round.file} does not hold the written content`);
      if (round.author === "") fail("the pushed commit has no author");
      ctx.note(`commit author: ${round.author}`);
      // The flag is the turn's, whatever turn of the conversation it is: a resumed turn pushes too.
      const agent = ctx.inputs.repoAgent as string;
      const url = ctx.inputs.repoUrl as string;
      const before = await remoteHead(url);
      const resumed = await ctx.turn({
        agent,
        conversationId: round.readOnly.id,
        prompt: prompts.writeFile(`acc-${ctx.nonce()}.txt`, ctx.nonce()),
        metadata: { read_only: false },
      });
      ensureTurnOk(resumed, "read_only: false turn into a resumed conversation");
      const after = await headAfter(ctx, url, before);
      if (after === before)
        fail(
          "the default branch did not move after a writing turn with read_only: false into a resumed conversation",
        );
      // Read back, as a client would, after turns that ran tools: the transcript's shape is judged by the
      // transcripts sweep (sweeps/transcripts.ts) on this agent kind too.
      ensureStatus(
        await ctx.transcript(round.readOnly.id, { agent }),
        200,
        "the transcript of the resumed conversation",
      );
    },
  }),
  /** Attachments are never committed. */
  check({
    id: "REPO-ATTACHMENTS-NOT-COMMITTED",
    level: "MUST",
    section: SECTION,
    title: "Attachments are never committed to the connected repository",
    needs: ["repoAgent", "repoUrl"],
    async run(ctx) {
      const round = await repoRound(ctx);
      if (round.pushHeadAfter === round.pushHeadBefore)
        skip(
          "the writing turn pushed nothing, so no pushed tree shows whether attachments are committed (that nothing was pushed fails REPO-READ-ONLY-FALSE-PUSHES)",
        );
      const leaked = round.tree.filter((f) => f.startsWith(".uploads/") || f.endsWith("acc-attached.txt"));
      if (leaked.length > 0) fail(`the pushed tree holds ${leaked.join(", ")}`);
    },
  }),
];
