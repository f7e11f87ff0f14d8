/**
 * The spawner process (see spawner.ts): a small Node process that starts the server's child processes on
 * request, over its IPC channel, and reports their output and end. Forking it costs a fraction of forking
 * the server: fork copies the page tables of the whole process, which takes tens of milliseconds of kernel
 * time from a server of a few hundred megabytes on a virtual machine, with the event loop stopped meanwhile.
 *
 * Self-contained (Node built-ins only, erasable types): it runs as .ts from a checkout and as .js from the
 * installed package.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { setPriority } from "node:os";

interface SpawnRequest {
  op: "spawn";
  id: number;
  file: string;
  args: string[];
  cwd?: string;
  env: Record<string, string>;
  stdout: boolean;
  stderr: boolean;
  pipes: Uint8Array[];
  detached: boolean;
  nice?: number;
}

interface KillRequest {
  op: "kill";
  id: number;
  signal: NodeJS.Signals;
  group: boolean;
}

const children = new Map<number, ChildProcess>();

function send(message: unknown): void {
  // The server is gone when the channel is: disconnect below ends this process.
  if (process.connected) process.send?.(message);
}

function start(request: SpawnRequest): void {
  let child: ChildProcess;
  try {
    child = spawn(request.file, request.args, {
      cwd: request.cwd,
      env: request.env,
      stdio: [
        "ignore",
        request.stdout ? "pipe" : "ignore",
        request.stderr ? "pipe" : "ignore",
        ...request.pipes.map(() => "pipe" as const),
      ],
      detached: request.detached,
    });
  } catch (error) {
    send({ op: "error", id: request.id, message: (error as Error).message });
    send({ op: "close", id: request.id, code: null, signal: null });
    return;
  }
  children.set(request.id, child);
  if (child.pid !== undefined) {
    if (request.nice !== undefined) {
      try {
        setPriority(child.pid, request.nice);
      } catch {
        // A courtesy, not a requirement.
      }
    }
    send({ op: "spawned", id: request.id, pid: child.pid });
  }
  for (const [index, payload] of request.pipes.entries()) {
    const pipe = child.stdio[3 + index] as NodeJS.WritableStream;
    // The child may die before reading it: that is reported by its exit, not here.
    pipe.on("error", () => undefined);
    pipe.end(Buffer.from(payload));
  }
  child.stdout?.on("data", (chunk: Buffer) => send({ op: "data", id: request.id, fd: 1, chunk }));
  child.stderr?.on("data", (chunk: Buffer) => send({ op: "data", id: request.id, fd: 2, chunk }));
  child.on("error", (error) => send({ op: "error", id: request.id, message: error.message }));
  child.on("close", (code, signal) => {
    children.delete(request.id);
    send({ op: "close", id: request.id, code, signal });
  });
}

function kill(request: KillRequest): void {
  const child = children.get(request.id);
  if (child?.pid === undefined) return;
  try {
    if (request.group) process.kill(-child.pid, request.signal);
    else child.kill(request.signal);
  } catch {
    // Already gone.
  }
}

process.on("message", (message: SpawnRequest | KillRequest) => {
  if (message.op === "spawn") start(message);
  else if (message.op === "kill") kill(message);
});
/**
 * The server ended (SIGKILL included: the kernel closes the channel) or dropped us: nothing we started may run
 * on unwatched, past limits only the server kept. Each child is killed with its process group (a `detached`
 * child leads one: a sandbox launcher, whose wall clock and bubblewrap then take the sandbox with them).
 */
function killAll(): void {
  for (const child of children.values()) {
    if (child.pid === undefined) continue;
    for (const target of [-child.pid, child.pid]) {
      try {
        process.kill(target, "SIGKILL");
      } catch {
        // Not a group leader, or already gone.
      }
    }
  }
}

process.on("disconnect", () => {
  killAll();
  process.exit(0);
});
