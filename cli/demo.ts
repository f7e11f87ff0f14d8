/**
 * Starts the reference server's demo in-process on a free port (the zero-set-up `agent-api check`, the
 * bench, CI and the tests that judge the server from outside). `agent-api check` imports this module
 * lazily, so a run against a URL never loads the server.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ServerOptions, startServer } from "../reference-server/index.ts";

export interface DemoServer {
  url: string;
  envVars: Record<string, string>;
  close(): Promise<void>;
}

/** `options`: further server options (e.g. `engine: "anthropic"` for the suite against a Messages upstream). */
export async function startDemoServer(
  sessionDelayMs = 500,
  options: Partial<Omit<ServerOptions, "dataDir">> = {},
): Promise<DemoServer> {
  const dataDir = await mkdtemp(join(tmpdir(), "agent-api-demo-"));
  const server = await startServer({
    dataDir,
    port: 0,
    host: "127.0.0.1",
    demo: true,
    sessionDelayMs,
    logLevel: "silent",
    ...options,
  });
  return {
    url: server.url,
    envVars: server.envVars,
    async close() {
      await server.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
