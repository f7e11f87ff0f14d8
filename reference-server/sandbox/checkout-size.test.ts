/**
 * checkoutBytes (checkout-size.ts) against what a real `git clone` writes: conversions of the tree's own
 * .gitattributes (eol=crlf, text, ident, in sub-folders too), symlinks, odd paths.
 */
import { execFileSync } from "node:child_process";
import { chmod, mkdir, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkoutBytes } from "./checkout-size.ts";
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

/** What a real clone of `bare` writes: the sizes of its files and links, .git aside. */
async function clonedBytes(bare: string): Promise<number> {
  const dir = await bed.dir("clone");
  hostGit(dir, "clone", "--quiet", bare, "t");
  const sizes = execFileSync(
    "find",
    ["t", "-path", "t/.git", "-prune", "-o", "!", "-type", "d", "-printf", "%s\\n"],
    {
      cwd: dir,
      encoding: "utf8",
    },
  );
  return sizes
    .split("\n")
    .filter(Boolean)
    .reduce((sum, n) => sum + Number(n), 0);
}

describe("the bytes a checkout writes", () => {
  it("are the blobs' sizes when the tree has no .gitattributes", async () => {
    const bare = await repositoryOf(async (dir) => {
      await writeFile(path.join(dir, "a.txt"), "one\ntwo\n".repeat(1000));
      await symlink("a.txt", path.join(dir, "link"));
    });
    expect(await checkoutBytes(bare, "main", 1e9)).toBe(await clonedBytes(bare));
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
    const cloned = await clonedBytes(bare);
    // The conversions are real: the blobs alone are 100,000 + 5,000 + 500 + ... bytes.
    expect(cloned).toBeGreaterThan(210_000);
    expect(await checkoutBytes(bare, "main", 1e9)).toBe(cloned);
  });
});
