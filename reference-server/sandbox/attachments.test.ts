import { mkdir, readdir, readFile, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  acceptAttachments,
  decodeStrictBase64,
  deduplicateName,
  MAX_ATTACHMENT_BYTES,
  MAX_NUMBERED_TRIES,
  nameCandidates,
  sanitizeAttachmentName,
} from "./attachments.ts";
import { storageAgent, TestBed, turnRequest } from "./testing.ts";

const bed = new TestBed();
afterEach(() => bed.cleanup());

const file = (name: unknown, data: string | Buffer = "x", mediaType: unknown = "text/plain") => ({
  name,
  mediaType,
  dataBase64: Buffer.from(data).toString("base64"),
});

describe("attachment names", () => {
  it.each([
    ["../../x", "x"],
    ["/etc/passwd", "passwd"],
    ["..\\..\\windows\\system.ini", "system.ini"],
    ["a\0b.txt", "ab.txt"],
    ["tab\there\nnewline.md", "tabherenewline.md"],
    ["...", "attachment"],
    [".", "attachment"],
    ["..", "attachment"],
    ["dir/", "attachment"],
    [".bashrc", "bashrc"],
    ["  spaced name.txt  ", "spaced name.txt"],
    ["report.", "report"],
    ["naïve résumé.pdf", "naïve résumé.pdf"],
  ])("%j becomes %j", (raw, expected) => {
    expect(sanitizeAttachmentName(raw)).toBe(expected);
  });

  it("caps a 300-character name at 200 bytes, keeping the extension", () => {
    const name = sanitizeAttachmentName(`${"n".repeat(300)}.txt`);
    expect(Buffer.byteLength(name)).toBe(200);
    expect(name.endsWith(".txt")).toBe(true);
    const multibyte = sanitizeAttachmentName(`${"é".repeat(150)}.csv`);
    expect(Buffer.byteLength(multibyte)).toBeLessThanOrEqual(200);
    expect(multibyte).toMatch(/^é+\.csv$/);
  });

  it("de-duplicates as a.txt, a (1).txt, a (2).txt within the byte limit", () => {
    const taken = new Set(["a.txt", "a (1).txt"]);
    expect(deduplicateName("a.txt", taken)).toBe("a (2).txt");
    expect(deduplicateName("b.txt", taken)).toBe("b.txt");
    expect(deduplicateName("noext", new Set(["noext"]))).toBe("noext (1)");
    const long = sanitizeAttachmentName(`${"n".repeat(300)}.txt`);
    const second = deduplicateName(long, new Set([long])) ?? "";
    expect(Buffer.byteLength(second)).toBeLessThanOrEqual(200);
    expect(second.endsWith(" (1).txt")).toBe(true);
  });
});

describe("attachment validation and caps", () => {
  it("accepts strict base64 only", () => {
    expect(decodeStrictBase64("aGk=")?.toString()).toBe("hi");
    for (const bad of ["aGk", "aGk==", "aG k=", "aGl=", "data:text/plain;base64,aGk=", "aGk=\n", "a-_="]) {
      expect(decodeStrictBase64(bad)).toBeNull();
    }
  });

  it("drops malformed entries silently", () => {
    const good = file("ok.txt", "fine");
    const accepted = acceptAttachments([
      null,
      42,
      "string",
      [good],
      { ...good, name: "" },
      { ...good, name: 7 },
      { ...good, mediaType: undefined },
      { ...good, mediaType: "" },
      { ...good, dataBase64: "" },
      { ...good, dataBase64: `data:text/plain;base64,${good.dataBase64}` },
      { ...good, dataBase64: "not base64!" },
      good,
    ]);
    expect(accepted.map((a) => [a.name, a.data.toString()])).toEqual([["ok.txt", "fine"]]);
    expect(acceptAttachments({ not: "an array" })).toEqual([]);
    expect(acceptAttachments(undefined)).toEqual([]);
  });

  it("keeps at most 10 files", () => {
    const eleven = Array.from({ length: 11 }, (_, i) => file(`f${i}.txt`, `${i}`));
    expect(acceptAttachments(eleven).map((a) => a.name)).toEqual(eleven.slice(0, 10).map((f) => f.name));
  });

  it("keeps at most 10 MiB in total; an entry past the cap is dropped, a later smaller one may fit", () => {
    const half = Buffer.alloc(MAX_ATTACHMENT_BYTES / 2, 1);
    const accepted = acceptAttachments([
      file("a.bin", half),
      file("b.bin", half),
      file("one-byte-too-many.bin", "z"),
    ]);
    expect(accepted.map((a) => a.name)).toEqual(["a.bin", "b.bin"]);
    const overflow = acceptAttachments([
      file("big.bin", Buffer.alloc(MAX_ATTACHMENT_BYTES + 1)),
      file("small.txt", "fits"),
    ]);
    expect(overflow.map((a) => a.name)).toEqual(["small.txt"]);
    const exact = acceptAttachments([file("exact.bin", Buffer.alloc(MAX_ATTACHMENT_BYTES))]);
    expect(exact.map((a) => a.data.length)).toEqual([MAX_ATTACHMENT_BYTES]);
  });
});

