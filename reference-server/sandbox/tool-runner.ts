/**
 * The four tools of a turn. run_command is always a child process (in bubblewrap unless the server
 * was started unsafe), as the sandbox user, in its own cgroup; the file tools run in-process, resolving
 * paths race-free beneath the working directory (beneath.ts), and only while no command of the turn runs
 * (the manager serialises a conversation's tool calls and reaps every command before the next call).
 */
import { constants } from "node:fs";
import { type FileHandle, open, opendir } from "node:fs/promises";
import { at, resolveBeneath, withBeneath } from "./beneath.ts";
import type { CgroupSupport } from "./cgroups.ts";
import { type DiskQuota, exceededMessage } from "./disk-quota.ts";
import { SANDBOX_WORKDIR } from "./isolation.ts";
import { launchSpec } from "./launcher.ts";
import type { SandboxLimits } from "./limits.ts";
import { runProcess } from "./process-runner.ts";
import { relativeComponents, SandboxPathError } from "./safe-paths.ts";
import type { HostUser } from "./sandbox-user.ts";
import { anySignal } from "./signals.ts";
import type { ToolName, ToolOutcome, ToolRunner } from "./types.ts";

export type IsolationMode = "bwrap" | "none" | "unavailable";

const REFUSED_NO_ISOLATION =
  "tool execution refused: no isolation available (start with --unsafe-no-isolation to allow)";

/** The refusal every tool call gets where no sandbox can be built: what failed and the fix, when known. */
export function refusedNoIsolation(problem: string | null): string {
  return problem === null
    ? REFUSED_NO_ISOLATION
    : `tool execution refused: no isolation available: ${problem} (or start the server with --unsafe-no-isolation to run tools unisolated)`;
}

/** Largest write_file content accepted (the attachment cap, for symmetry). */
const MAX_WRITE_BYTES = 10 * 1024 * 1024;
const MAX_LISTED_ENTRIES = 1000;
const SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
/**
 * The launcher's own wall clock fires this long after the server's: the server's, which says "timed out", is
 * the one that acts while it can; the launcher's holds when the server cannot (dead or stalled).
 */
const WALL_CLOCK_GRACE_MS = 1_000;
/** Exit status of a command the launcher's wall clock killed (128 + SIGKILL). */
const KILLED_STATUS = 137;
/**
 * How often the launcher measures the working directory itself (the backstop while the server cannot): less
 * often than the server, whose check does the work while it runs.
 */
const LAUNCHER_QUOTA_POLL_MS = 1_000;
/** How often a running command's working directory is measured against the disk quota. */
const QUOTA_POLL_MS = 250;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Links were resolved by hand; the final open follows none and never blocks (a FIFO fails at once). */
const OPEN_SAFELY = constants.O_NOFOLLOW | constants.O_NONBLOCK;

export interface ToolRunnerOptions {
  workdir: string;
  isolation: IsolationMode;
  /** Why isolation is unavailable (bubblewrap's failure or the user switch's), for the refusal; null if unknown. */
  isolationProblem: string | null;
  secrets: Record<string, string>;
  timeoutMs: number;
  outputCapBytes: number;
  /** The bubblewrap executable (isolation "bwrap"). */
  bwrapCommand: string;
  setprivCommand: string | null;
  /** coreutils `timeout`, absolute: the wall clock held in the command's own launcher; null where not found. */
  timeoutCommand: string | null;
  /** setpriv has `--pdeathsig`. */
  parentDeathSignal: boolean;
  /** The host user commands run as, and who owns what the file tools create; null = the server's. */
  user: HostUser | null;
  limits: SandboxLimits;
  cgroups: CgroupSupport;
  disk: DiskQuota;
}

const ok = (content: string): ToolOutcome => ({ content, isError: false });
const fail = (content: string): ToolOutcome => ({ content, isError: true });

function truncationMarker(droppedBytes: number): string {
  return `\n[output truncated: ${droppedBytes} more bytes not shown]`;
}

