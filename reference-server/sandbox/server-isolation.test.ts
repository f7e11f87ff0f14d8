/**
 * What a tool can and cannot reach, seen end to end through the reference server over real HTTP: the
 * server's files and database, other conversations, the host's /etc and /root, the server's environment,
 * processes and network, /proc; attachments with hostile names and past the caps; and the server without
 * bubblewrap (a real `agent-api serve` child process whose PATH has no bwrap). Nothing is mocked.
 */
import { createHash, randomUUID } from "node:crypto";
import { accessSync, constants, existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, stat, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SOURCE_CONDITION_FLAG } from "../../scripts/source-condition.ts";
import {
  type Attachment,
  base64,
  getTranscript,
  onlyToolResult,
  onlyToolResultOf,
  PHRASES,
  removeDir,
  type SandboxServer,
  sendTurn,
  sleep,
  startSandboxServer,
  startServeCommand,
  toolResults,
  toolsCalled,
} from "../test/sandbox-server.ts";
import { resolveExecutable } from "./isolation.ts";
import { SANDBOX_UID_BASE } from "./sandbox-user.ts";

/** Set in the test process before the server starts, so the server's environment holds it. */
const CANARY_NAME = "E2E_SERVER_ONLY_CANARY";
const CANARY_VALUE = `canary-${randomUUID()}`;

/** Starts a process in its own session that writes late.txt a second later; returns once it has detached. */
const DETACH =
  "nohup setsid sh -c 'echo > ready.txt; sleep 1; echo late > late.txt' >/dev/null 2>&1 & " +
  "while [ ! -e ready.txt ]; do sleep 0.02; done; echo started";

const started: SandboxServer[] = [];
async function server(options: Parameters<typeof startSandboxServer>[0] = {}): Promise<SandboxServer> {
  const s = await startSandboxServer(options);
  started.push(s);
  return s;
}
let main: SandboxServer;
beforeAll(async () => {
  process.env[CANARY_NAME] = CANARY_VALUE;
  main = await server();
});
afterAll(async () => {
  delete process.env[CANARY_NAME];
  for (const s of started) await s.close().catch(() => undefined);
  for (const s of started) await removeDir(s.dataDir);
});

const conversationDir = (s: SandboxServer, id: string) =>
  path.join(s.dataDir, "sandboxes", "conversations", createHash("sha256").update(id).digest("hex"));

async function run(s: SandboxServer, agent: string, id: string, command: string) {
  return onlyToolResult(await s.turn(agent, PHRASES.run(command), { conversation_id: id }));
}

