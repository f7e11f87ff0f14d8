/**
 * The suite's only way onto the network: undici requests read to raw bytes (so checks see exactly what
 * was sent), each recorded as an Exchange for the reports with keys masked and bodies cut short.
 */
import { rootCertificates } from "node:tls";
import { Agent, type Dispatcher, EnvHttpProxyAgent, request } from "undici";
import { contentCodings, decodedBody } from "./content-coding.ts";
import { describeDiagnosis, diagnoseTransportError } from "./deployment-errors.ts";
import { CheckFailure, DeploymentPrevented, excerpt } from "./outcomes.ts";
import type { Exchange } from "./records.ts";
import { readTimedStream, type StreamTiming } from "./sse/timing.ts";

export interface HttpRequest {
  method: "GET" | "POST" | "DELETE";
  url: string;
  /** Value of the API key header; omitted sends no key header at all. */
  key?: string;
  /** The flow endpoint spells the same header `X-API-Key`. */
  keyHeader?: string;
  /** Serialised as JSON with `Content-Type: application/json`. */
  json?: unknown;
  /** Sent verbatim (malformed-body checks). */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  bytes: Uint8Array;
  text: string;
  exchange: Exchange;
  /** When each part of an event stream arrived (200 text/event-stream answers only). */
  timing?: StreamTiming;
}

/**
 * A turn against a real model can take a while; this bounds one request, not the check's verdict.
 * The default of `agent-api check --timeout-ms`.
 */
export const REQUEST_TIMEOUT_MS = 180_000;

/** Past a request's time-out, how long its own signal gets before the request is given up regardless. */
const DEADLINE_SLACK_MS = 1_000;

/** The proxy variables curl, git and npm honour; a CI runner behind a proxy sets them and nothing else. */
const PROXY_VARIABLES = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"];

/** Whether `env` names a proxy (the suite then sends through it, minus NO_PROXY's hosts). */
function proxyConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return PROXY_VARIABLES.some((name) => (env[name] ?? "") !== "");
}

/** How the suite connects, beyond the address: `--ca` and `--http2`. */
export interface ConnectionOptions {
  /** PEM certificate(s) of a private CA, trusted on top of the usual public ones. */
  ca?: string;
  /** Offer HTTP/2 (ALPN) on https:// addresses; undici speaks HTTP/1.1 unless asked. */
  http2?: boolean;
}

export function createDispatcher(
  timeoutMs = REQUEST_TIMEOUT_MS,
  connection: ConnectionOptions = {},
): Dispatcher {
  // Node's `ca` option replaces the trusted set: the public roots stay, so a --ca never narrows trust.
  const tls = connection.ca === undefined ? undefined : { ca: [...rootCertificates, connection.ca] };
  const options = {
    connections: 32,
    keepAliveTimeout: 10_000,
    headersTimeout: timeoutMs,
    // undici's own 300 s gap between body chunks would cut a stream short of a longer --timeout-ms.
    bodyTimeout: timeoutMs,
    allowH2: connection.http2 === true,
    ...(tls && { connect: tls }),
  };
  // undici ignores the proxy variables unless asked; EnvHttpProxyAgent reads them and NO_PROXY. Through a
  // proxy, the deployment's TLS is spoken inside the tunnel (requestTls).
  return proxyConfigured()
    ? new EnvHttpProxyAgent({ ...options, ...(tls && { requestTls: tls }) })
    : new Agent(options);
}