describe("attachments in a turn", () => {
  it("writes hostile names safely into .uploads/ and de-duplicates against earlier turns", async () => {
    const manager = await bed.manager(await bed.dir("root"));
    const hostile = [
      "../../x",
      "/etc/passwd",
      "a\0b.txt",
      "...",
      ".",
      `${"l".repeat(300)}.txt`,
      "dup.txt",
      "dup.txt",
      "sub/dup.txt",
    ];
    const turn = await manager.acquire(
      turnRequest("att", storageAgent(), {
        attachments: hostile.map((name, i) => file(name, `content ${i}`)),
      }),
    );
    const long = `${"l".repeat(196)}.txt`;
    expect(turn.attachments).toEqual([
      ".uploads/x",
      ".uploads/passwd",
      ".uploads/ab.txt",
      ".uploads/attachment",
      ".uploads/attachment (1)",
      `.uploads/${long}`,
      ".uploads/dup.txt",
      ".uploads/dup (1).txt",
      ".uploads/dup (2).txt",
    ]);
    expect(await readFile(path.join(turn.workdir, ".uploads", "dup (2).txt"), "utf8")).toBe("content 8");
    expect((await readdir(turn.workdir)).sort()).toEqual([".uploads", "outputs"]);
    await turn.finish();

    const next = await manager.acquire(
      turnRequest("att", storageAgent(), { attachments: [file("dup.txt", "again")] }),
    );
    expect(next.attachments).toEqual([".uploads/dup (3).txt"]);
    expect((await next.tools.run("read_file", { path: ".uploads/dup (3).txt" })).content).toBe("again");
  });

  it("does not write through a .uploads link left by a tool", async () => {
    const outside = await bed.dir("outside");
    const manager = await bed.manager(await bed.dir("root"));
    const first = await manager.acquire(turnRequest("att-link", storageAgent()));
    await symlink(outside, path.join(first.workdir, ".uploads"));
    await first.finish();
    const second = await manager.acquire(
      turnRequest("att-link", storageAgent(), { attachments: [file("a.txt")] }),
    );
    expect(second.attachments).toEqual([".uploads/a.txt"]);
    expect(await readdir(outside)).toEqual([]);
  });

  it("de-duplicates in a bounded number of tries whatever a turn planted in .uploads/", async () => {
    const manager = await bed.manager(await bed.dir("root"));
    const first = await manager.acquire(turnRequest("att-planted", storageAgent()));
    const uploads = path.join(first.workdir, ".uploads");
    await mkdir(uploads, { recursive: true });
    // What a turn's tools could leave: the name and its numbered forms far past the tries, and a directory
    // where the next numbered name would go.
    const planted = 30_000;
    for (let from = 0; from < planted; from += 1000) {
      await Promise.all(
        Array.from({ length: 1000 }, (_, i) =>
          writeFile(path.join(uploads, from + i === 0 ? "dup.txt" : `dup (${from + i}).txt`), ""),
        ),
      );
    }
    await first.finish();
    const next = await manager.acquire(
      turnRequest("att-planted", storageAgent(), {
        attachments: [file("dup.txt", "one"), file("dup.txt", "two"), file("free.txt", "three")],
      }),
    );
    // The old code walked to `dup (30000).txt`; now a random suffix follows the 20 numbered names.
    expect(next.attachments).toHaveLength(3);
    const [one, two, free] = next.attachments;
    expect(one).toMatch(/^\.uploads\/dup \([0-9a-f]{8}\)\.txt$/);
    expect(two).toMatch(/^\.uploads\/dup \([0-9a-f]{8}\)\.txt$/);
    expect(two).not.toBe(one);
    expect(free).toBe(".uploads/free.txt");
    expect((await next.tools.run("read_file", { path: two })).content).toBe("two");
    expect(await readdir(uploads)).toHaveLength(planted + 3);
  });

  it("tries the numbered names first, up to the bound", async () => {
    const candidates = [...nameCandidates("a.txt")];
    expect(candidates.slice(0, 3)).toEqual(["a.txt", "a (1).txt", "a (2).txt"]);
    expect(candidates[MAX_NUMBERED_TRIES]).toBe(`a (${MAX_NUMBERED_TRIES}).txt`);
    expect(candidates.length).toBeLessThanOrEqual(MAX_NUMBERED_TRIES + 5);
    const taken = new Set(candidates.slice(0, MAX_NUMBERED_TRIES));
    expect(deduplicateName("a.txt", taken)).toBe(`a (${MAX_NUMBERED_TRIES}).txt`);
  });
});