describe("a tool cannot reach outside its sandbox", { tags: ["sandbox"] }, () => {
  it("cannot read the server's database, the data directory, another conversation's files, /etc/shadow or /root", async () => {
    expect(main.server.isolation).toBe("bwrap");
    const secret = `only-a-${randomUUID()}`;
    await main.turn("demo-agent", PHRASES.write("secret.txt", secret), { conversation_id: "iso-a" });
    const aFile = path.join(conversationDir(main, "iso-a"), "secret.txt");
    const sqlite = path.join(main.dataDir, "agent-api.sqlite");
    // All of these exist on the host, so each refusal below is the sandbox's doing.
    expect(await readFile(aFile, "utf8")).toBe(secret);
    expect(existsSync(sqlite)).toBe(true);
    expect(existsSync("/etc/shadow") || existsSync("/etc/passwd")).toBe(true);

    for (const command of [
      `cat ${sqlite}`,
      `ls ${main.dataDir}`,
      `cat ${aFile}`,
      `ls ${path.dirname(conversationDir(main, "iso-a"))}`,
      "cat /etc/shadow",
      "cat /etc/passwd",
      "ls /root",
      "ls /home",
    ]) {
      const out = await run(main, "demo-agent", "iso-b", command);
      expect(out, command).toMatchObject({
        is_error: true,
        content: expect.stringContaining("No such file or directory"),
      });
    }
    // The whole root: /usr (read-only) and its links, /dev, /proc, /tmp, /etc (alternatives only), /workspace.
    const root = (await run(main, "demo-agent", "iso-b", "ls -A /")).content.trim().split("\n");
    for (const entry of root)
      expect([
        "bin",
        "sbin",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "usr",
        "dev",
        "proc",
        "tmp",
        "etc",
        "workspace",
      ]).toContain(entry);
    expect((await run(main, "demo-agent", "iso-b", "ls -A /etc")).content).toBe("alternatives\n");
    expect((await run(main, "demo-agent", "iso-b", "touch /usr/x")).content).toContain(
      "Read-only file system",
    );

    // The in-process file tools refuse the same paths and any way out of the working directory.
    for (const target of [
      sqlite,
      aFile,
      "/etc/shadow",
      `../${path.basename(conversationDir(main, "iso-a"))}/secret.txt`,
    ]) {
      const reply = await main.turn("demo-agent", PHRASES.read(`"${target}"`), { conversation_id: "iso-b" });
      expect(onlyToolResult(reply).is_error, target).toBe(true);
      expect(reply.text).not.toContain(secret);
    }
    // A link planted by a command is not followed out of the working directory by the file tools.
    await run(main, "demo-agent", "iso-b", `ln -s ${aFile} link.txt && ln -s ${main.dataDir} data`);
    for (const target of ["link.txt", "data/agent-api.sqlite"]) {
      const reply = await main.turn("demo-agent", PHRASES.read(target), { conversation_id: "iso-b" });
      expect(onlyToolResult(reply), target).toMatchObject({
        is_error: true,
        content: expect.stringContaining("symlink"),
      });
    }
  });

  it("sees none of the server's environment, only PATH, HOME, LANG and the agent's own secrets", async () => {
    expect(process.env[CANARY_NAME]).toBe(CANARY_VALUE); // the server process has it
    const names = (content: string) =>
      content
        .split("\n")
        .filter((line) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(line))
        .map((line) => line.slice(0, line.indexOf("=")))
        .sort();
    const demo = await run(main, "demo-agent", "env-1", "env");
    expect(demo.content).not.toContain(CANARY_NAME);
    expect(demo.content).not.toContain(CANARY_VALUE);
    expect(demo.content).toContain("DEMO_SECRET=demo-secret-value"); // demo-agent's configured secret
    expect(names(demo.content)).toEqual(["DEMO_SECRET", "HOME", "LANG", "PATH", "PWD"]);
    expect(demo.content).toContain("HOME=/workspace\n");

    const notes = await run(main, "notes-agent", "env-2", "env; cat /proc/*/environ | tr '\\0' '\\n'");
    expect(notes.content).not.toContain(CANARY_VALUE);
    expect(notes.content).not.toContain("DEMO_SECRET"); // another agent's secret
    expect([...new Set(names(notes.content))]).toEqual(["HOME", "LANG", "PATH", "PWD"]);
  });

  it("cannot reach the network: no DNS, not even the server's own loopback port", async () => {
    const port = new URL(main.url).port;
    // The port answers from outside the sandbox.
    expect(
      (
        await fetch(`${main.url}/api/agents/demo-agent/v1/models`, {
          headers: { "x-api-key": "demo-admin-key" },
        })
      ).status,
    ).toBe(200);
    const dns = await run(main, "demo-agent", "net-1", "getent hosts example.com");
    expect(dns.is_error).toBe(true);
    const tcp = await run(
      main,
      "demo-agent",
      "net-1",
      `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && echo connected'`,
    );
    expect(tcp.is_error).toBe(true);
    expect(tcp.content).not.toContain("connected");
    expect(tcp.content).toMatch(/Connection refused|Network is unreachable/);
    const links = await run(
      main,
      "demo-agent",
      "net-1",
      "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
    );
    expect(links.content).toBe("lo\n");
  });

  it("sees no process of the server, cannot write /proc (host sysctls), and nothing it starts outlives the call", async () => {
    const ps = await run(
      main,
      "demo-agent",
      "proc-1",
      "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'",
    );
    expect(ps.content).toContain("bwrap"); // the listing works: it shows the sandbox's own processes
    expect(ps.content).not.toMatch(/node|vitest/);
    expect(Number(ps.content.trim().split("\n").at(-1))).toBeLessThan(10);

    // As the host's root, these are writable outside the sandbox; inside, /proc is mounted read-only.
    const sysctls = ["/proc/sys/kernel/core_pattern", "/proc/sys/vm/swappiness", "/proc/sysrq-trigger"];
    if (process.getuid?.() === 0)
      expect(() => accessSync("/proc/sys/vm/swappiness", constants.W_OK)).not.toThrow();
    const writable = await run(
      main,
      "demo-agent",
      "proc-1",
      `for f in ${sysctls.join(" ")}; do test -w $f && echo "writable $f"; done; grep ' /proc ' /proc/self/mountinfo | cut -d' ' -f6 | cut -d, -f1`,
    );
    expect(writable.content).toBe("ro\n");

    // The detached process has left the command's process group and session before the command ends.
    const detached = await run(main, "demo-agent", "proc-2", DETACH);
    expect(detached.content).toBe("started\n");
    await sleep(1_600);
    expect((await run(main, "demo-agent", "proc-2", "ls")).content).toBe("outputs\nready.txt\n");
  });

  it("runs as an unprivileged user of its own (not the server's), without capabilities, within its limits", async () => {
    const id = "whoami-1";
    const out = await run(
      main,
      "demo-agent",
      id,
      "grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status | tr -s '\\t' ' '; id -u; " +
        "grep /workspace /proc/self/mountinfo | cut -d' ' -f6; echo made > made.txt; chmod u+s made.txt",
    );
    const [capEff, capPrm, capBnd, uidLine, workspaceMount] = out.content.trim().split("\n");
    expect([capEff, capPrm, capBnd].sort()).toEqual([
      "CapBnd: 0000000000000000",
      "CapEff: 0000000000000000",
      "CapPrm: 0000000000000000",
    ]);
    const outside = Number(uidLine);
    if (process.getuid?.() === 0) {
      // A root server gives each conversation a uid of its own, far from any real account.
      expect(outside).toBeGreaterThanOrEqual(SANDBOX_UID_BASE);
      const made = await stat(path.join(conversationDir(main, id), "made.txt"));
      expect(made.uid).toBe(outside);
      const other = await run(main, "demo-agent", "whoami-2", "id -u");
      expect(Number(other.content.trim())).not.toBe(outside);
    }
    expect(workspaceMount.split(",")).toContain("nosuid"); // a setuid bit set in the sandbox does nothing there

    // Limits of its own: processes, file size and no core dumps (memory and CPU are in its cgroup).
    const limits = await run(main, "demo-agent", id, "cat /proc/self/limits");
    expect(limits.content).toMatch(/^Max processes\s+256\s+256/m);
    expect(limits.content).toMatch(/^Max core file size\s+0\s+0/m);

    // The host path of the working directory is not in bwrap's command line any more than before; the
    // launcher's own directory is /.
    const environ = await run(main, "demo-agent", id, "tr '\\0' '\\n' < /proc/1/environ");
    expect(environ.content).not.toContain(main.dataDir);
  });

  it("kills a command at the server's tool time limit, with everything it started", async () => {
    const s = await server({ toolTimeoutMs: 300 });
    const started = performance.now();
    const out = await run(s, "demo-agent", "limit-1", "sleep 5 & sleep 5; echo never");
    expect(out.is_error).toBe(true);
    expect(out.content).toContain("command timed out after 300 ms and was killed");
    expect(out.content).not.toContain("never");
    expect(performance.now() - started).toBeLessThan(3_000);
  });
});

