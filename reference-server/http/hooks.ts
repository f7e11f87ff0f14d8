/**
 * What runs around every request: the body read as JSON whatever its type, CORS, draining on close,
 * admission (caps on pending work) before the key is checked, and the one log line per request.
 */
import { pipeline } from "node:stream";
import cors from "@fastify/cors";
import type { FastifyInstance } from "fastify";
import { hashKey } from "../config/keys.ts";
import { badRequest, overCap } from "../errors/catalogue.ts";
import { type Admission, countedBody, declaredLength } from "./admission.ts";
import { presentedKey } from "./auth.ts";
import { holdAdmissionWhileHandling } from "./held-work.ts";
import { BODY_LIMIT_BYTES } from "./request-limits.ts";
import { requestFields } from "./request-log.ts";
import "./route-context.ts";

export interface HookOptions {
  admission: Admission;
  /** Browser origins allowed to call the API (CORS); `*` allows any; empty or unset: no CORS. */
  corsOrigins?: string[];
}

export function registerHooks(app: FastifyInstance, options: HookOptions): void {
  const { admission } = options;
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

  app.addHook("onRoute", holdAdmissionWhileHandling);

  app.addHook("onResponse", async (request, reply) => {
    // A turn's stream writes its own line once it ends (below): its status says nothing of how it ended.
    if (request.turnStream) return;
    // One line per request; never headers or bodies (keys and prompts are secrets of the caller).
    request.log.info(requestFields(request, reply.statusCode, reply.elapsedTime), "request");
  });
}
