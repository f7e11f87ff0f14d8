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
import { attachment, check, ensureTurnOk, prompts } from "./common.ts";

const run = promisify(execFile);
const SECTION = "Endpoints/Send a message: repository-backed agents";

async function remoteHead(url: string): Promise<string> {
  const { stdout } = await run("git", ["ls-remote", url, "HEAD"], { timeout: 30_000 });
  return stdout.split(/\s/)[0] ?? "";
}

interface RepoRound {
  readOnlyHeadBefore: string;
  readOnlyHeadAfter: string;
  pushHeadBefore: string;
  pushHeadAfter: string;
  file: string;
  content: string;
  /** Files of the pushed commit, its author, and the pushed file's content. */
  tree: string[];
  author: string;
  pushedContent: string | undefined;
}

/** One read-only turn, then one writing turn, sequentially (both judge the same remote). */
function repoRound(ctx: CheckContext): Promise<RepoRound> {
  return ctx.fixture("repo-round", async (c) => {
    const agent = c.inputs.repoAgent as string;
    const url = c.inputs.repoUrl as string;
    const readOnlyHeadBefore = await remoteHead(url);
    const roId = c.newConversationId();
    ensureTurnOk(
      await c.turn({
        agent,
        conversationId: roId,
        prompt: prompts.writeFile(`acc-${c.nonce()}.txt`, c.nonce()),
      }),
    );
    // Whatever a deployment does after a turn happens by the time the session is recorded.
    await c.waitForSession(roId, { agent });
    const readOnlyHeadAfter = await remoteHead(url);

    const file = `acc-${c.nonce()}.txt`;
    const content = c.nonce();
    const pushHeadBefore = readOnlyHeadAfter;
    const turn = await c.turn({
      agent,
      conversationId: c.newConversationId(),
      prompt: prompts.writeFile(file, content),
      metadata: { read_only: false, attachments: [attachment("acc-attached.txt", c.nonce())] },
    });
    ensureTurnOk(turn, "read_only: false turn");
    let pushHeadAfter = await remoteHead(url);
    const deadline = Date.now() + c.inputs.sessionWaitMs;
    while (pushHeadAfter === pushHeadBefore && Date.now() < deadline) {
      await sleep(250);
      pushHeadAfter = await remoteHead(url);
    }
    const dir = await mkdtemp(join(tmpdir(), "acc-clone-"));
    try {
      await run("git", ["clone", "--quiet", url, dir], { timeout: 60_000 });
      const { stdout: files } = await run("git", ["-C", dir, "ls-tree", "-r", "--name-only", "HEAD"]);
      const { stdout: author } = await run("git", ["-C", dir, "log", "-1", "--format=%an <%ae>"]);
      const pushedContent = await readFile(join(dir, file), "utf8").catch(() => undefined);
      return {
        readOnlyHeadBefore,
        readOnlyHeadAfter,
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
    title: "A turn with an API key and no read_only never commits or pushes",
    needs: ["repoAgent", "repoUrl"],
    async run(ctx) {
      const round = await repoRound(ctx);
      if (round.readOnlyHeadAfter !== round.readOnlyHeadBefore)
        fail("the default branch moved after a read-only turn");
    },
  }),
  /** read_only false: a changing turn commits and pushes to the default branch. */
  check({
    id: "REPO-READ-ONLY-FALSE-PUSHES",
    level: "MUST",
    section: SECTION,
    title: "read_only: false pushes the turn's changes to the default branch under a fixed agent identity",
    needs: ["repoAgent", "repoUrl"],
    async run(ctx) {
      const round = await repoRound(ctx);
      if (round.pushHeadAfter === round.pushHeadBefore)
        fail("the default branch did not move after a writing turn");
      if (round.pushedContent?.trim() !== round.content)
        fail(`the pushed ${round.file} does not hold the written content`);
      if (round.author === "") fail("the pushed commit has no author");
      ctx.note(`commit author: ${round.author}`);
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
        skip("nothing was pushed, so the rule could not be judged");
      const leaked = round.tree.filter((f) => f.startsWith(".uploads/") || f.endsWith("acc-attached.txt"));
      if (leaked.length > 0) fail(`the pushed tree holds ${leaked.join(", ")}`);
    },
  }),
];
