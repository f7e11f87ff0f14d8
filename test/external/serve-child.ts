/**
 * The reference server's demo in a child process (so a crash is observed, not suffered): prints one line
 * `READY {"url": ..., "envVars": {...}}` once it listens, then its pino log lines (level from argv[2],
 * default "error": only failures, with their stack). Stops cleanly on SIGTERM and removes its data dir.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer } from "../../reference-server/index.ts";

const logLevel = process.argv[2] ?? "error";
const sessionDelayMs = Number(process.argv[3] ?? "300");
const dataDir = await mkdtemp(join(tmpdir(), "agent-api-fuzz-"));
const server = await startServer({
  dataDir,
  port: 0,
  host: "127.0.0.1",
  demo: true,
  sessionDelayMs,
  logLevel,
});
process.stdout.write(`READY ${JSON.stringify({ url: server.url, envVars: server.envVars })}\n`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await server.close();
  await rm(dataDir, { recursive: true, force: true });
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
