/**
 * The HTTP surface of the reference server on Fastify: routes of the spec, key authentication, request
 * validation from the bundled spec, SSE turns, and one JSON error shape for every failure before a
 * stream opens. Fastify was picked for its routing, body limits and hooks; its own schema layer is not
 * used because the requests are validated against the OpenAPI document itself.
 */

import { pipeline } from "node:stream";
import type { components } from "@agent-api/client/api-types";
import cors from "@fastify/cors";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from "fastify";
import type { KeyIndex } from "../config/keys.ts";
import { hashKey } from "../config/keys.ts";
import type { ServerConfig } from "../config/types.ts";
import { ApiError, badRequest, notFound, overCap, revokedKey } from "../service/errors.ts";
import type { Service } from "../service/index.ts";
import { Admission, type AdmissionTicket, countedBody, declaredLength } from "./admission.ts";
import { type AuthenticatedCaller, authenticate, headerValue, presentedKey } from "./auth.ts";
import { errorBody, shouldRetryHeader } from "./error-body.ts";
import { holdAdmissionWhileHandling } from "./held-work.ts";
import { sendJsonPieces } from "./json-stream.ts";
import { type StreamOutcome, writeEventStream } from "./sse.ts";
import { TurnShares } from "./turn-shares.ts";
import { RequestValidator } from "./validate.ts";

type Schemas = components["schemas"];

/** Largest request body accepted (the API leaves it "not shown"); attachments alone may reach 10 MiB decoded. */
export const BODY_LIMIT_BYTES = 32 * 1024 * 1024;

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

/**
 * A client that sends its request slowly holds a socket and, once admitted, its share of the body caps:
 * the head must arrive within 20 s, head and body within 120 s (a 32 MiB body needs ~270 KiB/s). Only the
 * request is timed: Node clears the deadline once the request is complete, so a turn's stream runs on
 * (no socket idle time-out either: a quiet turn is kept alive by comment lines, a stalled reader by
 * sse.ts's stall time-out).
 */
export const SLOW_CLIENT_DEFAULTS = { requestTimeoutMs: 120_000, headersTimeoutMs: 20_000 } as const;

declare module "fastify" {
  interface FastifyRequest {
    caller?: AuthenticatedCaller;
    admission?: AdmissionTicket;
    /** Set on a turn's request: its stream logs its own line, with how far it got. */
    turnStream?: boolean;
  }
}

interface AgentParams {
  agent: string;
}
interface ConversationParams extends AgentParams {
  id: string;
}

/** Fastify's own errors (bad JSON, body too large, ...) carry a statusCode; map them to our error body. */
function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const status = (error as { statusCode?: number }).statusCode;
  const message = error instanceof Error ? error.message : String(error);
  if (status === 413)
    return new ApiError("AGENT_API_BODY_TOO_LARGE", `Request body is larger than ${BODY_LIMIT_BYTES} bytes`);
  // Bodies are read as JSON whatever their type; a Content-Type that is not even a media type is a bad request.
  if (status === 415)
    return new ApiError("AGENT_API_REQUEST_REFUSED", "Content-Type is not a valid media type");
  if (typeof status === "number" && status >= 400 && status < 500)
    return new ApiError("AGENT_API_REQUEST_REFUSED", message, status);
  return new ApiError("AGENT_API_INTERNAL");
}

