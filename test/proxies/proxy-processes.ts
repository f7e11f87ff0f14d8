/**
 * Real proxies for the deployment-guide test: a private CA and a server certificate made with the openssl
 * command, and Debian's nginx and HAProxy run as foreground children on loopback, each stopped by its own pid.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { createServer, connect as netConnect } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface Certificates {
  caFile: string;
  certFile: string;
  keyFile: string;
  /** Certificate then key, in one file (HAProxy's `crt`). */
  pemFile: string;
}

/** A CA valid for a day and a certificate it signed for 127.0.0.1. */
export async function makeCertificates(dir: string): Promise<Certificates> {
  const file = (name: string) => join(dir, name);
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  await run("openssl", [
    "req",
    "-x509",
    ...ec,
    "-keyout",
    file("ca.key"),
    "-out",
    file("ca.pem"),
    "-days",
    "1",
    "-subj",
    "/CN=agent-api proxies test CA",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  await run("openssl", [
    "req",
    ...ec,
    "-keyout",
    file("server.key"),
    "-out",
    file("server.csr"),
    "-subj",
    "/CN=127.0.0.1",
  ]);
  await writeFile(
    file("server.ext"),
    "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
  );
  await run("openssl", [
    "x509",
    "-req",
    "-in",
    file("server.csr"),
    "-CA",
    file("ca.pem"),
    "-CAkey",
    file("ca.key"),
    "-CAcreateserial",
    "-days",
    "1",
    "-extfile",
    file("server.ext"),
    "-out",
    file("server.pem"),
  ]);
  const pem = (await readFile(file("server.pem"), "utf8")) + (await readFile(file("server.key"), "utf8"));
  await writeFile(file("server-with-key.pem"), pem, { mode: 0o600 });
  return {
    caFile: file("ca.pem"),
    certFile: file("server.pem"),
    keyFile: file("server.key"),
    pemFile: file("server-with-key.pem"),
  };
}

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

async function startChild(file: string, args: string[], port: number): Promise<RunningProxy> {
  const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"] });
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
