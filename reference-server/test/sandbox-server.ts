/**
 * Shared set-up for the end-to-end sandbox tests: the reference server's demo started in-process on a free
 * loopback port, turns sent over real HTTP, the SSE stream read back into blocks by the suite's grammar of a
 * turn's stream (which also fails a turn whose stream breaks the API's rules), transcripts read.
 * Nothing of the server is replaced: these helpers only speak HTTP to it and look at its data directory.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { rm } from "node:fs/promises";
import { checkTurnStream, wholeBlock } from "../../conformance/sse/grammar.ts";
import { DEMO_ADMIN_KEY as ADMIN_KEY } from "../demo/workspace.ts";
import type { RunningServer, ServerOptions } from "../index.ts";
import { sleep, startTestServer } from "./helpers.ts";

export { PHRASES } from "./helpers.ts";
export { ADMIN_KEY, sleep };

/** One block of the streamed answer, as the grammar's reading assembles it (conformance/sse/grammar.ts). */
export type StreamBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> }
  | { type: "tool_result"; tool_use_id: string; content: string; is_error: boolean };

export interface TurnReply {
  status: number;
  conversationId: string;
  /** Event names in order, e.g. message_start ... message_stop (or error). */
  eventNames: string[];
  blocks: StreamBlock[];
  /** The text blocks joined with blank lines. */
  text: string;
  /** The message of an `error` event, when the turn failed after the stream opened. */
  error: string | undefined;
}

export interface TranscriptEvent {
  turn_index: number;
  type: string;
  [field: string]: unknown;
}

export interface Transcript {
  conversation: Record<string, unknown>;
  messages: Array<{ role: string; content: Array<{ type: string; text: string }> }>;
  events: TranscriptEvent[];
}

export interface Attachment {
  name: string;
  mediaType: string;
  dataBase64: string;
}

export interface SandboxServer {
  server: RunningServer;
  dataDir: string;
  url: string;
  /** The demo's bare repository behind acme-widgets. */
  bareRepo: string;
  turn(agent: string, prompt: string, metadata?: Record<string, unknown>): Promise<TurnReply>;
  transcript(agent: string, conversationId: string): Promise<Transcript>;
  /** The error catalogue's code the server logged for the conversation's newest failed turn (test/helpers.ts). */
  turnFailure(conversationId: string): Promise<string | undefined>;
  close(): Promise<void>;
}

