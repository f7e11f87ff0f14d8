/** The two send-message routes: a turn prepared by the service, then written as the API's event stream. */
import type { components } from "@agent-api/client/api-types";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { badRequest } from "../errors/catalogue.ts";
import type { AuthenticatedCaller } from "./auth.ts";
import { logTurnStream } from "./request-log.ts";
import { type AgentParams, authenticated, callerOf, type RouteContext } from "./route-context.ts";
import { writeEventStream } from "./sse.ts";

type Schemas = components["schemas"];

export function registerTurnRoutes(app: FastifyInstance, context: RouteContext): void {
  const { service, validator } = context;
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
    const leave = context.turnShares.enter(caller.workspaceId, caller.admissionKey ?? "");
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
          stallMs: context.sseStallMs,
          keepAliveMs: context.keepAliveMs,
        },
      );
      logTurnStream(request, reply, turn.conversationId, outcome);
    } finally {
      leave();
      unhold?.();
    }
  }

  app.post<{ Params: AgentParams }>(
    "/api/agents/:agent/v1/messages",
    authenticated(context),
    async (request, reply) => {
      callerOf(context, request);
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

  app.post("/api/agents/v1/messages", authenticated(context), async (request, reply) => {
    callerOf(context, request);
    validator.body("sendRoutedMessage", request.body);
    validator.newestUserMessage(request.body as Schemas["SendMessageRequest"]);
    const body = request.body as Schemas["SendMessageRequest"];
    if (typeof body.model !== "string" || body.model === "")
      throw badRequest("model is required: <routing_prefix>--<agent> or an agent name");
    const prefix = `${context.routingPrefix}--`;
    const agent = body.model.startsWith(prefix) ? body.model.slice(prefix.length) : body.model;
    await streamTurn(request, reply, agent, body, true);
  });
}