describe("one conversation cannot read another conversation's files", () => {
  it("same file name, two conversations, two different files; the other's path is refused", async () => {
    await main.turn("demo-agent", PHRASES.write("notes.txt", "from-a"), { conversation_id: "cross-a" });
    const b = await main.turn("demo-agent", [PHRASES.read("notes.txt"), PHRASES.list()].join("\n"), {
      conversation_id: "cross-b",
    });
    const [read, listing] = toolResults(b);
    expect(read).toMatchObject({ is_error: true, content: "no such file or directory: notes.txt" });
    expect(listing.content).toBe("outputs/");
    await main.turn("demo-agent", PHRASES.write("notes.txt", "from-b"), { conversation_id: "cross-b" });
    const a = await main.turn("demo-agent", PHRASES.read("notes.txt"), { conversation_id: "cross-a" });
    expect(onlyToolResult(a).content).toBe("from-a");
    const breakout = await main.turn(
      "demo-agent",
      PHRASES.read(`"../${path.basename(conversationDir(main, "cross-a"))}/notes.txt"`),
      { conversation_id: "cross-b" },
    );
    expect(onlyToolResult(breakout)).toMatchObject({
      is_error: true,
      content: expect.stringContaining("escapes"),
    });
  });
});

/** Every path below dir, relative, without following links (a test planted one to the data directory). */
async function filesBelow(dir: string, rel = ""): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(path.join(dir, rel), { withFileTypes: true })) {
    const child = path.join(rel, entry.name);
    found.push(child);
    if (entry.isDirectory()) found.push(...(await filesBelow(dir, child)));
  }
  return found;
}

const file = (name: string, data: string | Buffer, mediaType = "text/plain"): Attachment => ({
  name,
  mediaType,
  dataBase64: base64(data),
});

