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

/**
 * The list filters' inputs, naming the conversations reference-server/config/demo-data.ts seeds (a Slack
 * thread and a notebook conversation): the API cannot create either, so a check needs them given.
 */
export const DEMO_FILTER_INPUTS: Record<string, string> = {
  AGENT_API_CHANNEL_ID: "C0DEMOOPS",
  AGENT_API_NOTEBOOK_PATH: "notebooks/weekly-report.ipynb",
};

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
    envVars: { ...server.envVars, ...DEMO_FILTER_INPUTS },
    async close() {
      await server.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