export async function sendTurn(
  url: string,
  agent: string,
  prompt: string,
  metadata: Record<string, unknown> = {},
  key = ADMIN_KEY,
): Promise<TurnReply> {
  const response = await fetch(`${url}/api/agents/${agent}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json" },
    body: JSON.stringify({ stream: true, messages: [{ role: "user", content: prompt }], metadata }),
    signal: AbortSignal.timeout(20_000),
  });
  const body = await response.text();
  if (response.status !== 200) throw new Error(`turn answered ${response.status}: ${body}`);
  // The suite's grammar of a turn's stream reads it: frames, events, blocks, and what breaks the API's rules.
  const reading = checkTurnStream(body, { streamToolCalls: metadata.stream_tool_calls === true });
  const faults = reading.violations.filter((v) => v.severity === "error");
  if (faults.length > 0)
    throw new Error(`the turn's stream breaks the API's grammar: ${faults.map((v) => v.message).join("; ")}`);
  const blocks = reading.blocks.map((block) => wholeBlock(block) as StreamBlock);
  return {
    status: response.status,
    conversationId: response.headers.get("x-conversation-id") ?? "",
    eventNames: reading.events.map((e) => e.name),
    blocks,
    text: blocks.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n\n"),
    error: reading.errorMessage,
  };
}

export async function getTranscript(url: string, agent: string, conversationId: string): Promise<Transcript> {
  const response = await fetch(
    `${url}/api/agents/${agent}/conversations/${encodeURIComponent(conversationId)}/messages`,
    { headers: { "x-api-key": ADMIN_KEY } },
  );
  if (response.status !== 200) throw new Error(`transcript answered ${response.status}`);
  return (await response.json()) as Transcript;
}

/** The tool_result blocks of a turn (it must have streamed them: `stream_tool_calls: true`). */
export function toolResults(reply: TurnReply) {
  return reply.blocks.filter((b) => b.type === "tool_result");
}

/** The single tool result of a one-tool turn. */
export function onlyToolResult(reply: TurnReply): { content: string; is_error: boolean } {
  if (reply.error !== undefined) throw new Error(`turn failed: ${reply.error}`);
  const results = toolResults(reply);
  if (results.length !== 1) throw new Error(`expected one tool_result, got ${JSON.stringify(reply.blocks)}`);
  return results[0];
}

/**
 * The single result of the turn's one call of tool `name` (a turn may call other tools too: `List the
 * attached files` lists .uploads/ with list_files).
 */
export function onlyToolResultOf(reply: TurnReply, name: string): { content: string; is_error: boolean } {
  if (reply.error !== undefined) throw new Error(`turn failed: ${reply.error}`);
  const ids = new Set(reply.blocks.flatMap((b) => (b.type === "tool_use" && b.name === name ? [b.id] : [])));
  const results = toolResults(reply).filter((b) => b.type === "tool_result" && ids.has(b.tool_use_id));
  if (ids.size !== 1 || results.length !== 1)
    throw new Error(`expected one ${name} call and its result, got ${JSON.stringify(reply.blocks)}`);
  return results[0] as { content: string; is_error: boolean };
}

/** The tools a turn called, in order. */
export function toolsCalled(reply: TurnReply): string[] {
  return reply.blocks.flatMap((b) => (b.type === "tool_use" ? [b.name] : []));
}

/**
 * The test servers of test/helpers.ts with what sandbox tests need: a short session delay, turns with tool
 * calls streamed, and the demo's bare repository. `close` keeps the data directory (restart tests reuse it).
 */
export async function startSandboxServer(
  options: Partial<ServerOptions> & { dataDir?: string } = {},
): Promise<SandboxServer> {
  const test = await startTestServer({
    sessionDelayMs: 100,
    // Only matters where bubblewrap does not work: the persistence tests still run (unisolated), and the
    // isolation tests, which need bubblewrap, skip themselves.
    unsafeNoIsolation: true,
    ...options,
  });
  const { server, url } = test;
  return {
    server,
    dataDir: test.dataDir,
    url,
    bareRepo: server.envVars.AGENT_API_REPO_URL,
    turn: (agent, prompt, metadata = {}) =>
      sendTurn(url, agent, prompt, { stream_tool_calls: true, ...metadata }),
    transcript: (agent, id) => getTranscript(url, agent, id),
    turnFailure: (id) => test.turnFailure(id),
    close: () => test.stop(),
  };
}

export interface ServeCommand {
  url: string;
  /** The command's process (bin/agent-api execs Node, so this is the server itself). */
  pid: number;
  /** All it printed so far (the start-up lines: isolation, tool user, warnings). */
  stdout(): string;
  /** SIGTERM to its process group, then waits for it to exit. */
  stop(): Promise<void>;
}

/**
 * `agent-api serve` as users run it, in a child process of its own process group: `command` is the whole
 * command line (the CLI, or a wrapper such as unshare in front of it). Resolves once it has printed its
 * start-up lines, the last of which names the tool user.
 */
export async function startServeCommand(
  command: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<ServeCommand> {
  const [file, ...args] = command;
  const child: ChildProcess = spawn(file, args, { env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const stop = async () => {
    if (!child.pid || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    process.kill(-child.pid, "SIGTERM");
    await exited;
  };
  const deadline = Date.now() + 30_000;
  // The tool-user line, complete: an index scan, not a pattern retried at every "Tool user: ".
  const toolUserLineEnded = () => {
    const at = stdout.indexOf("Tool user: ");
    return at >= 0 && stdout.includes("\n", at);
  };
  while (!toolUserLineEnded()) {
    if (child.exitCode !== null || Date.now() > deadline) {
      if (child.pid && child.exitCode === null) process.kill(-child.pid, "SIGKILL");
      throw new Error(`serve did not start: ${stdout}\n${stderr}`);
    }
    await sleep(50);
  }
  const url = /listening on (http:\/\/\S+)/.exec(stdout)?.[1] as string;
  return { url, pid: child.pid as number, stdout: () => stdout, stop };
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** git against a bare repository, with no user or system config. */
export function bareGit(gitDir: string, ...args: string[]): string {
  return execFileSync("git", [`--git-dir=${gitDir}`, ...args], {
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" },
  });
}

export function base64(data: string | Buffer): string {
  return Buffer.from(data).toString("base64");
}
