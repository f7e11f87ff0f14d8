/**
 * A request's admission slot is given back when its work ends, not when its client hangs up: every route's
 * handler holds the slot until it settles (a transcript read until its last page, a fork until its copy is
 * done), so requests whose clients left cannot pile up work past the caps.
 */
import type { FastifyReply, FastifyRequest, RouteHandlerMethod, RouteOptions } from "fastify";
import { asWorkspace } from "../store/pool-shares.ts";

/** For Fastify's onRoute hook: wraps the route's handler so that it holds the request's admission ticket. */
export function holdAdmissionWhileHandling(route: RouteOptions): void {
  const handler = route.handler as (
    this: unknown,
    request: FastifyRequest,
    reply: FastifyReply,
  ) => Promise<unknown>;
  route.handler = async function held(this: unknown, request: FastifyRequest, reply: FastifyReply) {
    const unhold = request.admission?.hold();
    try {
      // The handler's store queries count against its workspace's share of the database pool.
      const workspace = request.caller?.workspaceId ?? request.flow?.workspaceId;
      return await asWorkspace(workspace, () => handler.call(this, request, reply));
    } finally {
      unhold?.();
    }
  } as RouteHandlerMethod;
}
