/** The API's JSON routes: models, conversations (list, read, share, delete, transcript, compaction, fork) and flows. */
import type { components } from "@agent-api/client/api-types";
import type { FastifyInstance } from "fastify";
import type { FlowConfig } from "../config/types.ts";
import { revokedKey } from "../errors/catalogue.ts";
import { headerValue } from "./auth.ts";
import { sendJsonPieces } from "./json-stream.ts";
import {
  type AgentParams,
  authenticated,
  type ConversationParams,
  callerOf,
  type RouteContext,
} from "./route-context.ts";

type Schemas = components["schemas"];

export function registerJsonRoutes(app: FastifyInstance, context: RouteContext): void {
  const { keys, service, validator } = context;
  app.get<{ Params: AgentParams }>(
    "/api/agents/:agent/v1/models",
    authenticated(context),
    async (request) => {
      return service.models(callerOf(context, request), request.params.agent);
    },
  );

  app.get<{ Params: AgentParams }>(
    "/api/agents/:agent/conversations",
    authenticated(context),
    async (request) => {
      const caller = callerOf(context, request);
      const query = validator.query("listConversations", request.query as Record<string, unknown>);
      return service.conversations.list(caller, request.params.agent, query);
    },
  );

  app.get<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id",
    authenticated(context),
    async (request) => {
      return service.conversations.get(callerOf(context, request), request.params.agent, request.params.id);
    },
  );

  app.post<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id",
    authenticated(context),
    async (request) => {
      const caller = callerOf(context, request);
      validator.body("setConversationSharing", request.body);
      const { shared } = request.body as Schemas["ShareRequest"];
      return service.conversations.share(caller, request.params.agent, request.params.id, shared);
    },
  );

  app.delete<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id",
    authenticated(context),
    async (request, reply) => {
      await service.conversations.delete(callerOf(context, request), request.params.agent, request.params.id);
      reply.code(204).send();
    },
  );

  app.get<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id/messages",
    authenticated(context),
    async (request, reply) => {
      const { agent, id } = request.params;
      const caller = callerOf(context, request);
      // Visibility is decided (a 404 answered as JSON) before the body starts.
      const record = await service.conversations.visible(caller, agent, id);
      await sendJsonPieces(
        request,
        reply,
        (signal) => service.conversations.transcriptPieces(caller, record, signal),
        {
          stallMs: context.sseStallMs,
        },
      );
    },
  );

  app.get<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id/last-compaction",
    authenticated(context),
    async (request) => {
      return service.conversations.lastCompaction(
        callerOf(context, request),
        request.params.agent,
        request.params.id,
      );
    },
  );

  app.post<{ Params: ConversationParams }>(
    "/api/agents/:agent/conversations/:id/fork",
    authenticated(context),
    async (request) => {
      const caller = callerOf(context, request);
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
        request.flow = service.flows.authorize(app_id, key);
        request.admission?.attribute(request.flow.workspaceId);
      },
    },
    async (request) => {
      validator.body("invokeFlow", request.body);
      const { input_vars } = request.body as Schemas["FlowInvokeRequest"];
      // Authorized in onRequest, before the body was read; the flow it found is the one this request runs.
      const flow = request.flow as FlowConfig;
      const unhold = request.admission?.hold();
      // A flow runs its steps one turn at a time: it counts as one turn of its workspace while it runs.
      const leave = context.turnShares.enter(flow.workspaceId, `flow:${flow.id}`);
      try {
        return await service.flows.invoke(request.params.app_id, input_vars);
      } finally {
        leave();
        unhold?.();
      }
    },
  );
}