export function createToolRunner(options: ToolRunnerOptions): ToolRunner {
  return {
    async run(name: ToolName, input: Record<string, unknown>, signal?: AbortSignal): Promise<ToolOutcome> {
      if (options.isolation === "unavailable") return fail(refusedNoIsolation(options.isolationProblem));
      if (signal?.aborted) return fail("tool call cancelled: the turn ended");
      try {
        switch (name) {
          case "write_file":
            return await writeFileTool(options, input);
          case "read_file":
            return await readFileTool(options, input);
          case "list_files":
            return await listFilesTool(options, input);
          case "run_command":
            return await runCommandTool(options, input, signal);
          default:
            return fail(`unknown tool: ${String(name)}`);
        }
      } catch (error) {
        if (error instanceof SandboxPathError) return fail(error.message);
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "EISDIR") return fail("is a directory");
        if (code === "ENOTDIR") return fail("not a directory");
        if (code === "ENOENT")
          return fail(`no such file or directory${typeof input.path === "string" ? `: ${input.path}` : ""}`);
        if (code === "ENXIO" || code === "ELOOP") return fail("not a regular file");
        throw error;
      }
    },
  };
}

async function writeFileTool(
  options: ToolRunnerOptions,
  input: Record<string, unknown>,
): Promise<ToolOutcome> {
  if (typeof input.content !== "string") return fail("write_file needs a string `content`");
  const bytes = Buffer.byteLength(input.content);
  if (bytes > MAX_WRITE_BYTES) return fail(`content too large: ${bytes} bytes (limit ${MAX_WRITE_BYTES})`);
  const parts = relativeComponents(input.path);
  if (parts.length === 0) return fail("write_file needs a file path");
  if (!(await options.disk.fits(bytes)))
    return fail(
      exceededMessage(options.disk.limitBytes - (await options.disk.remaining()), options.disk.limitBytes),
    );
  const content = input.content;
  const resolve = { create: true, followLast: true, owner: options.user };
  await withBeneath(options.workdir, parts, resolve, async ({ dir, name }) => {
    if (name === "") throw new SandboxPathError(`is a directory: ${parts.join("/")}`);
    // O_NONBLOCK: a FIFO the turn made at this name fails at once (ENXIO) instead of blocking the server.
    const handle = await open(at(dir, name), constants.O_WRONLY | constants.O_CREAT | OPEN_SAFELY, 0o644);
    try {
      if (!(await handle.stat()).isFile())
        throw new SandboxPathError(`not a regular file: ${parts.join("/")}`);
      await handle.truncate(0);
      await handle.writeFile(content);
      if (options.user) await handle.chown(options.user.uid, options.user.gid);
    } finally {
      await handle.close();
    }
  });
  // Directories made on the way count against the file quota: the next write measures again.
  options.disk.forget();
  return ok(`wrote ${bytes} bytes to ${parts.join("/")}`);
}

