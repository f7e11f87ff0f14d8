/**
 * Tells the deployment's own mistakes from the API's answers: a page from a proxy in front of the API (its
 * HTML 413, 404, 502, 504), a TLS refusal, a closed port. Each is named with its likely cause and the fix,
 * because "404" or undici's bare "self-signed certificate" sends an operator looking in the wrong place.
 */

/** What went wrong between the suite and the API, in an operator's words. */
export interface Diagnosis {
  /** What the suite saw, e.g. "the proxy answered with its own HTML 413 page". */
  problem: string;
  /** The most likely mistake in the deployment. */
  cause: string;
  /** What to change. */
  fix: string;
}

/** One line for a report: problem, likely cause, fix. */
export function describeDiagnosis(d: Diagnosis): string {
  return `${d.problem}. Likely cause: ${d.cause}. Fix: ${d.fix}.`;
}

/**
 * Body size a deployment must accept: the API accepts 10 MiB of attachments, which travel as base64 in JSON
 * (4/3 of their size); the suite's own attachment check sends 10.5 MiB of attachments, ~14.7 MB of JSON.
 */
export const SUITE_LARGEST_BODY_BYTES = Math.ceil((10.5 * 1024 * 1024 * 4) / 3);

/** A body-size limit with headroom above the suite's largest request. */
const SUGGESTED_LIMIT = "16 MB (nginx: client_max_body_size 16m; Caddy: request_body { max_size 16MB })";

/** Bodies above this are "large uploads": a connection cut while sending one is most likely a size limit. */
export const LARGE_BODY_BYTES = 1024 * 1024;

export interface RequestFacts {
  method: string;
  url: string;
  /** Bytes of the request body sent, if any. */
  bodyBytes?: number;
}

function megabytes(bytes: number): string {
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}

const HTML_START = /^\s*(<!doctype\s+html|<html|<head|<body|<center|<h1|<title)/i;

function looksLikeJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Why a response is not the API's answer, or null when it may well be. The API answers JSON (errors
 * included) or an event stream, never HTML: an HTML page, or an error status whose body is not JSON, was
 * written by something in front of the API.
 */
export function diagnoseForeignResponse(
  status: number,
  headers: Record<string, string>,
  text: string,
  req: RequestFacts,
): Diagnosis | null {
  const contentType = (headers["content-type"] ?? "").toLowerCase();
  const html = contentType.includes("text/html") || HTML_START.test(text);
  if (contentType.startsWith("text/event-stream")) return null;
  if (!html && (status < 400 || looksLikeJson(text))) return null;
  const what = html ? `an HTML ${status} page` : `a ${status} with a non-JSON body`;
  const problem = `${req.method} ${pathOf(req.url)} was answered by something in front of the API (${what}), not by the API`;
  const path = pathOf(req.url);
  if (status === 413) {
    const sent =
      req.bodyBytes === undefined ? "this request's body" : `this request's ${megabytes(req.bodyBytes)} body`;
    return {
      problem,
      cause: `a proxy's request body size limit is below ${sent} (nginx's default client_max_body_size is 1 MB); 10 MiB of attachments take ~14 MB as JSON`,
      fix: `raise the proxy's body size limit to at least ${SUGGESTED_LIMIT}`,
    };
  }
  if (status === 404 && /\/apps\//.test(path)) {
    return {
      problem,
      cause: "the proxy does not forward the deployed-flow route (/apps/) to the API",
      fix: "forward paths beginning /apps/ to the API, as well as /api/",
    };
  }
  if (status === 404 || status === 405) {
    return {
      problem,
      cause:
        "the proxy does not forward this path (or method) to the API, or --base-url lacks the prefix the API is served under",
      fix: "forward paths beginning /api/ to the API unchanged; if the API lives under a prefix, put it in --base-url (https://host/prefix)",
    };
  }
  if (status === 502 && req.bodyBytes !== undefined && req.bodyBytes > LARGE_BODY_BYTES) {
    // Caddy 2.6's `request_body { max_size }` stops the upload mid-way and its reverse_proxy then answers
    // 502, not 413; a dead upstream answers every request so, not only the large one.
    return {
      problem,
      cause: `a proxy's request body size limit is below this request's ${megabytes(req.bodyBytes)} body (Caddy answers 502, not 413, when request_body max_size cuts an upload), or the API upstream is down; 10 MiB of attachments take ~14 MB as JSON`,
      fix: `raise the proxy's body size limit to at least ${SUGGESTED_LIMIT}; if smaller requests fail too, start the API and check the proxy's upstream address`,
    };
  }
  if (status === 502 || status === 503) {
    return {
      problem,
      cause:
        "the proxy got no answer from the API upstream: the API is not running, or the proxy points at the wrong address or port",
      fix: "start the API and check the proxy's upstream address (nginx: proxy_pass)",
    };
  }
  if (status === 504) {
    return {
      problem,
      cause:
        "the proxy's upstream time-out expired before the API answered (nginx: proxy_read_timeout, 60 s by default)",
      fix: "raise the proxy's read time-out above the longest turn, and keep it above the API's keep-alive interval",
    };
  }
  if (status === 401 || status === 403) {
    return {
      problem,
      cause:
        "an authentication layer in front of the API (single sign-on, a firewall rule) refused the request",
      fix: "let requests carrying the API key header through to the API",
    };
  }
  if (status < 400) {
    return {
      problem,
      cause: "a web application's catch-all route or a login page answers this path instead of the API",
      fix: "route /api/ (and /apps/) to the API before any catch-all route",
    };
  }
  return {
    problem,
    cause: "a proxy or gateway in front of the API answered with its own page",
    fix: "check that the proxy forwards this method and path to the API unchanged",
  };
}

