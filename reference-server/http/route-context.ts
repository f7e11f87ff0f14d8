/**
 * What every route handler reads: the server's configuration, its keys, the service, the request validator,
 * and the caller a request authenticated as (checked in onRequest, before the body is read).
 */
import type { FastifyRequest } from "fastify";
import type { KeyIndex } from "../config/keys.ts";
import type { FlowConfig, ServerConfig } from "../config/types.ts";
import type { Service } from "../service/index.ts";
import type { AdmissionTicket } from "./admission.ts";
import { type AuthenticatedCaller, authenticate, presentedKey } from "./auth.ts";
import type { TurnShares } from "./turn-shares.ts";
import type { RequestValidator } from "./validate.ts";

declare module "fastify" {
  interface FastifyRequest {
    caller?: AuthenticatedCaller;
    admission?: AdmissionTicket;
    /** The deployed flow a flow request's key was authorized for (onRequest of the flow route). */
    flow?: FlowConfig;
    /** Set on a turn's request: its stream logs its own line, with how far it got. */
    turnStream?: boolean;
  }
}

export interface AgentParams {
  agent: string;
}
export interface ConversationParams extends AgentParams {
  id: string;
}

export interface RouteContext {
  config: ServerConfig;
  keys: KeyIndex;
  service: Service;
  validator: RequestValidator;
  routingPrefix: string;
  /** How long a turn's client may leave events unread before it is dropped. */
  sseStallMs?: number;
  /** Longest silence on a turn's stream before a comment line. */
  keepAliveMs?: number;
  /** Turns running at once per workspace and per key. */
  turnShares: TurnShares;
}

/** The request's caller, authenticated once per request. */
export function callerOf(context: RouteContext, request: FastifyRequest): AuthenticatedCaller {
  request.caller ??= authenticate(context.config, context.keys, presentedKey(request.headers));
  return request.caller;
}

/**
 * Route options of an authenticated route: the key is checked in onRequest, before the body is read, so a
 * caller without a valid key learns nothing about its request (the API's 401, or the revoked body) whatever
 * the body holds.
 */
export function authenticated(context: RouteContext) {
  return {
    onRequest: async (request: FastifyRequest) => {
      request.admission?.attribute(callerOf(context, request).workspaceId);
    },
  };
}
