/**
 * Every child process the sandbox starts (launchers, git, find, rm, chown, cp) is started by one small helper
 * process (spawner-child.ts), not by the server itself.
 *
 * Why: Node forks before it execs, and fork copies the page tables of the whole process. On these virtual
 * machines that costs about 0.08 ms of kernel time per megabyte the process holds (measured: 2 ms at 50 MB,
 * 28 ms at 280 MB, 59 ms at 750 MB), with the server's event loop stopped for all of it, once per command,
 * per quota walk and per git call. The helper stays near 50 MB, so a spawn costs what it costs a fresh Node.
 *
 * The helper is started on first use, one per server process, and does not keep the process alive when idle.
 * If it dies, what it was running is killed and reported as failed, and the next spawn starts a new one. If
 * the server dies, the helper kills what it started before it exits (spawner-child.ts).
 */
import { type ChildProcess, fork } from "node:child_process";
import { EventEmitter } from "node:events";
import { extname } from "node:path";
import { fileURLToPath } from "node:url";

export interface SpawnSpec {
  file: string;
  args: string[];
  cwd?: string;
  env: Record<string, string>;
  /** Pipe the child's stdout (else it goes nowhere). */
  stdout?: boolean;
  /** Pipe the child's stderr (else it goes nowhere). */
  stderr?: boolean;
  /** Written to the child's fds 3, 4, ... and closed. */
  pipes?: Buffer[];
  /** The child leads a process group of its own (so `kill(…, true)` reaches what it starts). */
  detached?: boolean;
  /** Scheduling priority given to the child as soon as it exists. */
  nice?: number;
}

/**
 * A child started by the helper. Events: `spawn` (pid), `stdout` and `stderr` (Buffer chunks, in order),
 * `error` (Error: could not start, or the helper died), then `close` (exit code, signal) exactly once.
 */
export class SpawnedProcess extends EventEmitter {
  pid: number | undefined;
  closed = false;
  readonly id: number;
  private readonly helper: Helper;
  constructor(id: number, helper: Helper) {
    super();
    this.id = id;
    this.helper = helper;
  }

  /** Signals the child, or its whole process group (a `detached` child leads one). */
  kill(signal: NodeJS.Signals = "SIGKILL", group = false): void {
    if (this.closed) return;
    this.helper.send({ op: "kill", id: this.id, signal, group });
  }
}

type HelperMessage =
  | { op: "spawned"; id: number; pid: number }
  | { op: "data"; id: number; fd: 1 | 2; chunk: Uint8Array }
  | { op: "error"; id: number; message: string }
  | { op: "close"; id: number; code: number | null; signal: NodeJS.Signals | null };

/** The helper's module: .ts beside this file in a checkout, .js in the compiled package. */
const helperPath = fileURLToPath(
  new URL(`./spawner-child${extname(fileURLToPath(import.meta.url))}`, import.meta.url),
);

class Helper {
  private readonly running = new Map<number, SpawnedProcess>();
  private nextId = 1;
  readonly process: ChildProcess;
  dead = false;

  constructor() {
    this.process = fork(helperPath, [], {
      // Not the parent's flags (a test runner's loaders, inspector ports): a plain Node with a small heap.
      execArgv: ["--max-semi-space-size=1"],
      serialization: "advanced",
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    });
    this.process.on("message", (message: HelperMessage) => this.receive(message));
    this.process.on("exit", () => this.died());
    this.process.on("error", () => this.died());
    this.idle();
  }

  /** A message the helper cannot take means the helper is gone: what it runs is failed, never left waiting. */
  send(message: unknown): void {
    if (this.dead) return;
    if (!this.process.connected) {
      this.died();
      return;
    }
    this.process.send(message as object, (error) => {
      if (error) this.died();
    });
  }

  spawn(spec: SpawnSpec): SpawnedProcess {
    const child = new SpawnedProcess(this.nextId++, this);
    this.running.set(child.id, child);
    this.busy();
    this.send({
      op: "spawn",
      id: child.id,
      file: spec.file,
      args: spec.args,
      cwd: spec.cwd,
      env: spec.env,
      stdout: spec.stdout ?? false,
      stderr: spec.stderr ?? false,
      pipes: spec.pipes ?? [],
      detached: spec.detached ?? false,
      nice: spec.nice,
    });
    return child;
  }

