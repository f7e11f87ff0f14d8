/**
 * The four tools of a turn. run_command is always a child process (in bubblewrap unless the server
 * was started unsafe); the file tools run in-process with strict containment (see safe-paths.ts),
 * which is as safe as a child process here because no sandboxed process outlives its tool call.
 */
import { constants } from "node:fs";
import { open, readdir, stat } from "node:fs/promises";
import path from "node:path";
import { bwrapArgs, SANDBOX_WORKDIR } from "./isolation.ts";
import { runProcess } from "./process-runner.ts";
import { relativeComponents, resolveInside, SandboxPathError } from "./safe-paths.ts";
import type { ToolName, ToolOutcome, ToolRunner } from "./types.ts";

export type IsolationMode = "bwrap" | "none" | "unavailable";

export const REFUSED_NO_ISOLATION =
  "tool execution refused: no isolation available (start with --unsafe-no-isolation to allow)";

/** Largest write_file content accepted (the attachment cap, for symmetry). */
const MAX_WRITE_BYTES = 10 * 1024 * 1024;
const MAX_LISTED_ENTRIES = 1000;
const SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** resolveInside already resolved links inside the working directory; never follow one, never block. */
const OPEN_SAFELY = constants.O_NOFOLLOW | constants.O_NONBLOCK;

export interface ToolRunnerOptions {
  workdir: string;
  isolation: IsolationMode;
  secrets: Record<string, string>;
  timeoutMs: number;
  outputCapBytes: number;
  /** The bubblewrap executable (isolation "bwrap"). */
  bwrapCommand: string;
}

const ok = (content: string): ToolOutcome => ({ content, isError: false });
const fail = (content: string): ToolOutcome => ({ content, isError: true });

function truncationMarker(droppedBytes: number): string {
  return `\n[output truncated: ${droppedBytes} more bytes not shown]`;
}

export function createToolRunner(options: ToolRunnerOptions): ToolRunner {
  return {
    async run(name: ToolName, input: Record<string, unknown>): Promise<ToolOutcome> {
      if (options.isolation === "unavailable") return fail(REFUSED_NO_ISOLATION);
      try {
        switch (name) {
          case "write_file":
            return await writeFileTool(options, input);
          case "read_file":
            return await readFileTool(options, input);
          case "list_files":
            return await listFilesTool(options, input);
          case "run_command":
            return await runCommandTool(options, input);
          default:
            return fail(`unknown tool: ${String(name)}`);
        }
      } catch (error) {
        if (error instanceof SandboxPathError) return fail(error.message);
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "EISDIR") return fail("is a directory");
        if (code === "ENOTDIR") return fail("not a directory");
        if (code === "ENOENT") return fail("no such file or directory");
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
  const target = await resolveInside(options.workdir, parts, true);
  // O_NONBLOCK: a FIFO the turn made at this name fails at once (ENXIO) instead of blocking the server.
  const handle = await open(target, constants.O_WRONLY | constants.O_CREAT | OPEN_SAFELY, 0o666);
  try {
    if (!(await handle.stat()).isFile()) return fail(`not a regular file: ${parts.join("/")}`);
    await handle.truncate(0);
    await handle.writeFile(input.content);
  } finally {
    await handle.close();
  }
  return ok(`wrote ${bytes} bytes to ${parts.join("/")}`);
}

async function readFileTool(
  options: ToolRunnerOptions,
  input: Record<string, unknown>,
): Promise<ToolOutcome> {
  const parts = relativeComponents(input.path);
  const target = await resolveInside(options.workdir, parts, false);
  // Opened without blocking and checked before reading: a FIFO (or anything but a regular file) the
  // turn left here is refused, and only the part that will be shown is read, however large the file.
  const handle = await open(target, constants.O_RDONLY | OPEN_SAFELY);
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
}

async function listFilesTool(
  options: ToolRunnerOptions,
  input: Record<string, unknown>,
): Promise<ToolOutcome> {
  const parts = input.path === undefined || input.path === "" ? [] : relativeComponents(input.path);
  const start = await resolveInside(options.workdir, parts, false);
  if (!(await stat(start)).isDirectory()) return fail(`not a directory: ${parts.join("/")}`);
  const listed: string[] = [];
  let more = false;
  // Breadth-first so a deep tree still shows its top levels within the entry limit.
  const queue: string[] = [""];
  while (queue.length > 0) {
    const rel = queue.shift() as string;
    const entries = await readdir(path.join(start, rel), { withFileTypes: true });
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const entry of entries) {
      if (listed.length >= MAX_LISTED_ENTRIES) {
        more = true;
        break;
      }
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        listed.push(`${childRel}/`);
        queue.push(childRel);
      } else {
        listed.push(childRel);
      }
    }
    if (more) break;
  }
  if (more) listed.push(`[listing stopped at ${MAX_LISTED_ENTRIES} entries]`);
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
): Promise<ToolOutcome> {
  const command = input.command;
  if (typeof command !== "string" || command.trim() === "")
    return fail("run_command needs a non-empty `command`");
  if (command.includes("\0")) return fail("command must not contain NUL");
  const sandboxed = options.isolation === "bwrap";
  const env = commandEnvironment(sandboxed ? SANDBOX_WORKDIR : options.workdir, options.secrets);
  const result = await runProcess(
    sandboxed
      ? {
          file: options.bwrapCommand,
          args: bwrapArgs(options.workdir, env, command),
          cwd: options.workdir,
          // bwrapCommand is an absolute path; the sandbox gets its variables through --setenv.
          env: {},
          timeoutMs: options.timeoutMs,
          outputCapBytes: options.outputCapBytes,
        }
      : {
          file: "/bin/sh",
          args: ["-c", command],
          cwd: options.workdir,
          env,
          timeoutMs: options.timeoutMs,
          outputCapBytes: options.outputCapBytes,
        },
  );
  if (result.spawnError !== undefined) return fail(`command could not be started: ${result.spawnError}`);
  let content = result.output;
  if (result.droppedBytes > 0) content += truncationMarker(result.droppedBytes);
  if (result.timedOut)
    return fail(`${content}\n[command timed out after ${options.timeoutMs} ms and was killed]`);
  if (result.signal !== null) return fail(`${content}\n[command killed by ${result.signal}]`);
  if (result.exitCode !== 0) return fail(`${content}\n[exit code ${result.exitCode}]`);
  return ok(content);
}
