/**
 * Real proxies for the deployment-guide test: Debian's nginx and HAProxy run as foreground children on
 * loopback, each stopped by its own pid (the certificates come from conformance/testing/front-server.ts).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { createServer, connect as netConnect } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A port free on 127.0.0.1 right now (the proxy binds it a moment later). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

export interface RunningProxy {
  url: string;
  /** What the proxy wrote to its stdout and stderr. */
  output(): string;
  stop(): Promise<void>;
}

/** Resolves once `port` accepts a connection; rejects when `child` exits first or 15 s pass. */
async function listening(port: number, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the proxy exited with ${child.exitCode}: ${output()}`);
    const up = await new Promise<boolean>((resolve) => {
      const socket = netConnect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (up) return;
    if (Date.now() > deadline) throw new Error(`the proxy did not listen on ${port}: ${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function startChild(
  file: string,
  args: string[],
  port: number,
  env?: NodeJS.ProcessEnv,
): Promise<RunningProxy> {
  const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"], env });
  let text = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    text += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    text += chunk.toString("utf8");
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    await listening(port, child, () => text);
  } catch (error) {
    if (child.exitCode === null) child.kill("SIGKILL");
    throw error;
  }
  return {
    url: `https://127.0.0.1:${port}`,
    output: () => text,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

/**
 * nginx in the foreground with `site` (http-level directives, as in conf.d) inside a minimal main config whose
 * files all live in `dir`.
 */
export async function startNginx(dir: string, site: string, port: number): Promise<RunningProxy> {
  await mkdir(dir, { recursive: true });
  const temp = join(dir, "temp");
  await mkdir(temp, { recursive: true });
  // Workers of a root master run as nobody: they write request bodies and buffered answers here.
  await chmod(temp, 0o777);
  const conf = `daemon off;
worker_processes 1;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "error.log")} warn;
events { worker_connections 512; }
http {
    access_log ${join(dir, "access.log")};
    client_body_temp_path ${join(temp, "body")};
    proxy_temp_path ${join(temp, "proxy")};
    fastcgi_temp_path ${join(temp, "fastcgi")};
    uwsgi_temp_path ${join(temp, "uwsgi")};
    scgi_temp_path ${join(temp, "scgi")};
${site}
}
`;
  const file = join(dir, "nginx.conf");
  await writeFile(file, conf);
  await run("nginx", ["-t", "-q", "-e", join(dir, "error.log"), "-c", file]);
  return startChild("nginx", ["-e", join(dir, "error.log"), "-c", file], port);
}

/** HAProxy in the foreground (-db) with `config`. */
export async function startHaproxy(dir: string, config: string, port: number): Promise<RunningProxy> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, "haproxy.cfg");
  await writeFile(file, config);
  await run("haproxy", ["-c", "-q", "-f", file]);
  return startChild("haproxy", ["-db", "-f", file], port);
}

/**
 * Caddy in the foreground with `caddyfile`; its storage and autosaved config go to `dir`, not the user's home.
 */
export async function startCaddy(dir: string, caddyfile: string, port: number): Promise<RunningProxy> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, "Caddyfile");
  await writeFile(file, caddyfile);
  const env = {
    ...process.env,
    HOME: dir,
    XDG_DATA_HOME: join(dir, "data"),
    XDG_CONFIG_HOME: join(dir, "config"),
  };
  await run("caddy", ["validate", "--config", file, "--adapter", "caddyfile"], { env });
  return startChild("caddy", ["run", "--config", file, "--adapter", "caddyfile"], port, env);
}