  private receive(message: HelperMessage): void {
    const child = this.running.get(message.id);
    if (!child) return;
    if (message.op === "spawned") {
      child.pid = message.pid;
      child.emit("spawn", message.pid);
    } else if (message.op === "data") {
      const chunk = Buffer.from(message.chunk.buffer, message.chunk.byteOffset, message.chunk.byteLength);
      child.emit(message.fd === 1 ? "stdout" : "stderr", chunk);
    } else if (message.op === "error") {
      fail(child, message.message);
    } else {
      this.finish(child, message.code, message.signal);
    }
  }

  private finish(child: SpawnedProcess, code: number | null, signal: NodeJS.Signals | null): void {
    this.running.delete(child.id);
    child.closed = true;
    child.emit("close", code, signal);
    if (this.running.size === 0) this.idle();
  }

  /** The helper is gone: nothing it started may run on unwatched. */
  died(): void {
    if (this.dead) return;
    this.dead = true;
    if (current === this) current = undefined;
    for (const child of [...this.running.values()]) {
      if (child.pid !== undefined) {
        for (const target of [-child.pid, child.pid]) {
          try {
            process.kill(target, "SIGKILL");
          } catch {
            // Not a group leader, or already gone.
          }
        }
      }
      // On the next tick: a child failed inside spawn() gets its listeners first.
      process.nextTick(() => {
        fail(child, "the spawner process ended while the command ran");
        this.finish(child, null, "SIGKILL");
      });
    }
  }

  /** Nothing in flight: the helper must not keep the server's process alive. */
  private idle(): void {
    this.process.unref();
    this.process.channel?.unref();
  }

  private busy(): void {
    this.process.ref();
    this.process.channel?.ref();
  }
}

let current: Helper | undefined;

/** An `error` event for whoever listens (an EventEmitter throws one nobody listens to). */
function fail(child: SpawnedProcess, message: string): void {
  if (child.listenerCount("error") > 0) child.emit("error", new Error(message));
}

/** The running helper's pid (for tests and diagnostics); undefined before the first spawn. */
export function spawnerProcessId(): number | undefined {
  return current?.dead === false ? current.process.pid : undefined;
}

/** Starts a child process through the helper (started on first use). */
export function spawnProcess(spec: SpawnSpec): SpawnedProcess {
  if (current && !current.dead && !current.process.connected) current.died();
  if (!current || current.dead) current = new Helper();
  return current.spawn(spec);
}

export interface CollectedRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: Buffer;
  /** Killed at `timeoutMs`. */
  timedOut: boolean;
  /** Killed because stdout or stderr passed `maxBuffer`. */
  overflowed: boolean;
  /** Could not start (or the helper died). */
  error?: string;
}

/** Runs a child to its end, collecting stdout and stderr (like execFile): killed at `timeoutMs` or past `maxBuffer`. */
export function runCollected(
  spec: SpawnSpec & { timeoutMs: number; maxBuffer: number },
): Promise<CollectedRun> {
  return new Promise((resolve) => {
    const child = spawnProcess({ ...spec, stdout: true, stderr: true });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const size = { out: 0, err: 0 };
    let timedOut = false;
    let overflowed = false;
    let error: string | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, spec.timeoutMs);
    const take = (into: Buffer[], key: "out" | "err") => (chunk: Buffer) => {
      size[key] += chunk.length;
      if (size[key] > spec.maxBuffer) {
        if (!overflowed) child.kill("SIGKILL");
        overflowed = true;
        return;
      }
      into.push(chunk);
    };
    child.on("stdout", take(out, "out"));
    child.on("stderr", take(err, "err"));
    child.on("error", (e: Error) => {
      error = e.message;
    });
    child.on("close", (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      resolve({
        code,
        signal,
        stdout: Buffer.concat(out),
        stderr: Buffer.concat(err),
        timedOut,
        overflowed,
        ...(error === undefined ? {} : { error }),
      });
    });
  });
}
