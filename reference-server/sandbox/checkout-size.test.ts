/**
 * checkoutSize (checkout-size.ts) against what a real `git clone` writes: conversions of the tree's own
 * .gitattributes (eol=crlf, text, ident, in sub-folders too), symlinks, odd paths.
 */
import { execFileSync } from "node:child_process";
import { chmod, mkdir, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkoutSize } from "./checkout-size.ts";
import { hostGit, TestBed } from "./testing.ts";

const bed = new TestBed();
afterEach(() => bed.cleanup());

/** A bare repository whose `main` holds what `fill` writes into a work tree; returns its path. */
async function repositoryOf(fill: (dir: string) => Promise<void>): Promise<string> {
  const dir = await bed.dir("git");
  const bare = path.join(dir, "r.git");
  hostGit(dir, "init", "--quiet", "--bare", "--initial-branch=main", bare);
  const seed = path.join(dir, "seed");
  await mkdir(seed);
  hostGit(seed, "init", "--quiet", "--initial-branch=main");
  await fill(seed);
  hostGit(seed, "add", "--all");
  hostGit(seed, "commit", "--quiet", "-m", "x");
  hostGit(seed, "push", "--quiet", bare, "HEAD:main");
  return bare;
}

/** What a real clone of `bare` writes (.git aside): apparent bytes of its files and links, blocks, entries. */
async function cloned(bare: string): Promise<{ bytes: number; blockBytes: number; entries: number }> {
  const dir = await bed.dir("clone");
  hostGit(dir, "clone", "--quiet", bare, "t");
  const lines = execFileSync(
    "find",
    ["t", "-mindepth", "1", "-path", "t/.git", "-prune", "-o", "-printf", "%y %s %b\\n"],
    { cwd: dir, encoding: "utf8" },
  )
    .split("\n")
    .filter(Boolean)
    .map((line) => line.split(" "));
  const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
  return {
    bytes: sum(lines.filter(([type]) => type !== "d").map(([, size]) => Number(size))),
    blockBytes: sum(lines.map(([, , blocks]) => Number(blocks) * 512)),
    entries: lines.length,
  };
}

/** checkoutSize against the clone: the same bytes and entries, and never fewer blocks than the clone took. */
async function expectMatchesClone(bare: string): Promise<number> {
  const real = await cloned(bare);
  const measured = await checkoutSize(bare, "main", 1e9);
  expect(measured.bytes).toBe(real.bytes);
  expect(measured.entries).toBe(real.entries);
  expect(measured.diskBytes).toBeGreaterThanOrEqual(real.blockBytes);
  return real.bytes;
}

describe("the bytes a checkout writes", () => {
  it("are the blobs' sizes when the tree has no .gitattributes", async () => {
    const bare = await repositoryOf(async (dir) => {
      await writeFile(path.join(dir, "a.txt"), "one\ntwo\n".repeat(1000));
      await symlink("a.txt", path.join(dir, "link"));
    });
    await expectMatchesClone(bare);
  });

  it("count eol=crlf, text and ident conversions of the tree's own attributes, in sub-folders and odd paths too", async () => {
    const bare = await repositoryOf(async (dir) => {
      await writeFile(path.join(dir, ".gitattributes"), "*.txt text eol=crlf\n*.c ident\n");
      await writeFile(path.join(dir, "lines.txt"), "\n".repeat(100_000));
      await writeFile(path.join(dir, "odd\nname.txt"), "a\nb\n");
      await writeFile(path.join(dir, "id.c"), "$Id$\n".repeat(100));
      await mkdir(path.join(dir, "sub"));
      await writeFile(path.join(dir, "sub", ".gitattributes"), "*.dat eol=crlf\n");
      await writeFile(path.join(dir, "sub", "x.dat"), "\n".repeat(5000));
      await writeFile(path.join(dir, "run.sh"), "echo\n");
      await chmod(path.join(dir, "run.sh"), 0o755);
      await symlink("lines.txt", path.join(dir, "link.txt"));
    });
    // The conversions are real: the blobs alone are 100,000 + 5,000 + 500 + ... bytes.
    expect(await expectMatchesClone(bare)).toBeGreaterThan(210_000);
  });
});
