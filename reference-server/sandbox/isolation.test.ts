import { readdir, readFile, symlink, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { storageAgent, TestBed, turnRequest } from "./testing.ts";

const bed = new TestBed();
afterEach(() => bed.cleanup());

describe("tools in bubblewrap", { tags: ["sandbox"] }, () => {
  let listener: Server;
  let port = 0;
  let connections = 0;

  beforeAll(async () => {
    listener = createServer((socket) => {
      connections++;
      socket.end("hello from the host\n");
    });
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
    port = (listener.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => listener.close(() => resolve())));

  async function sandboxTurn(overrides: Parameters<TestBed["manager"]>[1] = {}) {
    const manager = await bed.manager(await bed.dir("root"), { unsafeNoIsolation: false, ...overrides });
    expect(manager.isolation).toBe("bwrap");
    return manager.acquire(turnRequest("iso", storageAgent({ secrets: { AGENT_SECRET: "s3cr3t" } })));
  }

  it("runs a command in the working directory, mounted at /workspace", async () => {
    const turn = await sandboxTurn();
    await turn.tools.run("write_file", { path: "hello.txt", content: "from write_file" });
    const outcome = await turn.tools.run("run_command", {
      command: "pwd; cat hello.txt; echo made > new.txt",
    });
    expect(outcome).toEqual({ content: "/workspace\nfrom write_file", isError: false });
    expect((await turn.tools.run("read_file", { path: "/workspace/new.txt" })).content).toBe("made\n");
  });

  it("cannot read a file outside its sandbox", async () => {
    const outside = await bed.dir("outside");
    const secretFile = path.join(outside, "server.db");
    await writeFile(secretFile, "server data");
    const turn = await sandboxTurn();
    const outcome = await turn.tools.run("run_command", { command: `cat ${secretFile}` });
    expect(outcome.isError).toBe(true);
    expect(outcome.content).toContain("No such file or directory");
    const root = await turn.tools.run("run_command", { command: "ls /" });
    expect(root.content.split("\n").sort()).not.toContain("work");
    expect(root.content).not.toContain("home");
    expect((await turn.tools.run("run_command", { command: "cat /etc/passwd" })).isError).toBe(true);
  });

  it("sees only PATH, HOME, LANG and the agent's secrets", async () => {
    process.env.SANDBOX_TEST_CANARY = "server-only-value";
    try {
      const turn = await sandboxTurn();
      const outcome = await turn.tools.run("run_command", { command: "env; cat /proc/1/environ" });
      expect(outcome.content).not.toContain("SANDBOX_TEST_CANARY");
      expect(outcome.content).not.toContain("server-only-value");
      const names = outcome.content
        .replaceAll("\0", "\n")
        .split("\n")
        .filter((line) => /^[A-Z_]+=/.test(line))
        .map((line) => line.slice(0, line.indexOf("=")))
        .filter((name, i, all) => all.indexOf(name) === i)
        .sort();
      expect(names).toEqual(["AGENT_SECRET", "HOME", "LANG", "PATH", "PWD"]);
      expect(outcome.content).toContain("AGENT_SECRET=s3cr3t");
    } finally {
      delete process.env.SANDBOX_TEST_CANARY;
    }
  });

  it("cannot reach the network, not even the host's loopback", async () => {
    const turn = await sandboxTurn();
    const before = connections;
    const outcome = await turn.tools.run("run_command", {
      command: `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3'`,
    });
    expect(outcome.isError).toBe(true);
    expect(outcome.content).not.toContain("hello from the host");
    // bash did try (a shell without /dev/tcp would fail for another reason).
    expect(outcome.content).toMatch(/Connection refused|Network is unreachable/);
    expect((await turn.tools.run("run_command", { command: "getent hosts example.com" })).isError).toBe(true);
    expect(connections).toBe(before);
    // The same connect works from outside the sandbox, so the check above can fail.
    const unsafe = await bed.manager(await bed.dir("root"), { bwrapCommand: "/nonexistent/bwrap" });
    const unsandboxed = await unsafe.acquire(turnRequest("net", storageAgent()));
    const reached = await unsandboxed.tools.run("run_command", {
      command: `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3'`,
    });
    expect(reached.content).toContain("hello from the host");
  });

  it("kills a command at the wall-clock limit, with everything it started", async () => {
    const turn = await sandboxTurn({ toolTimeoutMs: 300 });
    const outcome = await turn.tools.run("run_command", { command: "sleep 60 & sleep 60; echo never" });
    expect(outcome.isError).toBe(true);
    expect(outcome.content).toContain("timed out after 300 ms and was killed");
    expect(outcome.content).not.toContain("never");
  });

  it("caps the output and marks the cut", async () => {
    const turn = await sandboxTurn({ toolOutputCapBytes: 1000 });
    const outcome = await turn.tools.run("run_command", {
      command: "head -c 5000 /dev/zero | tr '\\0' x; echo err >&2",
    });
    expect(outcome.isError).toBe(false);
    expect(outcome.content.startsWith("x".repeat(1000))).toBe(true);
    expect(outcome.content).toContain("[output truncated: 4004 more bytes not shown]");
    const big = await turn.tools.run("write_file", { path: "big.txt", content: "y".repeat(3000) });
    expect(big.isError).toBe(false);
    expect((await turn.tools.run("read_file", { path: "big.txt" })).content).toBe(
      `${"y".repeat(1000)}\n[output truncated: 2000 more bytes not shown]`,
    );
  });

  it("reports a non-zero exit as an error with its code", async () => {
    const turn = await sandboxTurn();
    expect(await turn.tools.run("run_command", { command: "echo partial; exit 3" })).toEqual({
      content: "partial\n\n[exit code 3]",
      isError: true,
    });
  });
});

describe("file tools", () => {
  it("refuse paths and links leading outside the working directory", async () => {
    const outside = await bed.dir("outside");
    await writeFile(path.join(outside, "host.txt"), "host file");
    const manager = await bed.manager(await bed.dir("root"));
    const turn = await manager.acquire(turnRequest("files", storageAgent()));
    await symlink(path.join(outside, "host.txt"), path.join(turn.workdir, "link.txt"));
    await symlink(outside, path.join(turn.workdir, "linkdir"));
    const refused = [
      await turn.tools.run("read_file", { path: "/etc/hostname" }),
      await turn.tools.run("read_file", { path: "../../../etc/hostname" }),
      await turn.tools.run("read_file", { path: "link.txt" }),
      await turn.tools.run("write_file", { path: "link.txt", content: "overwrite host" }),
      await turn.tools.run("write_file", { path: "linkdir/new.txt", content: "outside" }),
      await turn.tools.run("list_files", { path: "linkdir" }),
      await turn.tools.run("read_file", { path: "a\0b" }),
      await turn.tools.run("read_file", { path: 42 }),
      await turn.tools.run("write_file", { path: "x.txt" }),
    ];
    for (const outcome of refused) expect(outcome.isError).toBe(true);
    expect(await readFile(path.join(outside, "host.txt"), "utf8")).toBe("host file");
    expect(await readdir(outside)).toEqual(["host.txt"]);

    await symlink("inner.txt", path.join(turn.workdir, "inner-link"));
    await turn.tools.run("write_file", { path: "inner.txt", content: "inside" });
    expect((await turn.tools.run("read_file", { path: "inner-link" })).content).toBe("inside");
    expect((await turn.tools.run("list_files", {})).content).toBe(
      "inner-link\ninner.txt\nlink.txt\nlinkdir\noutputs/",
    );
  });
});
