/**
 * Prism's validation proxy in front of a real server, for tests: `prism proxy <spec> <upstream>` on a free
 * port, its whole log kept, plus a small recording hop ("tap") in front of it that notes every exchange and
 * the `sl-violations` header Prism adds to a response whose request or response breaks the spec.
 *
 * Prism watches its document and restarts when the file changes (other work may regenerate
 * generated/openapi.json while a test runs), so it is given a private copy of the bundled spec.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tools } from "../../conformance/cli/tool-bin.ts";
import { projectRoot } from "../../scripts/project-root.ts";

export const bundledSpec = join(projectRoot, "generated", "openapi.json");

export interface PrismProxyOptions {
  upstream: string;
  /** `--errors`: a violation marked as an error becomes a 500 problem+json answer instead of passing. */
  errors: boolean;
  /** `--validate-request` (Prism's default true). */
  validateRequest: boolean;
  spec?: string;
}

export interface PrismProxy {
  url: string;
  /** Everything Prism printed so far (stdout and stderr, in arrival order). */
  log(): string;
  close(): Promise<void>;
}

/** One violation as Prism reports it in `sl-violations` and in the `validation` of its problem+json. */
export interface PrismViolation {
  location: string[];
  severity: string;
  code?: string | number;
  message: string;
}

export async function startPrismProxy(options: PrismProxyOptions): Promise<PrismProxy> {
  const dir = await mkdtemp(join(tmpdir(), "agent-api-prism-"));
  const spec = join(dir, "openapi.json");
  await copyFile(options.spec ?? bundledSpec, spec);
  const args = ["proxy", spec, options.upstream, "-h", "127.0.0.1", "-p", "0"];
  if (options.errors) args.push("--errors");
  args.push(`--validate-request=${String(options.validateRequest)}`);
  const child: ChildProcess = spawn(process.execPath, [tools.prism(), ...args], {
    cwd: projectRoot,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    log += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    log += chunk.toString();
  });
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      await new Promise<void>((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      });
    }
    await rm(dir, { recursive: true, force: true });
  };
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`prism did not listen within 60 s:\n${log}`)), 60_000);
    const poll = setInterval(() => {
      const match = /Prism is listening on (http:\/\/\S+)/.exec(log);
      if (match) {
        clearInterval(poll);
        clearTimeout(timer);
        resolve(match[1]);
      }
    }, 50);
    child.once("error", (error) => {
      clearInterval(poll);
      clearTimeout(timer);
      reject(error);
    });
    child.once("exit", (code) => {
      clearInterval(poll);
      clearTimeout(timer);
      reject(new Error(`prism exited with code ${code} before listening:\n${log}`));
    });
  }).catch(async (error) => {
    await close();
    throw error;
  });
  return { url, log: () => log, close };
}

/** Lines of Prism's log that report a violation or a response Prism replaced with its own error. */
export function violationLines(log: string): string[] {
  return log
    .split("\n")
    .filter((line) => /Violation:|#VIOLATIONS|sl-violations/.test(line))
    .map((line) => line.trim());
}

export interface TapRecord {
  method: string;
  url: string;
  /** The first 300 characters of the request body. */
  requestBody: string;
  status: number;
  contentType: string;
  violations: PrismViolation[];
  /** The first 600 characters of the response body (not recorded for event streams). */
  body?: string;
  /** From the request's arrival to Prism's response headers. */
  headersMs?: number;
  /** From Prism's response headers to the end of its body (event streams). */
  bodyMs?: number;
}

export interface Tap {
  url: string;
  records: TapRecord[];
  close(): Promise<void>;
}

function forwardHeaders(headers: IncomingHttpHeaders, host: string): IncomingHttpHeaders {
  return { ...headers, host };
}

/**
 * A transparent HTTP hop to `target` that streams both ways and records each exchange with its
 * `sl-violations` header: so every violation is tied to the exact request that caused it.
 */
export async function startTap(target: string): Promise<Tap> {
  const to = new URL(target);
  const records: TapRecord[] = [];
  const server: Server = createServer((req, res) => {
    let requestBody = "";
    const arrived = performance.now();
    req.on("data", (chunk: Buffer) => {
      if (requestBody.length < 300) requestBody += chunk.toString("utf8").slice(0, 300 - requestBody.length);
    });
    const upstream = httpRequest(
      {
        host: to.hostname,
        port: to.port,
        method: req.method,
        path: req.url,
        headers: forwardHeaders(req.headers, to.host),
      },
      (up) => {
        const raw = up.headers["sl-violations"];
        let violations: PrismViolation[] = [];
        if (typeof raw === "string") {
          try {
            violations = JSON.parse(raw) as PrismViolation[];
          } catch {
            violations = [{ location: [], severity: "Error", message: `unparsable sl-violations: ${raw}` }];
          }
        }
        const contentType = String(up.headers["content-type"] ?? "");
        const record: TapRecord = {
          method: req.method ?? "",
          url: req.url ?? "",
          requestBody,
          status: up.statusCode ?? 0,
          contentType,
          violations,
          headersMs: Math.round(performance.now() - arrived),
        };
        records.push(record);
        const headersAt = performance.now();
        up.on("end", () => {
          record.bodyMs = Math.round(performance.now() - headersAt);
        });
        if (!contentType.startsWith("text/event-stream")) {
          let body = "";
          up.on("data", (chunk: Buffer) => {
            if (body.length < 600) body += chunk.toString("utf8");
          });
          up.on("end", () => {
            record.body = body.slice(0, 600);
          });
        }
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on("error", (error) => {
      records.push({
        method: req.method ?? "",
        url: req.url ?? "",
        requestBody,
        status: 0,
        contentType: "",
        violations: [],
        body: `tap could not reach Prism: ${error.message}`,
      });
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end();
    });
    req.pipe(upstream);
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    records,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