/** Codes a failed TLS verification carries (Node's, from OpenSSL). */
const UNTRUSTED_CERT = new Set([
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
]);

interface ErrorLike {
  code?: unknown;
  message?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/** Every error in a chain of causes and aggregates (undici wraps; happy eyeballs aggregates). */
function errorChain(error: unknown): ErrorLike[] {
  const seen: ErrorLike[] = [];
  const queue: unknown[] = [error];
  while (queue.length > 0 && seen.length < 20) {
    const e = queue.shift();
    if (typeof e !== "object" || e === null || seen.includes(e as ErrorLike)) continue;
    const like = e as ErrorLike;
    seen.push(like);
    if (like.cause !== undefined) queue.push(like.cause);
    if (Array.isArray(like.errors)) queue.push(...like.errors);
  }
  return seen;
}

/** The first error code in the chain, e.g. ECONNREFUSED or DEPTH_ZERO_SELF_SIGNED_CERT. */
export function errorCode(error: unknown): string | undefined {
  const chain = errorChain(error);
  // undici's own codes (UND_ERR_SOCKET) say less than the system's or OpenSSL's underneath.
  const codes = chain.map((e) => e.code).filter((c): c is string => typeof c === "string");
  return codes.find((c) => !c.startsWith("UND_ERR_")) ?? codes[0];
}

function messages(error: unknown): string {
  return errorChain(error)
    .map((e) => (typeof e.message === "string" ? e.message : ""))
    .join(" | ");
}

/**
 * Why a request got no HTTP answer at all, or null when the failure names no deployment mistake (a time-out
 * is reported as such by the caller).
 */
export function diagnoseTransportError(error: unknown, req: RequestFacts): Diagnosis | null {
  const code = errorCode(error) ?? "";
  const text = messages(error);
  let host = req.url;
  try {
    host = new URL(req.url).host;
  } catch {}
  if (UNTRUSTED_CERT.has(code)) {
    return {
      problem: `the TLS certificate of ${host} was refused (${code}): it is not signed by a CA this machine trusts`,
      cause: "the deployment uses a self-signed certificate or one from a private CA",
      fix: "give that CA's certificate with --ca FILE (or NODE_EXTRA_CA_CERTS=FILE); do not turn verification off",
    };
  }
  if (code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID") {
    return {
      problem: `the TLS certificate of ${host} was refused (${code})`,
      cause: "the certificate is outside its validity period",
      fix: "renew the deployment's certificate (or correct the machine's clock)",
    };
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return {
      problem: `the TLS certificate of ${host} does not name that host (${code})`,
      cause: "--base-url uses a host name the certificate was not issued for",
      fix: "use the host name the certificate names, or reissue the certificate for this one",
    };
  }
  if (/wrong version number|packet length too long/i.test(text) || code === "ERR_SSL_WRONG_VERSION_NUMBER") {
    return {
      problem: `${host} did not speak TLS (${code || "wrong version number"})`,
      cause: "an https:// address points at a port that serves plain HTTP",
      fix: "use http:// for that port, or the port that serves TLS",
    };
  }
  if (code === "HPE_INVALID_CONSTANT" || /does not match the HTTP\/1\.1 protocol/i.test(text)) {
    return {
      problem: `${host} did not answer in HTTP (${code || "not HTTP"})`,
      cause: "an http:// address points at a port that serves TLS (or another protocol)",
      fix: "use https:// for that port",
    };
  }
  if (code === "ECONNREFUSED") {
    return {
      problem: `nothing accepts connections at ${host} (ECONNREFUSED)`,
      cause: "the API (or its proxy) is not running, or --base-url names the wrong host or port",
      fix: "start it, or correct the host and port in the address",
    };
  }
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") {
    return {
      problem: `the host name of ${host} does not resolve (${code})`,
      cause: "a misspelt host name, or one only resolvable from another network",
      fix: "correct the host name in the address",
    };
  }
  const large = req.bodyBytes !== undefined && req.bodyBytes >= LARGE_BODY_BYTES;
  if (
    large &&
    /ECONNRESET|EPIPE|UND_ERR_SOCKET|other side closed|NGHTTP2|stream|reset/i.test(`${code} ${text}`)
  ) {
    return {
      problem: `the connection was cut while the ${megabytes(req.bodyBytes ?? 0)} request body was being sent (${code || text})`,
      cause: "a proxy refused a body above its size limit and closed the connection",
      fix: `raise the proxy's body size limit to at least ${SUGGESTED_LIMIT}`,
    };
  }
  return null;
}
