/**
 * The walk before the server's git reads a work tree (work-tree-scan.ts): what it reports, that it never
 * follows a link or opens a file, and that it is bounded in depth and entries.
 */
import { execFileSync } from "node:child_process";
import { mkdir, symlink, truncate, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { TestBed } from "./testing.ts";
import { scanWorkTree } from "./work-tree-scan.ts";

const bed = new TestBed();
afterEach(() => bed.cleanup());

describe("the work tree walk", () => {
  it("reports .git entries of every kind in sub-folders, not the top-level one; sizes are apparent", async () => {
    const tree = await bed.dir("tree");
    await mkdir(path.join(tree, "a", "b", ".git"), { recursive: true });
    await writeFile(path.join(tree, "a", "b", ".git", "big"), "x".repeat(1000));
    await mkdir(path.join(tree, "c"));
    await writeFile(path.join(tree, "c", ".git"), "gitdir: /somewhere\n");
    await mkdir(path.join(tree, "d"));
    await symlink("/somewhere", path.join(tree, "d", ".git"));
    await mkdir(path.join(tree, "e"));
    execFileSync("mkfifo", [path.join(tree, "e", ".git")]);
    await writeFile(path.join(tree, ".git"), "gitdir: /top\n");
    await writeFile(path.join(tree, "sparse"), "");
    await truncate(path.join(tree, "sparse"), 5_000_000);
    const scan = await scanWorkTree(tree);
    expect(scan.incomplete).toBeUndefined();
    expect([...scan.nestedGitEntries].sort()).toEqual([
      "a/b/.git (directory)",
      "c/.git (file)",
      "d/.git (symlink)",
      "e/.git (special file)",
    ]);
    // A sparse file counts whole; `.git` entries (files included) and what they hold are not read by git.
    expect(scan.apparentBytes).toBe(5_000_000);
  });

  it("never follows a symlink to a folder (a nested .git behind it is not there for git either) nor opens a FIFO", async () => {
    const outside = await bed.dir("outside");
    await mkdir(path.join(outside, "repo", ".git"), { recursive: true });
    await writeFile(path.join(outside, "repo", "file"), "x".repeat(100));
    const tree = await bed.dir("tree");
    await symlink(path.join(outside, "repo"), path.join(tree, "link"));
    await symlink(outside, path.join(tree, "up"));
    execFileSync("mkfifo", [path.join(tree, "fifo")]);
    const scan = await scanWorkTree(tree);
    expect(scan).toEqual({ apparentBytes: 0, nestedGitEntries: [] });
  });

  it("is bounded: a tree deeper than the depth limit, or with more entries than the entry limit, is not vouched for", async () => {
    const tree = await bed.dir("tree");
    await mkdir(path.join(tree, ...Array.from({ length: 12 }, () => "d")), { recursive: true });
    for (let i = 0; i < 50; i++) await writeFile(path.join(tree, `f${i}`), "");
    const generous = { depth: 64, entries: 1000, timeoutMs: 30_000 };
    expect((await scanWorkTree(tree, generous)).incomplete).toBeUndefined();
    const shallow = await scanWorkTree(tree, { ...generous, depth: 8 });
    expect(shallow.incomplete).toBe("it is nested deeper than 8 directories");
    expect(shallow.apparentBytes).toBe(Number.POSITIVE_INFINITY);
    const few = await scanWorkTree(tree, { ...generous, entries: 20 });
    expect(few.incomplete).toBe("it holds more than 20 entries");
  });
});
