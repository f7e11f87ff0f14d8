/** Send a message: every row of the conversation id resolution table. */
import { isRecord } from "../context.ts";
import { fail } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import {
  agentsBesides,
  check,
  ensureIncludes,
  ensureStatus,
  ensureTurnOk,
  memoryRound,
  otherAgents,
  prompts,
  rememberThenRecall,
  settledConversation,
} from "./common.ts";

const SECTION = "Endpoints/Send a message: conversation id resolution";

export const conversationIdChecks: CheckDef[] = [
  /** Omitted id: a new conversation whose id comes back in X-Conversation-Id. */
  check({
    id: "CONVID-OMITTED-GENERATED",
    level: "MUST",
    section: SECTION,
    title: "Without conversation_id a new conversation is created; its id is in X-Conversation-Id",
    needs: [],
    async run(ctx) {
      const turn = await ctx.turn({ prompt: prompts.hello });
      ensureTurnOk(turn);
      if (!turn.conversationId) fail("no X-Conversation-Id header");
      const conversation = await ctx.conversation(turn.conversationId);
      if (conversation.id !== turn.conversationId)
        fail(`the fetched conversation's id is ${conversation.id}`);
    },
  }),
  /** Unknown id: created with exactly that id. */
  check({
    id: "CONVID-UNKNOWN-VERBATIM",
    level: "MUST",
    section: SECTION,
    title: "An unknown conversation_id creates the conversation with exactly that id",
    needs: [],
    async run(ctx) {
      // Not a UUID, with characters a careless server might normalise: case, spaces and a plus (form
      // decoding), characters a URL may leave unescaped, a trailing dot (trimmed). No `%`: how a header carries
      // an id that a client would percent-decode is not shown.
      const id = `${ctx.newConversationId()}.Mixed_Case a+b ~!*(x).`;
      const turn = await ctx.turn({ conversationId: id, prompt: prompts.hello });
      ensureTurnOk(turn);
      if (turn.conversationId !== undefined && turn.conversationId !== id) {
        fail(`X-Conversation-Id is ${turn.conversationId}, not the id sent (${id})`);
      }
      const conversation = await ctx.conversation(id);
      if (conversation.id !== id) fail(`the stored id is ${conversation.id}, not ${id}`);
    },
  }),
  /** The caller's own id resumes with the prior context. */
  check({
    id: "CONVID-OWN-RESUMES",
    level: "MUST",
    section: SECTION,
    title:
      "The caller's own conversation_id resumes with the prior context (memory of an earlier turn), on every agent kind, through the model-routed send and after a share toggle",
    needs: [],
    async run(ctx) {
      const round = await memoryRound(ctx);
      if (round.sessionId === null) fail("agent_session_id was never recorded within --session-wait-ms");
      ensureIncludes(round.recall.text, round.nonce, "recall after resuming");
      // Rule 1 names no agent kind or route, and a share toggle changes `shared` only (States and transitions).
      const variants: Array<{
        label: string;
        agent?: string;
        routed?: boolean;
        between?: (id: string) => Promise<void>;
      }> = [
        ...agentsBesides(ctx).map((agent) => ({ label: `on agent ${agent}`, agent })),
        { label: "through the model-routed send", routed: true },
        {
          label: "after the owner toggled sharing on",
          between: async (id: string) => {
            ensureStatus(await ctx.share(id, { shared: true }), [200, 204], "share toggle between the turns");
          },
        },
      ];
      for (const variant of variants) {
        const again = await rememberThenRecall(ctx, variant);
        ensureIncludes(again.recall.text, again.nonce, `recall after resuming ${variant.label}`);
      }
    },
  }),
  /** A conversation of another agent of the same workspace: 404 "Conversation not found". */
  check({
    id: "CONVID-OTHER-AGENT-404",
    level: "MUST",
    section: SECTION,
    title:
      "A conversation_id of a different agent gives 404 with message Conversation not found, on every other agent of the workspace and through the model-routed send naming it",
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      // Each other agent kind, on its own send and on the routed send selecting it (Endpoints/Model-routed
      // send: the same behaviour), is a different agent for this conversation.
      for (const other of otherAgents(ctx)) {
        const sends = [
          { label: `send-message on agent ${other}`, turn: { agent: other } },
          {
            label: `the model-routed send naming ${other}`,
            turn: { routed: true, model: other, agent: other },
          },
        ];
        for (const { label, turn: how } of sends) {
          const turn = await ctx.turn({ ...how, conversationId: conv.id, prompt: prompts.hello });
          ensureStatus(turn.response, 404, `${label} with this conversation's id`);
          if (!turn.response.text.includes("Conversation not found"))
            fail(
              `${label}: the 404 body does not carry the message Conversation not found`,
              turn.response.text.slice(0, 300),
            );
        }
      }
    },
  }),
  /** A conversation of another workspace's agent: 404. */
  check({
    id: "CONVID-OTHER-WORKSPACE-404",
    level: "MUST",
    section: SECTION,
    title:
      "A conversation_id used on an agent of another workspace gives 404, also with that workspace's own key (message Conversation not found), for a channel's conversation too",
    needs: ["foreignAgent"],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      const agent = ctx.inputs.foreignAgent;
      const turn = await ctx.turn({ agent, conversationId: conv.id, prompt: prompts.hello });
      ensureStatus(turn.response, 404, "send-message on the foreign agent");
      // The other workspace's own caller, on its own agent: this workspace's conversations, the channel-owned
      // ones every caller of this workspace sees included, are "of a different workspace" to it.
      const key = ctx.inputs.foreignKey;
      if (!key) return ctx.note("the other workspace's own key was not tried (no --foreign-key)");
      const listed = await ctx.listConversations({ limit: "200" });
      const channel = (
        isRecord(listed.body) && Array.isArray(listed.body.conversations) ? listed.body.conversations : []
      ).find((c) => isRecord(c) && c.is_owner === false && c.shared === false && typeof c.id === "string");
      const ids = [
        { id: conv.id, what: "this workspace's conversation" },
        ...(isRecord(channel)
          ? [{ id: String(channel.id), what: "this workspace's channel conversation" }]
          : []),
      ];
      for (const { id, what } of ids) {
        const theirs = await ctx.turn({ agent, key, conversationId: id, prompt: prompts.hello });
        ensureStatus(
          theirs.response,
          404,
          `send-message by the other workspace's key on its agent, naming ${what}`,
        );
        if (!theirs.response.text.includes("Conversation not found"))
          fail(
            `the other workspace's key naming ${what}: the 404 does not say Conversation not found`,
            theirs.response.text.slice(0, 300),
          );
        ensureStatus(
          await ctx.getConversation(id, { agent, key }),
          404,
          `fetch by the other workspace's key on its agent of ${what}`,
        );
      }
    },
  }),
  /** Someone else's private conversation: 404, indistinguishable from a missing one. */
  check({
    id: "CONVID-OTHERS-UNSHARED-404",
    level: "MUST",
    section: SECTION,
    title: "Another member's unshared conversation gives 404, like a missing one (existence never leaked)",
    needs: ["memberKey"],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      const key = ctx.inputs.memberKey;
      const turn = await ctx.turn({ key, conversationId: conv.id, prompt: prompts.hello });
      ensureStatus(turn.response, 404, "send-message into another member's private conversation");
      const read = await ctx.getConversation(conv.id, { key });
      ensureStatus(read, 404, "fetch of another member's private conversation");
      const missingId = ctx.newConversationId();
      const missing = await ctx.getConversation(missingId, { key });
      ensureStatus(missing, 404, "fetch of a conversation that does not exist");
      if (comparable404(read.text, conv.id) !== comparable404(missing.text, missingId)) {
        fail(
          "the 404 for a private conversation differs from the 404 for a missing one",
          `${read.text}\n---\n${missing.text}`,
        );
      }
    },
  }),
  /** Someone else's shared conversation: readable, not writable. */
  check({
    id: "CONVID-OTHERS-SHARED-403",
    level: "MUST",
    section: SECTION,
    title: "Sending into another member's shared conversation gives 403",
    needs: ["memberKey"],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      ensureStatus(await ctx.share(conv.id, { shared: true }), [200, 204], "share toggle by the owner");
      const turn = await ctx.turn({
        key: ctx.inputs.memberKey,
        conversationId: conv.id,
        prompt: prompts.hello,
      });
      ensureStatus(turn.response, 403, "send-message into another member's shared conversation");
      // Shared on its own agent, the conversation is still "a different agent's" on every other: 404 there,
      // whoever asks (Conversation id resolution), never the 403 that would say it exists.
      for (const other of agentsBesides(ctx)) {
        const elsewhere = await ctx.turn({
          key: ctx.inputs.memberKey,
          agent: other,
          conversationId: conv.id,
          prompt: prompts.hello,
        });
        ensureStatus(
          elsewhere.response,
          404,
          `the member's send on agent ${other} naming another member's shared conversation of --agent`,
        );
      }
    },
  }),
];

/**
 * A 404 body as far as it may leak existence: the id replaced, and per-request fields (request or trace ids,
 * timestamps) left out, since bodies that differ only by them say nothing about the conversation.
 */
function comparable404(text: string, id: string): string {
  const replaced = text.replaceAll(id, "<id>");
  let parsed: unknown;
  try {
    parsed = JSON.parse(replaced);
  } catch {
    return replaced;
  }
  const perRequest = /^(request|trace|correlation|span)[_-]?id$|^(timestamp|time|date|ts)$/i;
  const strip = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(strip);
    if (value === null || typeof value !== "object") return value;
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>)
        .filter(([key]) => !perRequest.test(key))
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([key, inner]) => [key, strip(inner)]),
    );
  };
  return JSON.stringify(strip(parsed));
}
