/**
 * `agent-api mock`: Prism's mock server on the bundled spec (static examples, so answers are predictable;
 * a `Prefer: code=404` or `Prefer: example=<name>` request header picks another documented response).
 * `startPrismMock` is the same server for tests, on a free port, with its URL once it listens.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { Command } from "commander";
import { bundledSpecPath, packageRoot, toolOrSay, tools } from "./tool-bin.ts";

/** The bundled spec Prism serves by default (internal refs only, so Prism resolves it quickly). */
export { bundledSpecPath };

export interface PrismMock {
  /** e.g. `http://127.0.0.1:40733` */
  url: string;
  process: ChildProcess;
  close(): Promise<void>;
}

export interface StartPrismOptions {
  port?: number;
  host?: string;
  spec?: string;
  /** Prism's validation: answer 4xx/5xx when a request or a response violates the spec. */
  errors?: boolean;
}

function prismArgs(o: Required<Omit<StartPrismOptions, "errors">> & { errors: boolean }): string[] {
  const args = ["mock", o.spec, "--port", String(o.port), "--host", o.host];
  if (o.errors) args.push("--errors");
  return args;
}

/** Starts Prism's mock server (port 0 = a free port) and resolves once it listens. */
export function startPrismMock(options: StartPrismOptions = {}): Promise<PrismMock> {
  const settings = {
    port: options.port ?? 0,
    host: options.host ?? "127.0.0.1",
    spec: options.spec ?? bundledSpecPath,
    errors: options.errors ?? false,
  };
  const child = spawn(process.execPath, [tools.prism(), ...prismArgs(settings)], {
    cwd: packageRoot,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const close = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
    });
  return new Promise((resolve, reject) => {
    let log = "";
    const onData = (chunk: Buffer) => {
      log += chunk.toString();
      const match = /Prism is listening on (http:\/\/\S+)/.exec(log);
      if (match) {
        child.stdout.off("data", onData);
        // Keep draining so a chatty Prism never blocks on a full pipe.
        child.stdout.resume();
        resolve({ url: match[1], process: child, close });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", (chunk: Buffer) => {
      log += chunk.toString();
    });
    child.once("error", reject);
    child.once("exit", (code) =>
      reject(new Error(`prism exited with code ${code} before listening:\n${log}`)),
    );
  });
}

/** CLI entry: runs Prism in the foreground until interrupted; resolves to its exit code. */
export async function main(args: string[]): Promise<number> {
  const program = new Command("agent-api mock")
    .description(
      "Prism mock server from the spec (static examples; send `Prefer: code=404` to pick a response)",
    )
    .option("-p, --port <port>", "port to listen on", "4010")
    .option("-H, --host <host>", "host to listen on", "127.0.0.1")
    .option("--spec <path>", "OpenAPI document to serve", bundledSpecPath)
    .option("--errors", "answer 4xx/5xx on requests or responses that violate the spec", false)
    .exitOverride();
  try {
    program.parse(args, { from: "user" });
  } catch (error) {
    return (error as { exitCode?: number }).exitCode ?? 2;
  }
  const opts = program.opts<{ port: string; host: string; spec: string; errors: boolean }>();
  const port = Number(opts.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`agent-api mock: --port must be an integer 0..65535, got ${opts.port}\n`);
    return 2;
  }
  const prism = toolOrSay(() => tools.prism("agent-api mock"));
  if (!prism) return 2;
  const child = spawn(process.execPath, [prism, ...prismArgs({ ...opts, port })], {
    cwd: process.cwd(),
    stdio: "inherit",
  });
  const stop = () => child.kill("SIGTERM");
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return new Promise((resolve) => {
    child.once("exit", (code, signal) => resolve(code ?? (signal === "SIGTERM" ? 0 : 1)));
  });
}