async function readFileTool(
  options: ToolRunnerOptions,
  input: Record<string, unknown>,
): Promise<ToolOutcome> {
  const parts = relativeComponents(input.path);
  const resolve = { create: false, followLast: true, owner: null };
  return withBeneath(options.workdir, parts, resolve, async ({ dir, name }) => {
    if (name === "") return fail("is a directory");
    // Opened without blocking and checked before reading: a FIFO (or anything but a regular file) the
    // turn left here is refused, and only the part that will be shown is read, however large the file.
    const handle = await open(at(dir, name), constants.O_RDONLY | OPEN_SAFELY);
    try {
      const stats = await handle.stat();
      if (stats.isDirectory()) return fail("is a directory");
      if (!stats.isFile()) return fail(`not a regular file: ${parts.join("/")}`);
      const shown = Buffer.alloc(Math.min(stats.size, options.outputCapBytes));
      let filled = 0;
      while (filled < shown.length) {
        const { bytesRead } = await handle.read(shown, filled, shown.length - filled, filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      const text = shown.subarray(0, filled).toString("utf8");
      if (stats.size <= options.outputCapBytes) return ok(text);
      return ok(text + truncationMarker(stats.size - options.outputCapBytes));
    } finally {
      await handle.close();
    }
  });
}

/** Opens the directory `name` of `dir` ("" = `dir` itself) without following a link. */
async function openListedDirectory(dir: FileHandle, name: string): Promise<FileHandle | null> {
  if (name === "") return open(`/proc/self/fd/${dir.fd}`, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    return await open(at(dir, name), constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ENOENT: a name that is not valid UTF-8 comes back from readdir with U+FFFD and cannot be opened by it;
    // it is listed, not entered.
    if (code === "ENOTDIR" || code === "ELOOP" || code === "ENOENT") return null;
    throw error;
  }
}

/** Opens the directory `names` below `top` (a new descriptor, also for `[]`); null when it is not one any more. */
async function openBelow(top: FileHandle, names: string[]): Promise<FileHandle | null> {
  let current = await openListedDirectory(top, "");
  for (const name of names) {
    if (current === null) return null;
    const next: FileHandle | null = await openListedDirectory(current, name).finally(() => current?.close());
    current = next;
  }
  return current;
}

/**
 * Breadth-first, so a deep tree still shows its top levels; entries are read a batch at a time (never a
 * whole huge directory at once, which would stall the server) and reading stops at the entry limit.
 */
async function listFilesTool(
  options: ToolRunnerOptions,
  input: Record<string, unknown>,
): Promise<ToolOutcome> {
  const parts = input.path === undefined || input.path === "" ? [] : relativeComponents(input.path);
  const start = await resolveBeneath(options.workdir, parts, {
    create: false,
    followLast: true,
    owner: null,
  });
  const listed: string[] = [];
  let more = false;
  // Paths, not entries, are what cost: a chain of 1000 directories with 255-byte names lists 100+ MB.
  let listedBytes = 0;
  let cut = false;
  const add = (line: string) => {
    listedBytes += Buffer.byteLength(line) + 1;
    if (listedBytes > options.outputCapBytes) {
      cut = true;
      more = true;
      return;
    }
    listed.push(line);
  };
  try {
    const top = await openListedDirectory(start.dir, start.name);
    if (top === null) return fail(`not a directory: ${parts.join("/")}`);
    // Directories waiting in the queue are names, not open descriptors (999 subdirectories held 999 of the
    // server's): each is opened when its turn comes, one component at a time below `top`, never following a link.
    const queue: Array<{ names: string[]; rel: string }> = [{ names: [], rel: "" }];
    try {
      while (queue.length > 0 && !more) {
        const { names, rel } = queue.shift() as { names: string[]; rel: string };
        const handle = await openBelow(top, names);
        if (handle === null) continue;
        const entries: Array<{ name: string; isDirectory: boolean }> = [];
        try {
          const reader = await opendir(`/proc/self/fd/${handle.fd}`, { bufferSize: 256 });
          try {
            for await (const entry of reader) {
              if (listed.length + entries.length >= MAX_LISTED_ENTRIES) {
                more = true;
                break;
              }
              entries.push({ name: entry.name, isDirectory: entry.isDirectory() });
            }
          } finally {
            await reader.close().catch(() => undefined);
          }
        } finally {
          await handle.close();
        }
        entries.sort((a, b) => a.name.localeCompare(b.name));
        for (const entry of entries) {
          const childRel = rel ? `${rel}/${entry.name}` : entry.name;
          if (cut) break;
          if (!entry.isDirectory) {
            add(childRel);
            continue;
          }
          add(`${childRel}/`);
          if (!more) queue.push({ names: [...names, entry.name], rel: childRel });
        }
      }
    } finally {
      await top.close();
    }
  } finally {
    await start.close();
  }
  if (cut) listed.push(`[listing stopped at the output limit of ${options.outputCapBytes} bytes]`);
  else if (more) listed.push(`[listing stopped at ${MAX_LISTED_ENTRIES} entries]`);
  return ok(listed.length === 0 ? "(empty)" : listed.join("\n"));
}

/** PATH, HOME, LANG and the agent's secrets: nothing of the server's own environment. */
export function commandEnvironment(home: string, secrets: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = { PATH: SANDBOX_PATH, HOME: home, LANG: "C.UTF-8" };
  for (const [name, value] of Object.entries(secrets)) {
    if (ENV_NAME.test(name) && typeof value === "string" && !value.includes("\0")) env[name] = value;
  }
  return env;
}

async function runCommandTool(
  options: ToolRunnerOptions,
  input: Record<string, unknown>,
  signal: AbortSignal | undefined,
): Promise<ToolOutcome> {
  const command = input.command;
  if (typeof command !== "string" || command.trim() === "")
    return fail("run_command needs a non-empty `command`");
  if (command.includes("\0")) return fail("command must not contain NUL");
  const sandboxed = options.isolation === "bwrap";
  const env = commandEnvironment(sandboxed ? SANDBOX_WORKDIR : options.workdir, options.secrets);
  const common: {
    cwd: string;
    timeoutMs: number;
    outputCapBytes: number;
    signal: AbortSignal | undefined;
  } = {
    // The launcher's cwd becomes its PWD, which the sandbox can read in /proc/1/environ: not the host path.
    cwd: sandboxed ? "/" : options.workdir,
    timeoutMs: options.timeoutMs,
    outputCapBytes: options.outputCapBytes,
    signal,
  };
  let result: Awaited<ReturnType<typeof runProcess>>;
  const startedAt = performance.now();
  // RLIMIT_FSIZE bounds each file; many files written at once are caught by measuring while it runs.
  const overQuota = new AbortController();
  const watch = setInterval(() => {
    void options.disk.poll().then((exceeded) => {
      if (exceeded !== null) overQuota.abort();
    });
  }, QUOTA_POLL_MS);
  common.signal = signal ? anySignal(signal, overQuota.signal) : overQuota.signal;
  if (sandboxed) {
    const cgroup = await options.cgroups.create(options.limits);
    try {
      const fileSizeBytes = await options.disk.remaining();
      const usage = await options.disk.usage();
      const spec = launchSpec({
        bwrapCommand: options.bwrapCommand,
        setprivCommand: options.setprivCommand,
        workdir: options.workdir,
        command,
        env,
        user: options.user,
        limits: options.limits,
        procsFiles: cgroup?.procsFiles ?? [],
        fileSizeBytes,
        quotaWatch: {
          limitBytes: options.disk.limitBytes,
          limitFiles: options.disk.limitFiles,
          usedBytes: usage.bytes,
          usedFiles: usage.files,
          intervalMs: LAUNCHER_QUOTA_POLL_MS,
        },
        memoryRlimit: cgroup === null,
        outputCapBytes: options.outputCapBytes,
        parentDeathSignal: options.parentDeathSignal,
        wallClock:
          options.timeoutCommand === null
            ? null
            : { timeoutCommand: options.timeoutCommand, limitMs: options.timeoutMs + WALL_CLOCK_GRACE_MS },
      });
      // The launcher starts with an empty environment; the sandbox's variables go through fd 3.
      result = await runProcess({
        ...common,
        file: spec.file,
        args: spec.args,
        env: {},
        pipes: spec.pipes,
        reap: cgroup?.killAll,
        drained: true,
      });
    } finally {
      // Its members are gone already (runProcess reaps them before it returns); the empty group's directory
      // goes in the background, off the turn's path.
      void cgroup?.remove();
    }
  } else {
    result = await runProcess({ ...common, file: "/bin/sh", args: ["-c", command], env });
  }
  clearInterval(watch);
  if (result.spawnError !== undefined) return fail(`command could not be started: ${result.spawnError}`);
  let content = result.output;
  if (result.droppedBytes > 0) content += truncationMarker(result.droppedBytes);
  const quota = await options.disk.remeasure();
  if (quota !== null) content += `\n${quota}`;
  // Killed by the launcher's own quota check: the server's came late (its event loop was held).
  const quotaKilled =
    sandboxed && result.signal === "SIGKILL" && quota !== null && !result.timedOut && !result.aborted;
  if ((result.aborted && overQuota.signal.aborted) || quotaKilled)
    return fail(`${content}\n[command killed: it filled the disk quota]`);
  if (result.aborted) return fail(`${content}\n[command cancelled: the turn ended]`);
  // Killed by the launcher's wall clock: the server's own timer came late (its event loop was held).
  const clockKilled =
    sandboxed &&
    options.timeoutCommand !== null &&
    result.exitCode === KILLED_STATUS &&
    performance.now() - startedAt >= options.timeoutMs;
  if (result.timedOut || clockKilled)
    return fail(`${content}\n[command timed out after ${options.timeoutMs} ms and was killed]`);
  if (result.signal !== null) return fail(`${content}\n[command killed by ${result.signal}]`);
  if (result.exitCode !== 0) return fail(`${content}\n[exit code ${result.exitCode}]`);
  if (quota !== null) return fail(content);
  return ok(content);
}