describe("attachments (metadata.attachments)", () => {
  it("hostile names become safe, de-duplicated basenames in .uploads/, and the agent is told what arrived", async () => {
    const passwdBefore = await readFile("/etc/passwd", "utf8").catch(() => "");
    const longName = `${"a".repeat(296)}.txt`;
    const attachments = [
      file("../../x", "c1"),
      file("/etc/passwd", "c2"),
      file("a\u0000b.txt", "c3"),
      file("....", "c4"),
      file(longName, "c5"),
      file("dup.txt", "c6"),
      file("dup.txt", "c7"),
      file("..\\..\\win.txt", "c8"),
      file(".hidden", "c9"),
      file("   ", "c10"),
    ];
    const expected = [
      "x",
      "passwd",
      "ab.txt",
      "attachment",
      `${"a".repeat(196)}.txt`,
      "dup.txt",
      "dup (1).txt",
      "win.txt",
      "hidden",
      "attachment (1)",
    ];
    const id = "attach-names";
    const reply = await main.turn(
      "demo-agent",
      [PHRASES.attachments(), PHRASES.run("ls -A .uploads | wc -l")].join("\n"),
      {
        conversation_id: id,
        attachments,
      },
    );
    expect(reply.text.split("\n\n")[0]).toBe(
      `Attached files: ${expected.map((n) => `.uploads/${n}`).join(", ")}`,
    );
    // The agent listed .uploads/ through its tool, then ran the command.
    expect(toolsCalled(reply)).toEqual(["list_files", "run_command"]);
    expect(onlyToolResultOf(reply, "list_files").content.split("\n").sort()).toEqual([...expected].sort());
    expect(onlyToolResultOf(reply, "run_command").content).toBe("10\n");
    const uploads = path.join(conversationDir(main, id), ".uploads");
    expect((await readdir(uploads)).sort()).toEqual([...expected].sort());
    for (const [i, name] of expected.entries())
      expect(await readFile(path.join(uploads, name), "utf8")).toBe(`c${i + 1}`);
    // Nothing landed anywhere else: the working directory holds only .uploads/ and outputs/.
    expect((await readdir(conversationDir(main, id))).sort()).toEqual([".uploads", "outputs"]);
    expect(await readFile("/etc/passwd", "utf8").catch(() => "")).toBe(passwdBefore);
    const everything = await filesBelow(main.dataDir);
    for (const name of ["x", "win.txt", "passwd"])
      expect(everything.filter((p) => path.basename(p) === name).map((p) => path.dirname(p))).toEqual([
        path.relative(main.dataDir, uploads),
      ]);

    // De-duplicated against earlier turns' files too; the announcement lists only this turn's files.
    const again = await main.turn("demo-agent", PHRASES.attachments(), {
      conversation_id: id,
      attachments: [file("dup.txt", "c11")],
    });
    expect(again.text).toBe("Attached files: .uploads/dup (2).txt");
    const none = await main.turn("demo-agent", PHRASES.attachments(), { conversation_id: id });
    expect(none.text).toBe("No files were attached.");
  });

  it("keeps at most 10 files; anything past them is dropped silently", async () => {
    const eleven = Array.from({ length: 11 }, (_, i) =>
      file(`f${String(i + 1).padStart(2, "0")}.txt`, `n${i + 1}`),
    );
    const reply = await main.turn("demo-agent", PHRASES.attachments(), {
      conversation_id: "attach-11",
      attachments: eleven,
    });
    expect(reply.error).toBeUndefined();
    expect(reply.text).toBe(
      `Attached files: ${eleven
        .slice(0, 10)
        .map((a) => `.uploads/${a.name}`)
        .join(", ")}`,
    );
  });

  it("keeps at most 10 MiB decoded in total: 10 MiB + 1 byte loses the excess entry, a later small one still fits", async () => {
    const MiB = 1024 * 1024;
    const exact = await main.turn(
      "demo-agent",
      [PHRASES.attachments(), PHRASES.run("wc -c < .uploads/big.bin")].join("\n"),
      {
        conversation_id: "attach-size-1",
        attachments: [
          file("big.bin", Buffer.alloc(10 * MiB, 1), "application/octet-stream"),
          file("one.txt", "1"),
        ],
      },
    );
    expect(exact.error).toBeUndefined();
    expect(exact.text.split("\n\n")[0]).toBe("Attached files: .uploads/big.bin");
    expect(toolsCalled(exact)).toEqual(["list_files", "run_command"]);
    expect(onlyToolResultOf(exact, "list_files").content).toBe("big.bin");
    expect(onlyToolResultOf(exact, "run_command").content).toBe(`${10 * MiB}\n`);

    const mixed = await main.turn("demo-agent", PHRASES.attachments(), {
      conversation_id: "attach-size-2",
      attachments: [
        file("six.bin", Buffer.alloc(6 * MiB, 2)),
        file("four-plus-one.bin", Buffer.alloc(4 * MiB + 1, 3)),
        file("three.txt", "abc"),
      ],
    });
    expect(mixed.text).toBe("Attached files: .uploads/six.bin, .uploads/three.txt");
  });

  it("drops a data: prefix and other malformed entries silently", async () => {
    const reply = await main.turn("demo-agent", PHRASES.attachments(), {
      conversation_id: "attach-bad",
      attachments: [
        {
          name: "prefixed.txt",
          mediaType: "text/plain",
          dataBase64: `data:text/plain;base64,${base64("hi")}`,
        },
        { name: "spaced.txt", mediaType: "text/plain", dataBase64: "aGVs bG8=" },
        { name: "unpadded.txt", mediaType: "text/plain", dataBase64: "aGk" },
        { name: "no-type.txt", dataBase64: base64("hi") },
        { name: 42, mediaType: "text/plain", dataBase64: base64("hi") },
        "not an object",
        null,
        file("good.txt", "fine"),
      ],
    });
    expect(reply.error).toBeUndefined();
    expect(reply.text).toBe("Attached files: .uploads/good.txt");
  });
});

