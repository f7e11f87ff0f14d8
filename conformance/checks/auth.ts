/** Authentication: the key header, roles, workspaces, and owner-only operations. */
import { type ApiResponse, type CheckContext, isRecord } from "../context.ts";
import { fail } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import {
  check,
  ensureClientError,
  ensureNotCrowdedOut,
  ensureStatus,
  ensureTurnOk,
  everyAgent,
  justBefore,
  prompts,
  settledConversation,
  sharedConversation,
} from "./common.ts";

const SECTION = "Authentication";

/**
 * Authentication 4 holds on every route, not only the two a client meets first: each route of the API asked
 * with `key` (the conversation routes on a conversation the owner has), on every agent the inputs name (the
 * lists and models), and through the model-routed send. No turn runs: a deployment that authenticates before
 * anything else answers every one of them without running a turn.
 */
async function everyRoute(
  ctx: CheckContext,
  key: string | null,
  judge: (res: ApiResponse, what: string) => void,
): Promise<void> {
  const own = await sharedConversation(ctx);
  const options = { key };
  for (const agent of everyAgent(ctx)) {
    judge(await ctx.listModels({ key, agent }), `models list of ${agent}`);
    judge(await ctx.listConversations({}, { key, agent }), `conversation list of ${agent}`);
  }
  judge(await ctx.getConversation(own.id, options), "single-conversation fetch");
  judge(await ctx.transcript(own.id, options), "transcript");
  judge(await ctx.lastCompaction(own.id, options), "last compaction");
  judge(await ctx.share(own.id, { shared: true }, options), "share toggle");
  judge(await ctx.fork(own.id, {}, options), "fork");
  judge(await ctx.deleteConversation(own.id, options), "delete");
  const routed = await ctx.turn({ key, routed: true, model: ctx.inputs.agent, prompt: prompts.hello });
  judge(routed.response, "model-routed send");
}

