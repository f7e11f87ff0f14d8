/**
 * The packages' own `agent-api` on a Node older than it can run (the machines' system Node 20, which has no
 * node:sqlite): one line saying which Node it needs and how to get it, exit 2, no stack trace. And the
 * README's "No deployment at hand?" block, whose wait loop must stop when the server it waits for has died
 * (there, of that same old Node) instead of waiting for ever.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runToEnd } from "../child-process.ts";

const root = path.resolve(import.meta.dirname, "../..");
/** The floor of the packages' bin (node:sqlite, unflagged since 22.13). */
const FLOOR = [22, 13];

function versionOf(node: string): number[] | null {
  try {
    const out = execFileSync(node, ["--version"], { encoding: "utf8", timeout: 10_000 }).trim();
    return out.replace(/^v/, "").split(".").map(Number);
  } catch {
    return null;
  }
}

/** A Node older than the floor on this machine (`which -a node`, the usual places), or null. */
function findOldNode(): string | null {
  let onPath: string[] = [];
  try {
    onPath = execFileSync("which", ["-a", "node"], { encoding: "utf8" }).split("\n").filter(Boolean);
  } catch {
    // No `which`, or no node on PATH: the usual places below.
  }
  for (const node of [...onPath, "/usr/bin/node", "/usr/local/bin/node"]) {
    if (!existsSync(node)) continue;
    const v = versionOf(node);
    if (v && (v[0] < FLOOR[0] || (v[0] === FLOOR[0] && v[1] < FLOOR[1]))) return node;
  }
  return null;
}

const oldNode = findOldNode();
const skipReason =
  "no Node older than 22.13 on this machine (which -a node, /usr/bin/node, /usr/local/bin/node)";

describe.skipIf(oldNode === null)(`the packages' agent-api on an old Node (${oldNode ?? skipReason})`, () => {
  for (const args of [["check", "--list"], ["serve", "--port", "0"], ["--help"]]) {
    it(`\`agent-api ${args.join(" ")}\` says which Node it needs in one line and exits 2`, async () => {
      const ran = await runToEnd(oldNode as string, [
        path.join(root, "conformance/bin/agent-api.js"),
        ...args,
      ]);
      expect(ran.code).toBe(2);
      expect(ran.stdout).toBe("");
      const lines = ran.stderr.split("\n").filter(Boolean);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^agent-api needs Node\.js 22\.13 or later \(this is v\d+\.\d+\.\d+\): install Node\.js 24/,
      );
      expect(lines[0]).not.toMatch(/ERR_|at .*:\d+:\d+/);
    });
  }
});

/** Every `sh` block of README.md and docs/*.md that starts a server in the background and waits for its file. */
async function waitingBlocks(): Promise<Array<{ file: string; block: string }>> {
  const files = [path.join(root, "README.md")];
  const docs = path.join(root, "docs");
  if (existsSync(docs)) {
    for (const name of await readdir(docs)) if (name.endsWith(".md")) files.push(path.join(docs, name));
  }
  const blocks: Array<{ file: string; block: string }> = [];
  for (const file of files) {
    for (const { info, body: block } of fencedBlocks(await readFile(file, "utf8"))) {
      if (info === "sh" && /serve .*&\s*$/m.test(block) && block.includes("until [ -s ")) {
        blocks.push({ file: path.relative(root, file), block });
      }
    }
  }
  return blocks;
}

describe("the guides' blocks that start a server and wait for it", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "readme-wait-"));
    // npx here ends at once the way the packages' agent-api ends on an old Node: one line, exit 2.
    await mkdir(path.join(dir, "bin"));
    await writeFile(
      path.join(dir, "bin", "npx"),
      "#!/bin/sh\necho 'agent-api needs Node.js 22.13 or later (this is v20.0.0)' >&2\nexit 2\n",
    );
    await chmod(path.join(dir, "bin", "npx"), 0o755);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('include the README\'s "No deployment at hand?" block', async () => {
    const blocks = await waitingBlocks();
    expect(blocks.some((b) => b.block.includes("--write-env-file agent-api.env"))).toBe(true);
    expect(blocks.length).toBeGreaterThanOrEqual(2);
  });

  it("each stops waiting when the server it started has died, and says so", async () => {
    for (const { file, block } of await waitingBlocks()) {
      // The block's files in /tmp go to this test's directory, so no other run's file ends the wait.
      const script = `pkgs=${dir}\n${block.replaceAll("/tmp/", `${dir}/`)}`;
      // Bounded far above the block's cost (it ends within a second): the old loop never ended.
      const ran = await runToEnd("bash", ["-c", script], {
        cwd: dir,
        env: { ...process.env, PATH: `${path.join(dir, "bin")}:${process.env.PATH}` },
        timeoutMs: 15_000,
      });
      expect(ran.stderr, `${file}: ${block}`).toContain("agent-api needs Node.js 22.13");
      expect(ran.stderr, `${file}: ${block}`).toContain("agent-api serve exited");
    }
  }, 40_000);
});

/**
 * The fenced code blocks of a Markdown text as CommonMark reads them: a fence of n backticks is closed only by
 * a line of at least n backticks, so a block shown inside a longer fence (the README's ````sh) is not one.
 */
function fencedBlocks(text: string): Array<{ info: string; body: string }> {
  const blocks: Array<{ info: string; body: string }> = [];
  let open: { ticks: number; info: string; lines: string[] } | undefined;
  for (const line of text.split("\n")) {
    const fence = /^(`{3,})(.*)$/.exec(line);
    if (open === undefined) {
      if (fence) open = { ticks: fence[1].length, info: fence[2].trim(), lines: [] };
    } else if (fence && fence[1].length >= open.ticks && fence[2].trim() === "") {
      blocks.push({ info: open.info, body: `${open.lines.join("\n")}\n` });
      open = undefined;
    } else open.lines.push(line);
  }
  return blocks;
}