/** `agent-api serve` as a child process, reading its stdout until it says which isolation it has. */
async function serveWithoutBwrap(args: string[], dataDir: string) {
  // A PATH with git (the demo and repo agents need it) and no bwrap.
  const bin = path.join(dataDir, "bin");
  await mkdir(bin, { recursive: true });
  await symlink(resolveExecutable("git"), path.join(bin, "git")).catch(() => undefined);
  const cli = new URL("../../conformance/cli/agent-api.ts", import.meta.url).pathname;
  return startServeCommand(
    [
      process.execPath,
      SOURCE_CONDITION_FLAG,
      cli,
      "serve",
      "--demo",
      "--port",
      "0",
      "--data",
      dataDir,
      "--session-delay-ms",
      "100",
      "--log-level",
      "warn",
      ...args,
    ],
    { PATH: bin, [CANARY_NAME]: CANARY_VALUE },
  );
}

describe("where bubblewrap is not available", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await removeDir(dir);
  });

  it("the server says so at start and refuses tools; --unsafe-no-isolation runs them unisolated", async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), "sandbox-e2e-nobwrap-"));
    dirs.push(dataDir);
    const refusing = await serveWithoutBwrap([], dataDir);
    try {
      expect(refusing.stdout()).toContain("Tool isolation: unavailable");
      expect(refusing.stdout()).toContain("bubblewrap (bwrap) is not usable here: tools are refused");
      const reply = await sendTurn(refusing.url, "demo-agent", PHRASES.run("echo hi"), {
        conversation_id: "no-bwrap",
        stream_tool_calls: true,
      });
      // The tool is offered and its call refused with what failed and the fix, which the model relays.
      const refusal =
        "tool execution refused: no isolation available: bubblewrap is not installed (the bwrap command is not on the server's PATH): apt-get install bubblewrap";
      expect(onlyToolResult(reply)).toMatchObject({ is_error: true });
      expect(onlyToolResult(reply).content).toContain(refusal);
      expect(reply.text).toContain(refusal);
      const { events } = await getTranscript(refusing.url, "demo-agent", "no-bwrap");
      expect(events.map((e) => e.type)).toEqual(["tool_use", "tool_result", "text"]);
    } finally {
      await refusing.stop();
    }

    const unsafe = await serveWithoutBwrap(["--unsafe-no-isolation"], dataDir);
    try {
      expect(unsafe.stdout()).toContain("Tool isolation: none");
      expect(unsafe.stdout()).toContain("--unsafe-no-isolation: tools run WITHOUT isolation");
      const port = new URL(unsafe.url).port;
      const reply = await sendTurn(
        unsafe.url,
        "demo-agent",
        PHRASES.run(
          `env; head -c 15 ${path.join(dataDir, "agent-api.sqlite")}; echo; bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && echo connected'; ${DETACH}`,
        ),
        { conversation_id: "unsafe", stream_tool_calls: true },
      );
      const out = onlyToolResult(reply);
      // Still a scrubbed environment, but the file system and the network are the server's.
      expect(out.content).not.toContain(CANARY_VALUE);
      expect(out.content).toContain("DEMO_SECRET=demo-secret-value");
      expect(out.content).toContain("SQLite format 3");
      expect(out.content).toContain("connected");
      await sleep(1_600);
      const later = await sendTurn(unsafe.url, "demo-agent", PHRASES.read("late.txt"), {
        conversation_id: "unsafe",
        stream_tool_calls: true,
      });
      expect(onlyToolResult(later).content).toBe("late\n"); // a detached process outlived its call
    } finally {
      await unsafe.stop();
    }
  });
});
