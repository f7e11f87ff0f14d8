/**
 * For tests: what sits in front of a deployment, on loopback. A small reverse proxy (HTTP/1.1, or TLS with
 * HTTP/2 and HTTP/1.1 by ALPN) that forwards to an upstream and answers with its own HTML pages the way
 * nginx does: 404 for paths it does not forward, 413 past its body limit, 502 when it has no upstream.
 * And a private CA made with openssl, as an operator's would be.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, request, type ServerResponse } from "node:http";
import { createSecureServer, type Http2ServerRequest } from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";

export interface FrontOptions {
  /** Where forwarded requests go (http://127.0.0.1:port); none: every request gets an HTML 502. */
  upstream?: string;
  /** The front serves the API under this path prefix (e.g. `/agentapi`), stripped when forwarding. */
  prefix?: string;
  /** Path prefixes (after the prefix is stripped) that are forwarded; others get an HTML 404. */
  forward?: string[];
  /** A request body above this many bytes (by Content-Length) gets an HTML 413 before it is read. */
  bodyLimit?: number;
  /** Answer past bodyLimit as the API itself would: a JSON error body (the API's own limit is too low). */
  bodyLimitAsApi?: boolean;
  /** Serve TLS with this key and certificate, offering h2 and http/1.1. */
  tls?: { key: string; cert: string };
}

export interface FrontServer {
  url: string;
  /** Every request as `HTTP-version METHOD path`, in arrival order. */
  seen: string[];
  close(): Promise<void>;
}

function page(status: number, title: string): string {
  // nginx's own error page, as operators meet it.
  return `<html>\r\n<head><title>${status} ${title}</title></head>\r\n<body>\r\n<center><h1>${status} ${title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n`;
}

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "upgrade",
  "proxy-connection",
  "te",
  "host",
  "http2-settings",
]);

type Req = IncomingMessage | Http2ServerRequest;
/** Both response kinds, as the one shape the handler uses (their writeHead overloads do not unify). */
type Res = Pick<ServerResponse, "end"> & {
  writeHead(status: number, headers: Record<string, string | string[]>): unknown;
};

export async function startFront(options: FrontOptions): Promise<FrontServer> {
  const seen: string[] = [];
  const handle = (req: Req, res: Res) => {
    const url = req.url ?? "/";
    seen.push(`HTTP/${req.httpVersion} ${req.method} ${url}`);
    const answer = (status: number, title: string) => {
      // Like nginx: the page goes out without reading the body (a large upload may be cut short).
      req.resume();
      res.writeHead(status, { "content-type": "text/html" });
      res.end(page(status, title));
    };
    const prefix = options.prefix ?? "";
    if (!url.startsWith(`${prefix}/`)) return answer(404, "Not Found");
    const path = url.slice(prefix.length);
    if (options.forward && !options.forward.some((p) => path.startsWith(p))) return answer(404, "Not Found");
    const length = Number(req.headers["content-length"] ?? 0);
    if (options.bodyLimit !== undefined && length > options.bodyLimit) {
      if (!options.bodyLimitAsApi) return answer(413, "Request Entity Too Large");
      req.resume();
      res.writeHead(413, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { type: "request_too_large", message: "Request body is too large" } }));
      return;
    }
    if (!options.upstream) return answer(502, "Bad Gateway");
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name) && !name.startsWith(":")) headers[name] = value;
    }
    const upstream = request(
      `${options.upstream}${path}`,
      { method: req.method, headers },
      (answerFromUpstream) => {
        const back: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(answerFromUpstream.headers)) {
          if (value !== undefined && !HOP_BY_HOP.has(name)) back[name] = value;
        }
        res.writeHead(answerFromUpstream.statusCode ?? 502, back);
        answerFromUpstream.pipe(res as unknown as NodeJS.WritableStream);
      },
    );
    upstream.on("error", () => answer(502, "Bad Gateway"));
    req.pipe(upstream);
  };
  const server = options.tls
    ? createSecureServer({ ...options.tls, allowHTTP1: true }, (req, res) =>
        handle(req, res as unknown as Res),
      )
    : createServer((req, res) => handle(req, res as unknown as Res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${options.tls ? "https" : "http"}://127.0.0.1:${port}${options.prefix ?? ""}`,
    seen,
    async close() {
      if ("closeAllConnections" in server) server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export interface TestCa {
  /** PEM of the CA certificate (what `--ca` is given). */
  caCert: string;
  caFile: string;
  /** The CA's own key: with caCert, a self-signed certificate. */
  caKey: string;
  /** Key and certificate of 127.0.0.1 and localhost, signed by the CA. */
  key: string;
  cert: string;
  keyFile: string;
  certFile: string;
}

/** A private CA and a server certificate for 127.0.0.1 signed by it, written into `dir` (openssl). */
export function makeTestCa(dir: string): TestCa {
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  openssl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=agent-api test CA",
    "-keyout",
    file("ca.key"),
    "-out",
    file("ca.pem"),
  );
  openssl(
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    "/CN=127.0.0.1",
    "-keyout",
    file("server.key"),
    "-out",
    file("server.csr"),
  );
  writeFileSync(file("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  openssl(
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
    "2",
    "-extfile",
    file("server.ext"),
    "-out",
    file("server.pem"),
  );
  const read = (name: string) => readFileSync(file(name), "utf8");
  return {
    caCert: read("ca.pem"),
    caFile: file("ca.pem"),
    caKey: read("ca.key"),
    key: read("server.key"),
    cert: read("server.pem"),
    keyFile: file("server.key"),
    certFile: file("server.pem"),
  };
}
