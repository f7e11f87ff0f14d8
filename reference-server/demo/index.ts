/**
 * Starts the reference server's demo in-process on a free port: the zero-set-up `agent-api check`, the
 * benchmarks' server processes, the server's own test helper (reference-server/test/helpers.ts) and the
 * tests that judge the server from outside. `agent-api check` imports this module lazily, so a run against
 * a URL never loads the server.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RunningServer, type ServerOptions, startServer } from "../index.ts";

export interface DemoServer {
  url: string;
  envVars: Record<string, string>;
  server: RunningServer;
  dataDir: string;
  /** Stops the server (once); the data directory stays (restart tests start again on it). */
  stop(): Promise<void>;
  /** Stops the server and removes the data directory when this module made it. */
  close(): Promise<void>;
}

/**
 * `options`: further server options (e.g. `engine: "anthropic"` for the suite against a Messages upstream;
 * `dataDir` to run on a directory of the caller's, which `close` then leaves in place).
 */
export async function startDemoServer(
  sessionDelayMs = 500,
  options: Partial<ServerOptions> = {},
): Promise<DemoServer> {
  const made = options.dataDir === undefined;
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "agent-api-demo-")));
  const server = await startServer({
    port: 0,
    host: "127.0.0.1",
    demo: true,
    sessionDelayMs,
    logLevel: "silent",
    ...options,
    dataDir,
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await server.close();
  };
  return {
    url: server.url,
    envVars: server.envVars,
    server,
    dataDir,
    stop,
    async close() {
      await stop();
      if (made) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
