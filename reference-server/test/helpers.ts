/**
 * Shared set-up of the reference server's integration tests: a real server on loopback over a real SQLite
 * file in a fresh temporary data directory, the project's own client bound to it, a raw HTTP helper for
 * what the client cannot send (bad input, missing keys), and a snapshot of everything stored.
 */
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { setTimeout as sleep } from "node:timers/promises";
import {
  type AgentClient,
  createAgentClient,
  type SendMessageRequest,
  type TurnEvent,
} from "@agent-api/client";
import { errorTypes } from "@agent-api/client/protocol";
import { startDemoServer } from "../demo/index.ts";
import { demoKeys } from "../demo/workspace.ts";
import type { RunningServer, ServerOptions } from "../index.ts";

/** The demo's keys (demo/workspace.ts). */
export const KEYS = demoKeys;

/** Prompts of the scripted model's phrases (reference-server/scripted-model/README.md). */
export { PHRASES } from "../scripted-model/phrase-prompts.ts";

export interface TestServer {
  url: string;
  dataDir: string;
  dbFile: string;
  server: RunningServer;
  /** The project's client for one key and agent (defaults: alice, demo-agent). */
  client(key?: string, agent?: string): AgentClient;
  /** The server's log lines of level warn and above, parsed (the newest 1,000), also once it stopped. */
  logLines(): LogLine[];
  /**
   * The error catalogue's code the server logged for the newest failed turn of a conversation (its turn line's
   * `code`), waiting up to 5 s for the line: a turn whose client left logs it once the turn is over.
   */
  turnFailure(conversationId: string): Promise<string | undefined>;
  /** Instructions of a configured agent, as the server loaded them. */
  instructions(agent: string): string;
  /** Stops the server; the data directory stays (restart tests start again on it). */
  stop(): Promise<void>;
  /** Stops the server and removes the data directory. */
  close(): Promise<void>;
}

export type TestServerOptions = Partial<Omit<ServerOptions, "dataDir">> & { dataDir?: string };

/** One JSON line of the server's pino log. */
export type LogLine = Record<string, unknown> & { msg?: string; conversation?: string; code?: string };