export function buildApp(options: AppOptions): FastifyInstance {
  const { config, keys, service } = options;
  const validator = new RequestValidator();
  const admission = options.admission ?? new Admission();
  const turnShares = options.turnShares ?? new TurnShares();
  const requestTimeout = options.requestTimeoutMs ?? SLOW_CLIENT_DEFAULTS.requestTimeoutMs;
  const headersTimeout = Math.min(
    options.headersTimeoutMs ?? SLOW_CLIENT_DEFAULTS.headersTimeoutMs,
    requestTimeout,
  );
  const app = Fastify({
    loggerInstance: options.logger,
    // Fastify's two lines per request are replaced by the one written in onResponse below.
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
    // gets the API's 503 with Retry-After from the hook below instead of Fastify's bare one.
    return503OnClosing: false,
    // Requests Node's HTTP parser refuses (a head over 16 KiB: 431, garbage: 400) get our error body and an
    // explicit Connection: close, so a keep-alive client knows the socket is done.
    clientErrorHandler: (error, socket) => {
      // Bytes already written belong to a response of this socket: adding ours would garble it.
      if (!socket.writable || socket.bytesWritten > 0) {
        socket.destroy();
        return;
      }
      const code = (error as { code?: string }).code;
      const [apiError, text] =
        code === "HPE_HEADER_OVERFLOW"
          ? [new ApiError("AGENT_API_HEAD_TOO_LARGE"), "Request Header Fields Too Large"]
          : code === "ERR_HTTP_REQUEST_TIMEOUT"
            ? [
                new ApiError(
                  "AGENT_API_REQUEST_REFUSED",
                  `The request did not arrive within ${requestTimeout} ms (head within ${headersTimeout} ms)`,
                  408,
                ),
                "Request Timeout",
              ]
            : [new ApiError("AGENT_API_REQUEST_REFUSED", "The request is not valid HTTP"), "Bad Request"];
      const body = JSON.stringify(errorBody(apiError));
      const retry = shouldRetryHeader(apiError) ? "x-should-retry: false\r\n" : "";
      socket.end(
        `HTTP/1.1 ${apiError.status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${retry}Connection: close\r\n\r\n${body}`,
      );
    },
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

  // Any content type is read as JSON: `curl -d` sends form encoding by default, and the body is JSON anyway.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === "") return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (error) {
      done(
        badRequest(`Malformed JSON body: ${error instanceof Error ? error.message : String(error)}`),
        undefined,
      );
    }
  });

  if (options.corsOrigins && options.corsOrigins.length > 0) {
    const origins = options.corsOrigins;
    void app.register(cors, {
      origin: origins.includes("*") ? "*" : origins,
      methods: ["GET", "POST", "PUT", "PATCH", "DELETE"],
      // A browser reads only the response headers it is allowed to: the new conversation's id is one.
      exposedHeaders: ["X-Conversation-Id"],
      maxAge: 600,
    });
  }

  // Draining (a restart's SIGTERM): the turns running finish, new work goes to another instance. Nothing of
  // the request was done, so a client or balancer may send it again at once.
  let draining = false;
  app.addHook("preClose", async () => {
    draining = true;
  });
  // Admission first, before the key is checked and before a byte of body is read: a flood is refused at
  // the cost of its head. Callers are told apart by the key they present (hashed, as keys are stored).
  app.addHook("onRequest", async (request, reply) => {
    if (draining) {
      reply.header("connection", "close");
      throw overCap("server", "This server instance is shutting down: send the request again", 1);
    }
    const presented = presentedKey(request.headers);
    const declared = declaredLength(request.headers);
    // A body over the limit is refused with 413 by Fastify before it is read: nothing to reserve.
    const ticket = admission.admit(
      presented === undefined ? "anonymous" : `key:${hashKey(presented)}`,
      declared > BODY_LIMIT_BYTES ? 0 : declared,
    );
    request.admission = ticket;
    // 'close' comes once the response is done or the connection is gone, whichever way it ends.
    reply.raw.once("close", ticket.release);
  });
  // A body of unknown length (chunked) is counted as it arrives.
  app.addHook("preParsing", async (request, _reply, payload) => {
    if (request.admission === undefined || request.headers["content-length"] !== undefined) return payload;
    // pipeline, not pipe: a client that goes away mid-body ends the counted stream with an error too.
    return pipeline(payload, countedBody(request.admission), () => undefined);
  });

  const requestFields = (request: FastifyRequest, status: number, ms: number) => ({
    method: request.method,
    url: request.url.length > 300 ? `${request.url.slice(0, 300)}…` : request.url,
    status,
    ms: Math.round(ms),
    key: request.caller?.keyLabel,
  });

  app.addHook("onRoute", holdAdmissionWhileHandling);

  app.addHook("onResponse", async (request, reply) => {
    // A turn's stream writes its own line once it ends (below): its status says nothing of how it ended.
    if (request.turnStream) return;
    // One line per request; never headers or bodies (keys and prompts are secrets of the caller).
    request.log.info(requestFields(request, reply.statusCode, reply.elapsedTime), "request");
  });

  app.setErrorHandler((error, request, reply) => {
    const apiError = toApiError(error);
    if (apiError.status >= 500 && apiError.code !== "AGENT_API_OVERLOADED")
      request.log.error({ err: error }, "request failed");
    if (apiError.retryAfterSeconds !== undefined)
      reply.header("retry-after", String(apiError.retryAfterSeconds));
    // A refusal before the body was read: closing the connection spares reading the rest of it (Node
    // would otherwise read and discard it to keep the connection).
    if (!request.raw.complete) reply.header("connection", "close");
    reply
      .code(apiError.status)
      .headers(shouldRetryHeader(apiError) ?? {})
      .type("application/json")
      .send(errorBody(apiError));
  });

  app.setNotFoundHandler((request, reply) => {
    const error = notFound(`No route for ${request.method} ${request.url.split("?")[0]}`);
    reply
      .code(404)
      .headers(shouldRetryHeader(error) ?? {})
      .type("application/json")
      .send(errorBody(error));
  });

  const callerOf = (request: FastifyRequest): AuthenticatedCaller => {
    request.caller ??= authenticate(config, keys, presentedKey(request.headers));
    return request.caller;
  };
  // The key is checked in onRequest, before the body is read: a caller without a valid key learns
  // nothing about its request (the API's 401, or the revoked body) whatever the body holds.
  const authenticated = {
    onRequest: async (request: FastifyRequest) => {
      request.admission?.attribute(callerOf(request).workspaceId);
    },
  };

  async function streamTurn(
    request: FastifyRequest,
    reply: FastifyReply,
    agent: string,
    body: Schemas["SendMessageRequest"],
    routed: boolean,
  ): Promise<void> {
    // The body stays counted until the turn is over, also when its client left while it waited or ran.
    const unhold = request.admission?.hold();
    const caller = request.caller as AuthenticatedCaller;
    const leave = turnShares.enter(caller.workspaceId, caller.admissionKey ?? "");
    try {
      const turn = await service.turns.prepare({
        caller: request.caller as AuthenticatedCaller,
        agent,
        body,
        routed,
      });
      request.turnStream = true;
      // The stream is written on the raw response: headers hooks set on the reply (CORS) go with it.
      for (const [name, value] of Object.entries(reply.getHeaders()))
        if (value !== undefined) reply.raw.setHeader(name, value);
      reply.hijack();
      const outcome = await writeEventStream(
        reply.raw,
        turn.conversationId,
        (signal) => turn.events(signal),
        {
          stallMs: options.sseStallMs,
          keepAliveMs: options.keepAliveMs,
        },
      );
      logTurnStream(request, reply, turn.conversationId, outcome);
    } finally {
      leave();
      unhold?.();
    }
  }

  /**
   * A turn's line: info when message_stop reached the client; warn, with how far it got and the code of its
   * failure, otherwise.
   */
  function logTurnStream(
    request: FastifyRequest,
    reply: FastifyReply,
    conversation: string,
    outcome: StreamOutcome,
  ): void {
    const { code, detail, ...stream } = outcome;
    // `code`: the error catalogue's name of the turn's failure (reference-server/README.md), which the
    // stream's error event, in the API's shape, does not carry.
    const fields = {
      ...requestFields(request, reply.raw.statusCode, reply.elapsedTime),
      conversation,
      ...(code ? { code } : {}),
      ...(detail ? { detail } : {}),
      stream,
    };
    if (outcome.end === "complete") request.log.info(fields, "request");
    else if (outcome.end === "error") request.log.warn(fields, "turn stream ended with an error event");
    else request.log.warn(fields, "turn stream incomplete: it ended before message_stop");
  }

  app.post<{ Params: AgentParams }>(
    "/api/agents/:agent/v1/messages",
    authenticated,
    async (request, reply) => {
      callerOf(request);
      validator.body("sendMessage", request.body);
      validator.newestUserMessage(request.body as Schemas["SendMessageRequest"]);
      await streamTurn(
        request,
        reply,
        request.params.agent,
        request.body as Schemas["SendMessageRequest"],
        false,
      );
    },
  );

  app.post("/api/agents/v1/messages", authenticated, async (request, reply) => {
    callerOf(request);
    validator.body("sendRoutedMessage", request.body);
    validator.newestUserMessage(request.body as Schemas["SendMessageRequest"]);
    const body = request.body as Schemas["SendMessageRequest"];
    if (typeof body.model !== "string" || body.model === "")
      throw badRequest("model is required: <routing_prefix>--<agent> or an agent name");
    const prefix = `${options.routingPrefix}--`;
    const agent = body.model.startsWith(prefix) ? body.model.slice(prefix.length) : body.model;
    await streamTurn(request, reply, agent, body, true);
  });

  app.get<{ Params: AgentParams }>("/api/agents/:agent/v1/models", authenticated, async (request) => {
    return service.models(callerOf(request), request.params.agent);
  });

  app.get<{ Params: AgentParams }>("/api/agents/:agent/conversations", authenticated, async (request) => {
    const caller = callerOf(request);
    const query = validator.query("listConversations", request.query as Record<string, unknown>);
    return service.conversations.list(caller, request.params.agent, query);
  });

  app.get<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id",
    authenticated,
    async (request) => {
      return service.conversations.get(callerOf(request), request.params.agent, request.params.id);
    },
  );

  app.post<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id",
    authenticated,
    async (request) => {
      const caller = callerOf(request);
      validator.body("setConversationSharing", request.body);
      const { shared } = request.body as Schemas["ShareRequest"];
      return service.conversations.share(caller, request.params.agent, request.params.id, shared);
    },
  );

  app.delete<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id",
    authenticated,
    async (request, reply) => {
      await service.conversations.delete(callerOf(request), request.params.agent, request.params.id);
      reply.code(204).send();
    },
  );

  app.get<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id/messages",
    authenticated,
    async (request, reply) => {
      const { agent, id } = request.params;
      const caller = callerOf(request);
      // Visibility is decided (a 404 answered as JSON) before the body starts.
      const record = await service.conversations.visible(caller, agent, id);
      await sendJsonPieces(
        request,
        reply,
        (signal) => service.conversations.transcriptPieces(caller, record, signal),
        {
          stallMs: options.sseStallMs,
        },
      );
    },
  );

  app.get<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id/last-compaction",
    authenticated,
    async (request) => {
      return service.conversations.lastCompaction(callerOf(request), request.params.agent, request.params.id);
    },
  );

  app.post<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id/fork",
    authenticated,
    async (request) => {
      const caller = callerOf(request);
      // No body means all defaults; a JSON `null` is a body, and not an object.
      const body = (request.body === undefined ? {} : request.body) as Schemas["ForkRequest"];
      validator.body("forkConversation", body);
      return service.conversations.fork(caller, request.params.agent, request.params.id, body);
    },
  );

  app.post<{ Params: { app_id: string } }>(
    "/apps/:app_id",
    {
      onRequest: async (request) => {
        const { app_id } = request.params as { app_id: string };
        const key = headerValue(request.headers["x-api-key"]);
        // The flow endpoint takes the same header, so a revoked API key gets the API's revoked body here too.
        if (key !== undefined && keys.lookup(key)?.revoked) throw revokedKey();
        request.admission?.attribute(service.flows.authorize(app_id, key).workspaceId);
      },
    },
    async (request) => {
      validator.body("invokeFlow", request.body);
      const { input_vars } = request.body as Schemas["FlowInvokeRequest"];
      const flow = service.flows.authorize(request.params.app_id, headerValue(request.headers["x-api-key"]));
      const unhold = request.admission?.hold();
      // A flow runs its steps one turn at a time: it counts as one turn of its workspace while it runs.
      const leave = turnShares.enter(flow.workspaceId, `flow:${flow.id}`);
      try {
        return await service.flows.invoke(request.params.app_id, input_vars);
      } finally {
        leave();
        unhold?.();
      }
    },
  );

  return app;
}
