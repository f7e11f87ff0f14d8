/**
 * The spawner (spawner.ts) with real processes: children are forked by the helper, not by this process;
 * output, extra pipes, exit codes, signals and process groups come through as Node's own spawn gives them;
 * a helper that dies takes what it was running with it, and so does a server that dies (SIGKILL included).
 */
import { execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { runCollected, type SpawnedProcess, spawnerProcessId, spawnProcess } from "./spawner.ts";

function closed(child: SpawnedProcess): Promise<[number | null, NodeJS.Signals | null]> {
  return new Promise((resolve) => child.once("close", (code, signal) => resolve([code, signal])));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Running, not a zombie waiting to be reaped. */
function running(pid: number): boolean {
  try {
    return !/^State:\s+[ZX]/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

async function until(condition: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("the spawner", () => {
  it("forks children itself: their parent is the helper, not the server", async () => {
    const run = await runCollected({
      file: "/bin/sh",
      args: ["-c", "echo $PPID"],
      env: {},
      timeoutMs: 10_000,
      maxBuffer: 1024,
    });
    const parent = Number(run.stdout.toString().trim());
    expect(parent).toBe(spawnerProcessId());
    expect(parent).not.toBe(process.pid);
  });

  it("passes no descriptor of its own to a child (its IPC channel stays with it): the same as a direct spawn", async () => {
    const list = "ls /proc/$$/fd";
    const viaSpawner = await runCollected({
      file: "/bin/sh",
      args: ["-c", list],
      env: {},
      timeoutMs: 10_000,
      maxBuffer: 4096,
    });
    const direct = execFileSync("/bin/sh", ["-c", list], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
    const fds = (text: string) => text.split("\n").filter((line) => /^\d+$/.test(line));
    // 0 and 2 are /dev/null and 1 the output pipe in both; anything above is what this test process inherited.
    expect(fds(viaSpawner.stdout.toString())).toEqual(fds(direct));
  });

  it("passes stdout, stderr, the exit code, the environment and the working directory", async () => {
    const run = await runCollected({
      file: "/bin/sh",
      args: ["-c", 'printf "%s|%s" "$GREETING" "$(pwd)"; echo oops >&2; exit 3'],
      cwd: "/tmp",
      env: { GREETING: "hello" },
      timeoutMs: 10_000,
      maxBuffer: 1024,
    });
    expect(run.stdout.toString()).toBe("hello|/tmp");
    expect(run.stderr.toString()).toBe("oops\n");
    expect(run.code).toBe(3);
  });

  it("writes each extra pipe to fds 3, 4, … and closes it", async () => {
    const run = await runCollected({
      file: "/bin/sh",
      args: ["-c", "cat <&3; echo; cat <&4"],
      env: {},
      pipes: [Buffer.from("first"), Buffer.from("second")],
      timeoutMs: 10_000,
      maxBuffer: 1024,
    });
    expect(run.stdout.toString()).toBe("first\nsecond");
  });

  it("kills a whole process group, and stops a run at its time-out or output limit", async () => {
    const child = spawnProcess({
      file: "/bin/sh",
      args: ["-c", "sleep 30 & echo $!; wait"],
      env: {},
      stdout: true,
      detached: true,
    });
    let out = "";
    child.on("stdout", (chunk: Buffer) => {
      out += chunk.toString();
    });
    await until(() => out.includes("\n"));
    const sleeper = Number(out.trim());
    expect(alive(sleeper)).toBe(true);
    child.kill("SIGKILL", true);
    expect((await closed(child))[1]).toBe("SIGKILL");
    await until(() => !alive(sleeper));

    const slow = await runCollected({
      file: "sleep",
      args: ["30"],
      env: {},
      timeoutMs: 200,
      maxBuffer: 1024,
    });
    expect(slow.timedOut).toBe(true);
    const loud = await runCollected({ file: "yes", args: [], env: {}, timeoutMs: 10_000, maxBuffer: 4096 });
    expect(loud.overflowed).toBe(true);
    expect(loud.stdout.length).toBeLessThanOrEqual(4096);
  });

  it("reports a command that cannot start", async () => {
    const run = await runCollected({
      file: "/no/such/program",
      args: [],
      env: {},
      timeoutMs: 10_000,
      maxBuffer: 1024,
    });
    expect(run.error).toMatch(/ENOENT/);
    expect(run.code).not.toBe(0);
  });

  it("gives a child the priority asked for", async () => {
    const run = await runCollected({
      file: "/bin/sh",
      args: ["-c", "sleep 0.2; cut -d ' ' -f 19 /proc/$$/stat"],
      env: {},
      nice: 10,
      timeoutMs: 10_000,
      maxBuffer: 1024,
    });
    expect(run.stdout.toString().trim()).toBe("10");
  });

  it("a helper that dies kills what it ran, reports it, and the next spawn starts a new helper", async () => {
    const child = spawnProcess({ file: "sleep", args: ["30"], env: {}, detached: true });
    const errors: string[] = [];
    child.on("error", (error: Error) => errors.push(error.message));
    await new Promise((resolve) => child.once("spawn", resolve));
    const sleeper = child.pid as number;
    const helper = spawnerProcessId() as number;
    process.kill(helper, "SIGKILL");
    expect(await closed(child)).toEqual([null, "SIGKILL"]);
    expect(errors.join()).toMatch(/spawner process ended/);
    await until(() => !alive(sleeper));
    const again = await runCollected({ file: "true", args: [], env: {}, timeoutMs: 10_000, maxBuffer: 64 });
    expect(again.code).toBe(0);
    expect(spawnerProcessId()).not.toBe(helper);
  });

  it("a server that dies, even by SIGKILL, takes every child of its helper with it", async () => {
    // A stand-in server: a Node process whose helper runs a detached shell (with a background child in its
    // group) and a plain child, and prints their pids.
    const script = `
      import { spawnProcess } from ${JSON.stringify(new URL("./spawner.ts", import.meta.url).href)};
      const pids = [];
      const group = spawnProcess({ file: "/bin/sh", args: ["-c", "sleep 60 & echo $!; wait"], env: {}, detached: true, stdout: true });
      const plain = spawnProcess({ file: "/bin/sleep", args: ["61"], env: {} });
      for (const child of [group, plain]) child.on("spawn", (pid) => pids.push(pid));
      group.on("stdout", (chunk) => pids.push(Number(String(chunk).trim())));
      const ready = setInterval(() => {
        if (pids.length < 3) return;
        clearInterval(ready);
        process.stdout.write(JSON.stringify(pids) + "\\n");
      }, 20);
    `;
    const server = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let output = "";
    server.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    let pids: number[] = [];
    try {
      await until(() => output.includes("\n"), 20_000);
      pids = JSON.parse(output) as number[];
      expect(pids.filter(running)).toHaveLength(3);
      server.kill("SIGKILL");
      await until(() => !pids.some(running), 5_000).catch(() => undefined);
      expect(pids.filter(running)).toEqual([]);
    } finally {
      server.kill("SIGKILL");
      for (const pid of pids.filter(running)) process.kill(pid, "SIGKILL");
    }
  });
});
