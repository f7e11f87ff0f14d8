/**
 * The HTTP surface of the reference server on Fastify: routes of the spec, key authentication, request
 * validation from the bundled spec, SSE turns, and one JSON error shape for every failure before a
 * stream opens. Fastify was picked for its routing, body limits and hooks; its own schema layer is not
 * used because the requests are validated against the OpenAPI document itself. This file composes the
 * server from its parts: hooks.ts, error-handling.ts, routes.ts and turn-routes.ts.
 */
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  LogController,
} from "fastify";
import type { KeyIndex } from "../config/keys.ts";
import type { ServerConfig } from "../config/types.ts";
import type { Service } from "../service/index.ts";
import { Admission } from "./admission.ts";
import { errorBody, shouldRetryHeader } from "./error-body.ts";
import { clientErrorHandler, registerErrorHandling, toApiError } from "./error-handling.ts";
import { registerHooks } from "./hooks.ts";
import { BODY_LIMIT_BYTES, SLOW_CLIENT_DEFAULTS } from "./request-limits.ts";
import { registerJsonRoutes } from "./routes.ts";
import { registerTurnRoutes } from "./turn-routes.ts";
import { TurnShares } from "./turn-shares.ts";
import { RequestValidator } from "./validate.ts";

export interface AppOptions {
  config: ServerConfig;
  keys: KeyIndex;
  service: Service;
  routingPrefix: string;
  logger: FastifyBaseLogger;
  /** How long a turn's client may leave events unread before it is dropped (default 30 s). */
  sseStallMs?: number;
  /**
   * Browser origins allowed to call the API (CORS), e.g. a docs page's "Try it" console; `*` allows any.
   * Empty or unset: no CORS headers, and preflights are not answered (browsers then refuse cross-origin calls).
   */
  corsOrigins?: string[];
  /** Longest silence on a turn's stream before a comment line (default http/sse.ts KEEP_ALIVE_MS). */
  keepAliveMs?: number;
  /** Caps on requests in flight and body bytes held, per key and per server (default: the defaults). */
  admission?: Admission;
  /** Time a request's head and body may take to arrive (defaults in SLOW_CLIENT_DEFAULTS). */
  requestTimeoutMs?: number;
  /** Time a request's head may take to arrive. */
  headersTimeoutMs?: number;
  /** Turns running at once per workspace and per key (default: the defaults). */
  turnShares?: TurnShares;
}

export function buildApp(options: AppOptions): FastifyInstance {
  const { config, keys, service } = options;
  const validator = new RequestValidator();
  const admission = options.admission ?? new Admission();
  const requestTimeout = options.requestTimeoutMs ?? SLOW_CLIENT_DEFAULTS.requestTimeoutMs;
  const headersTimeout = Math.min(
    options.headersTimeoutMs ?? SLOW_CLIENT_DEFAULTS.headersTimeoutMs,
    requestTimeout,
  );
  const app = Fastify({
    loggerInstance: options.logger,
    // Fastify's two lines per request are replaced by the one written in onResponse (hooks.ts).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT_BYTES,
    requestTimeout,
    // Node checks the deadlines above every connectionsCheckingInterval (30 s by default, which would let
    // a 2 s deadline run 32 s); a tenth of the shorter one keeps the overshoot at about 10 %.
    http: {
      requestTimeout,
      headersTimeout,
      connectionsCheckingInterval: Math.max(100, Math.min(30_000, Math.floor(headersTimeout / 10))),
    },
    // Path parameters are never refused by the router for length (the request head is capped at 16 KiB
    // anyway): an overlong conversation id is simply not found, as the spec documents.
    routerOptions: { maxParamLength: 16_384, ignoreTrailingSlash: true },
    // A request that reaches a closing server (on a connection already open: the listener is closed first)
    // gets the API's 503 with Retry-After from the onRequest hook (hooks.ts) instead of Fastify's bare one.
    return503OnClosing: false,
    // Requests Node's HTTP parser refuses (a head over 16 KiB: 431, garbage: 400) get our error body and an
    // explicit Connection: close, so a keep-alive client knows the socket is done.
    clientErrorHandler: clientErrorHandler(requestTimeout, headersTimeout),
    // The router's own refusals (a malformed %-escape: 400) get our error body too.
    frameworkErrors: (error, _request, reply) => {
      const apiError = toApiError(error);
      (reply as FastifyReply)
        .code(apiError.status)
        .headers(shouldRetryHeader(apiError) ?? {})
        .type("application/json")
        .send(errorBody(apiError));
    },
  });

  registerHooks(app, { admission, corsOrigins: options.corsOrigins });
  registerErrorHandling(app);
  const context = {
    config,
    keys,
    service,
    validator,
    routingPrefix: options.routingPrefix,
    sseStallMs: options.sseStallMs,
    keepAliveMs: options.keepAliveMs,
    turnShares: options.turnShares ?? new TurnShares(),
  };
  registerTurnRoutes(app, context);
  registerJsonRoutes(app, context);
  return app;
}
