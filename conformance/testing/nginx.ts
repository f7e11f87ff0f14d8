/**
 * For tests: a real nginx in front of an upstream, run from a temporary prefix as a child process (no
 * daemon, no system files touched), with the config a test gives. Skipped where nginx is not installed.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { join } from "node:path";

export function nginxAvailable(): boolean {
  try {
    execFileSync("nginx", ["-v"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** A port nothing listens on right now (nginx needs a number in its config). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface Nginx {
  close(): Promise<void>;
}

/**
 * Starts nginx with `serverBlock` (one `server { ... }`) under `dir`; resolves once `port` accepts
 * connections. The surrounding config keeps every path (pid, logs, temp files) inside `dir`;
 * `workerConnections` (default 256) must exceed twice the streams it carries (each holds two connections).
 */
export async function startNginx(
  dir: string,
  port: number,
  serverBlock: string,
  options: { workerConnections?: number } = {},
): Promise<Nginx> {
  mkdirSync(join(dir, "logs"), { recursive: true });
  const config = `
${process.getuid?.() === 0 ? "user root;" : ""}
worker_processes 1;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "logs", "error.log")} warn;
events { worker_connections ${options.workerConnections ?? 256}; }
http {
  access_log off;
  client_body_temp_path ${join(dir, "client_body")};
  proxy_temp_path ${join(dir, "proxy")};
  fastcgi_temp_path ${join(dir, "fastcgi")};
  uwsgi_temp_path ${join(dir, "uwsgi")};
  scgi_temp_path ${join(dir, "scgi")};
  ${serverBlock}
}
`;
  const file = join(dir, "nginx.conf");
  writeFileSync(file, config);
  const child: ChildProcess = spawn("nginx", ["-p", dir, "-c", file, "-g", "daemon off;"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk) => {
    stderr += String(chunk);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}`);
    const up = await new Promise<boolean>((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`nginx did not listen on ${port} within 10 s: ${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    async close() {
      // SIGQUIT: nginx's graceful stop; its workers go with the master.
      child.kill("SIGQUIT");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