export const authChecks: CheckDef[] = [
  /** No key header at all: 401 on reads and on turns. */
  check({
    id: "AUTH-401-MISSING",
    level: "MUST",
    section: SECTION,
    title: "A request without X-Api-Key gets 401",
    needs: [],
    async run(ctx) {
      ensureStatus(await ctx.listModels({ key: null }), 401, "models list without a key");
      ensureStatus(await ctx.listConversations({}, { key: null }), 401, "conversation list without a key");
      const turn = await ctx.turn({ key: null, prompt: prompts.hello });
      ensureStatus(turn.response, 401, "send-message without a key");
    },
  }),
  /** A key the service never issued: 401. */
  check({
    id: "AUTH-401-UNKNOWN",
    level: "MUST",
    section: SECTION,
    title:
      "An unrecognized key gets 401 on every route, whatever agent (another workspace's too) or body the request names",
    needs: [],
    async run(ctx) {
      const key = `acc-unknown-${ctx.nonce()}-${ctx.nonce()}`;
      ensureStatus(await ctx.listModels({ key }), 401, "models list with an unknown key");
      ensureStatus(
        (await ctx.turn({ key, prompt: prompts.hello })).response,
        401,
        "send-message with an unknown key",
      );
      // Authentication 4 whatever else the request holds: a key that names no workspace is 401 before any
      // agent is looked up (another workspace's agent) and before the body is judged (delivery "async").
      if (ctx.inputs.foreignAgent) {
        const agent = ctx.inputs.foreignAgent;
        ensureStatus(
          await ctx.listModels({ key, agent }),
          401,
          "the foreign agent's models list with an unknown key",
        );
        const turn = await ctx.turn({ key, agent, prompt: prompts.hello });
        ensureStatus(turn.response, 401, "send-message to the foreign agent with an unknown key");
      }
      for (const routed of [false, true]) {
        const turn = await ctx.turn({
          key,
          prompt: prompts.hello,
          metadata: { delivery: "async" },
          ...(routed && { routed: true, model: ctx.inputs.agent }),
        });
        ensureStatus(
          turn.response,
          401,
          `${routed ? "the model-routed send" : "send-message"} with delivery "async" and an unknown key`,
        );
      }
      await everyRoute(ctx, key, (res, what) => ensureStatus(res, 401, `${what} with an unknown key`));
    },
  }),
  /** Revoked keys say so, in exactly the API's body. */
  check({
    id: "AUTH-401-REVOKED",
    level: "MUST",
    section: SECTION,
    title:
      'A revoked key gets 401 with body {"message": "API key has been revoked"}, on every route, whatever agent (another workspace\'s, an unknown one) it names',
    needs: ["revokedKey"],
    async run(ctx) {
      const judge = (res: ApiResponse, what: string) => {
        ensureStatus(res, 401, `${what} with the revoked key`);
        if (!isRecord(res.body) || res.body.message !== "API key has been revoked") {
          fail(`${what}: the body's message is not "API key has been revoked"`, res.text.slice(0, 300));
        }
      };
      const key = ctx.inputs.revokedKey;
      judge((await ctx.turn({ key, prompt: prompts.hello })).response, "send-message");
      await everyRoute(ctx, key ?? null, judge);
      // Authentication 4 before any agent is looked up, as for an unknown key: another workspace's agent and an
      // agent no workspace has answer the revoked key 401 too, never the 404 a valid key would get there.
      const elsewhere = [
        ...(ctx.inputs.foreignAgent ? [ctx.inputs.foreignAgent] : []),
        `acc-no-agent-${ctx.nonce()}`,
      ];
      for (const agent of elsewhere) {
        judge(await ctx.listModels({ key, agent }), `models list of ${agent}`);
        judge(await ctx.listConversations({}, { key, agent }), `conversation list of ${agent}`);
        judge((await ctx.turn({ key, agent, prompt: prompts.hello })).response, `send-message to ${agent}`);
      }
    },
  }),
  /** The models list doubles as the "do this agent and key work together" probe. */
  check({
    id: "AUTH-KEY-WORKS",
    level: "MUST",
    section: SECTION,
    title: "The given key and agent work together (models list answers 200)",
    needs: [],
    async run(ctx) {
      ensureStatus(await ctx.listModels(), 200, "models list");
    },
  }),
  /** A key reaches only its own workspace's agents. */
  check({
    id: "AUTH-404-FOREIGN-AGENT",
    level: "MUST",
    section: SECTION,
    title:
      "An agent of another workspace gives 404 (models list, conversation list, send-message, and the model-routed send naming it)",
    needs: ["foreignAgent"],
    async run(ctx) {
      const agent = ctx.inputs.foreignAgent;
      ensureStatus(await ctx.listModels({ agent }), 404, "models list of the foreign agent");
      ensureStatus(await ctx.listConversations({}, { agent }), 404, "conversation list of the foreign agent");
      const turn = await ctx.turn({ agent, conversationId: ctx.newConversationId(), prompt: prompts.hello });
      ensureStatus(turn.response, 404, "send-message to the foreign agent");
      // An agent name no workspace has is no agent of the key's workspace either: the same 404, on the models
      // list that "can be used to check that an agent name and key work together" above all.
      const unknown = `acc-no-such-agent-${ctx.nonce()}`;
      ensureStatus(await ctx.listModels({ agent: unknown }), 404, `models list of an agent named ${unknown}`);
      ensureStatus(
        await ctx.listConversations({}, { agent: unknown }),
        404,
        `conversation list of an agent named ${unknown}`,
      );
      // Another workspace's key reaches none of this workspace's agents (Authentication 2), on every route.
      if (ctx.inputs.foreignKey)
        await everyRoute(ctx, ctx.inputs.foreignKey, (res, what) =>
          ensureStatus(res, 404, `${what} with another workspace's key`),
        );
      // The routed send has "the same body and behaviour" (Endpoints/Model-routed send): its `model` selects
      // the agent, in either form, and an agent the key does not reach is the same 404 there.
      const names = [agent, ...(ctx.inputs.routingPrefix ? [`${ctx.inputs.routingPrefix}--${agent}`] : [])];
      for (const model of names) {
        const routed = await ctx.turn({
          routed: true,
          model,
          conversationId: ctx.newConversationId(),
          prompt: prompts.hello,
        });
        ensureStatus(routed.response, 404, `the model-routed send with model ${JSON.stringify(model)}`);
      }
    },
  }),
  /** Viewers read but do not run turns. */
  check({
    id: "AUTH-403-VIEWER-SEND",
    level: "MUST",
    section: SECTION,
    title: "A Viewer-role key gets 403 when sending a message",
    needs: ["viewerKey"],
    async run(ctx) {
      const turn = await ctx.turn({
        key: ctx.inputs.viewerKey,
        conversationId: ctx.newConversationId(),
        prompt: prompts.hello,
      });
      ensureStatus(turn.response, 403, "send-message with the Viewer key");
    },
  }),
  /** Viewers can read conversations: the list, and a conversation shared with the workspace. */
  check({
    id: "AUTH-VIEWER-READS",
    level: "MUST",
    section: SECTION,
    title:
      "A Viewer-role key can read conversations (a shared conversation in its list, the single fetch, the transcript, the last compaction; a channel's it lists, too)",
    needs: ["viewerKey"],
    async run(ctx) {
      const key = ctx.inputs.viewerKey;
      const conv = await settledConversation(ctx);
      ensureStatus(await ctx.share(conv.id, { shared: true }), [200, 204], "share toggle by the owner");
      const began = String((await ctx.conversation(conv.id)).created_at);
      const list = await ctx.listConversations({ limit: "200", since: justBefore(began) }, { key });
      ensureStatus(list, 200, "conversation list with the Viewer key");
      const entries =
        isRecord(list.body) && Array.isArray(list.body.conversations) ? list.body.conversations : [];
      ensureNotCrowdedOut(entries, [conv.id], "the Viewer's list since the conversation began");
      const ids = entries.map((c) => (isRecord(c) ? c.id : undefined));
      // Shared with the workspace is visible to a caller: in the list, not only by id.
      if (!ids.includes(conv.id))
        fail(
          `the Viewer's list (limit 200, since the conversation began) leaves out ${conv.id}, shared with the workspace`,
        );
      ensureStatus(await ctx.getConversation(conv.id, { key }), 200, "Viewer reads the shared conversation");
      ensureStatus(await ctx.transcript(conv.id, { key }), 200, "Viewer reads the shared transcript");
      // Last compaction is a read of the conversation too (Endpoints: it changes nothing).
      ensureStatus(
        await ctx.lastCompaction(conv.id, { key }),
        200,
        "Viewer reads the shared last compaction",
      );
      // The other kind a Viewer sees (Resources/Conversation, visibility): one owned by a channel, listed to it
      // as neither its own nor shared. It reads those too, on every route.
      const own = await ctx.listConversations({ limit: "200" }, { key });
      const channels = (
        isRecord(own.body) && Array.isArray(own.body.conversations) ? own.body.conversations : []
      )
        .filter((c) => isRecord(c) && c.is_owner === false && c.shared === false && typeof c.id === "string")
        .slice(0, 2);
      for (const c of channels) {
        const id = String((c as Record<string, unknown>).id);
        ensureStatus(
          await ctx.getConversation(id, { key }),
          200,
          `Viewer reads ${id}, a channel's conversation it lists`,
        );
        ensureStatus(
          await ctx.transcript(id, { key }),
          200,
          `Viewer reads the transcript of ${id}, a channel's conversation it lists`,
        );
        ensureStatus(
          await ctx.lastCompaction(id, { key }),
          200,
          `Viewer reads the last compaction of ${id}, a channel's conversation it lists`,
        );
      }
    },
  }),
  /** Only the owner toggles sharing, with no admin override (the main key may be an Admin). */
  check({
    id: "AUTH-OWNER-ONLY-SHARE",
    level: "MUST",
    section: SECTION,
    title: "Only the owner may toggle sharing (no admin override), whatever value another member sends",
    needs: ["memberKey"],
    async run(ctx) {
      const owner = ctx.inputs.memberKey;
      const conv = await settledConversation(ctx, prompts.hello, owner);
      ensureStatus(
        await ctx.share(conv.id, { shared: true }, { key: owner }),
        [200, 204],
        "share toggle by the owner",
      );
      const attempt = await ctx.share(conv.id, { shared: false });
      ensureClientError(attempt, "share toggle by another member");
      // A toggle that would change nothing is still a toggle by someone who may not make it.
      ensureClientError(
        await ctx.share(conv.id, { shared: true }),
        "share toggle by another member sending the value the conversation already has",
      );
      const after = await ctx.conversation(conv.id, { key: owner });
      if (after.shared !== true) fail("another member's share toggle changed the conversation");
    },
  }),
  /** Only the owner deletes, with no admin override. */
  check({
    id: "AUTH-OWNER-ONLY-DELETE",
    level: "MUST",
    section: SECTION,
    title: "Only the owner may delete a conversation (no admin override)",
    needs: ["memberKey"],
    async run(ctx) {
      const owner = ctx.inputs.memberKey;
      const conv = await settledConversation(ctx, prompts.hello, owner);
      ensureStatus(
        await ctx.share(conv.id, { shared: true }, { key: owner }),
        [200, 204],
        "share toggle by the owner",
      );
      ensureClientError(await ctx.deleteConversation(conv.id), "delete by another member");
      ensureStatus(
        await ctx.getConversation(conv.id, { key: owner }),
        200,
        "the conversation after the refused delete",
      );
    },
  }),
  /** A turn with the member key works (the second member may run turns). */
  check({
    id: "AUTH-OPERATOR-SENDS",
    level: "MUST",
    section: SECTION,
    title: "A second member's key (Admin, Builder or Operator) can run a turn",
    needs: ["memberKey"],
    async run(ctx) {
      const turn = await ctx.turn({
        key: ctx.inputs.memberKey,
        conversationId: ctx.newConversationId(),
        prompt: prompts.hello,
      });
      ensureTurnOk(turn, "turn with the member key");
    },
  }),
];