const LOG_LINES_KEPT = 1_000;

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "agent-api-it-")));
  const lines: LogLine[] = [];
  // Warn and above only: a turn that did not end with message_stop, a 5xx. pino writes one JSON line per call.
  const logDestination = {
    write(line: string) {
      if (lines.length >= LOG_LINES_KEPT) lines.shift();
      lines.push(JSON.parse(line) as LogLine);
    },
  };
  const { server, stop } = await startDemoServer(300, {
    logLevel: "warn",
    logDestination,
    ...options,
    dataDir,
  });
  const loggedFailure = (conversationId: string) =>
    lines.findLast((line) => line.conversation === conversationId && line.code !== undefined)?.code;
  return {
    url: server.url,
    logLines: () => [...lines],
    async turnFailure(conversationId) {
      const deadline = Date.now() + 5_000;
      while (loggedFailure(conversationId) === undefined && Date.now() < deadline) await sleep(20);
      return loggedFailure(conversationId);
    },
    dataDir,
    dbFile: join(dataDir, "agent-api.sqlite"),
    server,
    client: (key = KEYS.admin, agent = "demo-agent") =>
      createAgentClient({ baseUrl: server.url, apiKey: key, agent }),
    instructions(agent) {
      const found = server.config.agents.find((a) => a.name === agent);
      if (!found) throw new Error(`no agent ${agent} in the server's config`);
      return found.instructions;
    },
    stop,
    async close() {
      await stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export interface TurnResult {
  conversationId: string;
  status: number;
  contentType: string | null;
  events: TurnEvent[];
  /** Concatenated text deltas. */
  text: string;
  /** The model named by message_start. */
  model: string | undefined;
}

/** Runs one turn through the client and reads its stream to the end (throws what the stream throws). */
export async function runTurn(
  client: AgentClient,
  prompt: string | SendMessageRequest,
  metadata?: SendMessageRequest["metadata"],
): Promise<TurnResult> {
  const body: SendMessageRequest =
    typeof prompt === "string"
      ? { stream: true, messages: [{ role: "user", content: prompt }], ...(metadata ? { metadata } : {}) }
      : prompt;
  const turn = await client.sendMessage(body);
  const events: TurnEvent[] = [];
  for await (const event of turn) events.push(event);
  let text = "";
  let model: string | undefined;
  for (const event of events) {
    if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text;
    if (event.type === "message_start") model = event.message.model;
  }
  return {
    conversationId: turn.conversationId,
    status: turn.response.status,
    contentType: turn.response.headers.get("content-type"),
    events,
    text,
    model,
  };
}

export interface RawResponse {
  status: number;
  headers: Headers;
  text: string;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  json: unknown;
}

export interface RawRequest {
  /** X-Api-Key; omitted when undefined. */
  key?: string;
  /** A value to JSON-encode. */
  body?: unknown;
  /** Bytes sent as they are (wins over body). */
  rawBody?: string;
  headers?: Record<string, string>;
}

/** One HTTP request with fetch, for what the typed client deliberately cannot express. */
export async function raw(base: string, method: string, path: string, request: RawRequest = {}) {
  const headers: Record<string, string> = { ...request.headers };
  if (request.key !== undefined) headers["x-api-key"] = request.key;
  let body: string | undefined;
  if (request.rawBody !== undefined) body = request.rawBody;
  else if (request.body !== undefined) body = JSON.stringify(request.body);
  if (body !== undefined) headers["content-type"] ??= "application/json";
  const response = await fetch(`${base}${path}`, { method, headers, body });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json } satisfies RawResponse;
}

/**
 * The reference server's error body for every failure but the revoked key: the messages API's error
 * envelope with the API's `message` beside it, the same text in both.
 */
export function isErrorBody(
  body: unknown,
): body is { type: "error"; message: string; error: { type: string; message: string } } {
  if (!body || typeof body !== "object") return false;
  const b = body as { type?: unknown; message?: unknown; error?: { type?: unknown; message?: unknown } };
  return (
    b.type === "error" &&
    typeof b.message === "string" &&
    b.message.length > 0 &&
    typeof b.error?.type === "string" &&
    (errorTypes as readonly string[]).includes(b.error.type) &&
    b.error.message === b.message
  );
}

/**
 * Everything the server stores, as one comparable value: every row of every table of the SQLite file
 * (read through a second, read-only connection) and the file tree under the sandboxes directory.
 */
export async function snapshotStore(server: TestServer): Promise<unknown> {
  const db = new DatabaseSync(server.dbFile, { readOnly: true });
  const tables: Record<string, unknown[]> = {};
  try {
    const names = db
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      )
      .all() as Array<{ name: string }>;
    for (const { name } of names) {
      // Some tables are WITHOUT ROWID: order the rows by their content instead.
      tables[name] = db
        .prepare(`SELECT * FROM "${name}"`)
        .all()
        .map((row) => JSON.stringify(row))
        .sort();
    }
  } finally {
    db.close();
  }
  return { tables, files: await fileTree(join(server.dataDir, "sandboxes")) };
}

async function fileTree(root: string): Promise<string[]> {
  const out: string[] = [];
  async function walk(dir: string): Promise<void> {
    let entries: import("node:fs").Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const full = join(dir, entry.name);
      if (entry.isDirectory()) {
        out.push(`${relative(root, full)}/`);
        await walk(full);
      } else {
        out.push(`${relative(root, full)} ${(await stat(full)).size}`);
      }
    }
  }
  await walk(root);
  return out.sort();
}

export { sleep };

/** ISO 8601 UTC with milliseconds, as the API's conventions require. */
export const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Unique ids per test run, so tests sharing a server never collide. */
let counter = 0;
export function uid(prefix: string): string {
  counter += 1;
  return `${prefix}-${process.pid}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}

/**
 * Sets process environment variables and returns what puts them back. Test files share a worker
 * (`isolate: false`), so a variable one file sets for its server must not reach the next file's.
 */
export function setEnv(vars: Record<string, string>): () => void {
  const before = Object.fromEntries(Object.keys(vars).map((name) => [name, process.env[name]]));
  Object.assign(process.env, vars);
  return () => {
    for (const [name, value] of Object.entries(before)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
}
