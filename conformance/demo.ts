/**
 * Starts the reference server's demo in-process on a free port (the zero-set-up `agent-api check`, the
 * bench and CI). Imported lazily so the suite works against a URL without the server being present.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface DemoServer {
  url: string;
  envVars: Record<string, string>;
  close(): Promise<void>;
}

interface StartServer {
  startServer(opts: {
    dataDir: string;
    port?: number;
    host?: string;
    demo?: boolean;
    sessionDelayMs?: number;
    logLevel?: string;
  }): Promise<{ url: string; envVars: Record<string, string>; close(): Promise<void> }>;
}

export async function startDemoServer(sessionDelayMs = 500): Promise<DemoServer> {
  const dataDir = await mkdtemp(join(tmpdir(), "agent-api-demo-"));
  // The path is built at run time so TypeScript does not need the server to exist to check this file.
  const modulePath = new URL("../reference-server/index.ts", import.meta.url).href;
  const { startServer } = (await import(modulePath)) as StartServer;
  const server = await startServer({
    dataDir,
    port: 0,
    host: "127.0.0.1",
    demo: true,
    sessionDelayMs,
    logLevel: "silent",
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