/** One request, read whole; `timeoutMs` bounds it from sending to the last byte. */
export async function httpRequest(
  dispatcher: Dispatcher,
  req: HttpRequest,
  timeoutMs = REQUEST_TIMEOUT_MS,
): Promise<HttpResponse> {
  const headers: Record<string, string> = { accept: "application/json, text/event-stream", ...req.headers };
  if (req.key !== undefined) headers[req.keyHeader ?? "X-Api-Key"] = req.key;
  let body: string | undefined = req.rawBody;
  if (req.json !== undefined) {
    body = JSON.stringify(req.json);
    headers["content-type"] = "application/json";
  } else if (body !== undefined && !headers["content-type"]) {
    headers["content-type"] = "application/json";
  }
  const started = performance.now();
  const exchange: Exchange = {
    method: req.method,
    url: req.url,
    requestHeaders: maskHeaders(headers),
    requestBody: body === undefined ? undefined : excerpt(redactBody(req.json, body), 1500),
    status: 0,
    responseHeaders: {},
    responseBody: "",
    ms: 0,
  };
  try {
    const signal = AbortSignal.timeout(timeoutMs);
    const { res, bytes, timing } = await settledWithin(
      (async () => {
        const res = await request(req.url, { method: req.method, headers, body, dispatcher, signal });
        const headersAt = performance.now();
        const decoded = decodedBody(res.body, contentCodings(res.headers["content-encoding"]));
        if (
          res.statusCode === 200 &&
          String(res.headers["content-type"] ?? "").startsWith("text/event-stream")
        ) {
          // A stream is read as it arrives: when each frame came is part of the verdict (streamed, not buffered).
          return { res, ...(await readTimedStream(decoded, started, headersAt)) };
        }
        return { res, bytes: await allBytes(decoded), timing: undefined };
      })(),
      timeoutMs + DEADLINE_SLACK_MS,
    );
    const text = new TextDecoder().decode(bytes);
    const responseHeaders: Record<string, string> = {};
    for (const [name, value] of Object.entries(res.headers)) {
      if (value !== undefined)
        responseHeaders[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
    }
    exchange.status = res.statusCode;
    exchange.responseHeaders = pickHeaders(responseHeaders);
    exchange.responseBody = excerpt(text, 4000);
    exchange.ms = Math.round(performance.now() - started);
    return { status: res.statusCode, headers: responseHeaders, bytes, text, exchange, timing };
  } catch (error) {
    exchange.ms = Math.round(performance.now() - started);
    const timedOut =
      error instanceof Error &&
      ["TimeoutError", "HeadersTimeoutError", "BodyTimeoutError"].includes(error.name);
    const message = timedOut
      ? `no complete answer within ${timeoutMs} ms (raise --timeout-ms for slow turns)`
      : error instanceof Error
        ? error.message
        : String(error);
    exchange.responseBody = `(no response: ${message})`;
    const diagnosis = timedOut
      ? null
      : diagnoseTransportError(error, {
          method: req.method,
          url: req.url,
          bodyBytes: body === undefined ? undefined : Buffer.byteLength(body),
        });
    if (diagnosis) {
      const said = `${req.method} ${req.url} failed: ${describeDiagnosis(diagnosis)}`;
      throw new DeploymentPrevented(said, diagnosis, [{ message: said, evidence: message }]);
    }
    throw new CheckFailure(`${req.method} ${req.url} failed: ${message}`, [{ message }]);
  }
}

/**
 * `work`, or a TimeoutError once `ms` have passed. A request's own signal bounds it, except one undici
 * never settles (a proxy that drops its CONNECT: nodejs/undici#3897); this bound holds regardless.
 */
async function settledWithin<T>(work: Promise<T>, ms: number): Promise<T> {
  // Settling after the race was lost (its dispatcher destroyed later) is no one's error.
  work.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error(`no answer within ${ms} ms`), { name: "TimeoutError" })),
      ms,
    );
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** How long the first request of a run may take to get any answer; less when the run's time-out is less. */
const PROBE_TIMEOUT_MS = 15_000;

/**
 * Why `baseUrl` cannot be reached at all (refused, no such host, TLS, a proxy that will not tunnel), or null
 * when it answers anything: said once, before a run whose every check would fail the same way. A failure
 * that names a deployment mistake (an untrusted certificate, a closed port) says its likely cause and fix.
 */
export async function reachability(
  baseUrl: string,
  requestTimeoutMs = REQUEST_TIMEOUT_MS,
  connection: ConnectionOptions = {},
): Promise<string | null> {
  const timeoutMs = Math.min(PROBE_TIMEOUT_MS, requestTimeoutMs);
  // Through the proxy the checks will use, if there is one.
  const dispatcher = createDispatcher(timeoutMs, connection);
  // Under the base address's own path: the API may be served under a prefix (https://host/agentapi).
  const url = `${baseUrl.replace(/(?<!\/)\/+$/, "")}/api/agents`;
  try {
    // undici's request, not fetch: fetch refuses "bad ports" that a deployment may well use.
    const answered = request(url, {
      signal: AbortSignal.timeout(timeoutMs),
      dispatcher,
    }).then((response) => response.body.dump());
    await settledWithin(answered, timeoutMs);
    return null;
  } catch (error) {
    const diagnosis = diagnoseTransportError(error, { method: "GET", url });
    if (diagnosis) return describeDiagnosis(diagnosis);
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
  } finally {
    // destroy, not close: a probe that timed out must not wait for its own request to finish.
    await dispatcher.destroy();
  }
}

async function allBytes(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

function maskHeaders(headers: Record<string, string>): Record<string, string> {
  const masked: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    masked[name] = name.toLowerCase() === "x-api-key" ? maskKey(value) : value;
  }
  return masked;
}

/** Enough of a key to tell which one was used, not enough to use it. */
export function maskKey(key: string): string {
  return key.length <= 6 ? "***" : `${key.slice(0, 4)}…(${key.length} chars)`;
}

const SHOWN_HEADERS = [
  "content-type",
  "content-encoding",
  "x-conversation-id",
  "content-length",
  "transfer-encoding",
  "retry-after",
];

function pickHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => SHOWN_HEADERS.includes(name)));
}

/** Attachment payloads are megabytes of base64: the report shows their length instead. */
function redactBody(json: unknown, body: string): string {
  if (json === undefined) return body;
  return JSON.stringify(json, (key, value) =>
    key === "dataBase64" && typeof value === "string" && value.length > 80
      ? `<${value.length} base64 chars>`
      : value,
  );
}
