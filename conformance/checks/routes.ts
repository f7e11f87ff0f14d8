/**
 * Rules that hold on every conversation route, not only on the one the API's sentence names: the key
 * header, 404 for a conversation of another agent or another member's private one, and the title.
 */
import type { ApiResponse, CheckContext } from "../context.ts";
import { fail } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import {
  agentsBesides,
  attachment,
  check,
  ensureStatus,
  ensureTurnOk,
  otherAgents,
  prompts,
  settledConversation,
  sharedConversation,
} from "./common.ts";

/** Every route addressing one conversation, called with the given key on the given agent's path. */
function conversationRoutes(
  ctx: CheckContext,
  id: string,
  key: string | null | undefined,
  agent?: string,
): Array<[string, () => Promise<ApiResponse>]> {
  const options = { key, agent };
  return [
    ["get conversation", () => ctx.getConversation(id, options)],
    ["get transcript", () => ctx.transcript(id, options)],
    ["get last compaction", () => ctx.lastCompaction(id, options)],
    ["share toggle", () => ctx.share(id, { shared: true }, options)],
    ["fork", () => ctx.fork(id, {}, options)],
    ["delete", () => ctx.deleteConversation(id, options)],
  ];
}

/** The conversation is still there for its owner, private: a refused request changed nothing. */
async function ensureUnchanged(ctx: CheckContext, id: string, key?: string): Promise<void> {
  const after = await ctx.conversation(id, { key });
  if (after.shared !== false) fail("a refused share toggle made the conversation shared");
}

export const routeChecks: CheckDef[] = [
  /** "Every request carries the header": a missing or unknown key gets 401 on each conversation route. */
  check({
    id: "AUTH-401-EVERY-ROUTE",
    level: "MUST",
    section: "Authentication",
    title: "Every conversation route and the model-routed send give 401 without a key or with an unknown one",
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      const unknown = `acc-unknown-${ctx.nonce()}-${ctx.nonce()}`;
      for (const [label, key] of [
        ["without a key", null],
        ["with an unknown key", unknown],
      ] as const) {
        for (const [route, call] of conversationRoutes(ctx, conv.id, key))
          ensureStatus(await call(), 401, `${route} ${label}`);
        const routed = await ctx.turn({ routed: true, model: ctx.inputs.agent, key, prompt: prompts.hello });
        ensureStatus(routed.response, 401, `model-routed send ${label}`);
      }
      await ensureUnchanged(ctx, conv.id);
    },
  }),
  /** A conversation addressed through another agent's path is not found, on every route. */
  check({
    id: "ERR-404-OTHER-AGENT-ROUTES",
    level: "MUST",
    section: "Errors",
    title:
      "Every conversation route on a different agent's path gives 404 with message Conversation not found",
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      // On the path of every other agent kind the inputs name: each is "a different agent".
      for (const other of otherAgents(ctx))
        for (const [route, call] of conversationRoutes(ctx, conv.id, undefined, other)) {
          const res = await call();
          ensureStatus(res, 404, `${route} on agent ${other}`);
          if (!res.text.includes("Conversation not found"))
            fail(
              `${route} on agent ${other}: the 404 does not say Conversation not found`,
              res.text.slice(0, 300),
            );
        }
      await ensureUnchanged(ctx, conv.id);
    },
  }),
  /** Another member's private conversation is not found on any route (existence never leaked). */
  check({
    id: "ERR-404-PRIVATE-ROUTES",
    level: "MUST",
    section: "Errors",
    title: "Every conversation route gives 404 for another member's unshared conversation",
    needs: ["memberKey"],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      for (const [route, call] of conversationRoutes(ctx, conv.id, ctx.inputs.memberKey))
        ensureStatus(await call(), 404, `${route} by another member`);
      await ensureUnchanged(ctx, conv.id);
    },
  }),
  /** The title depends on the first prompt: two different first prompts give two different titles. */
  check({
    id: "GET-TITLE-FROM-PROMPT",
    level: "MUST",
    section: "Resources/Conversation",
    title:
      "title is derived from the first prompt, a string or text blocks, on every agent kind and through the model-routed send (different first prompts give different, non-empty titles)",
    needs: [],
    async run(ctx) {
      const first = await sharedConversation(ctx);
      // A turn's attachments are files, not its prompt: the title comes from the prompt all the same.
      // Its name carries a nonce, so the titles sweep tells a title taken from it (sweeps/titles.ts).
      const turn = await ctx.turn({
        conversationId: ctx.newConversationId(),
        prompt: "Name the three primary colours of paint.",
        metadata: { attachments: [attachment(`acc-colours-${ctx.nonce()}.txt`, ctx.nonce())] },
      });
      ensureTurnOk(turn);
      // A first prompt sent as text blocks is a prompt too.
      // ... and a conversation whose id the deployment generated is one too: the rule holds whichever way the
      // id came (the string prompt's conversation above names its id).
      const blocks = await ctx.turn({
        prompt: [{ type: "text", text: "List the planets of the solar system." }],
      });
      ensureTurnOk(blocks, "turn whose first prompt is text blocks");
      if (!blocks.conversationId) fail("a new conversation's turn carries no X-Conversation-Id");
      const a = await ctx.conversation(first.id);
      const b = await ctx.conversation(String(turn.conversationId));
      const c3 = await ctx.conversation(String(blocks.conversationId));
      // The rule names no agent kind: each other agent's conversation gets a title of its own prompt too.
      const elsewhere: Array<Record<string, unknown>> = [];
      // Two each, so a title every conversation of an agent gets alike shows.
      for (const agent of agentsBesides(ctx))
        for (const prompt of [
          `Describe how a rainbow forms (${agent}).`,
          `Explain why the sea is salty (${agent}).`,
        ]) {
          const made = await ctx.turn({ agent, prompt });
          ensureTurnOk(made, `first turn on agent ${agent}`);
          if (!made.conversationId)
            fail(`a new conversation's turn on agent ${agent} carries no X-Conversation-Id`);
          elsewhere.push(await ctx.conversation(made.conversationId, { agent }));
        }
      // And whichever route created it: two conversations the model-routed send made, with different prompts.
      for (const prompt of ["Summarise the water cycle (routed).", "Name three kinds of clouds (routed)."]) {
        const made = await ctx.turn({ routed: true, model: ctx.inputs.agent, prompt });
        ensureTurnOk(made, "first turn through the model-routed send");
        if (!made.conversationId)
          fail("the model-routed send of a new conversation carries no X-Conversation-Id");
        elsewhere.push(await ctx.conversation(made.conversationId));
      }
      const all = [a, b, c3, ...elsewhere];
      for (const c of all) {
        if (typeof c.title !== "string" || c.title.trim() === "") fail(`${c.id} has an empty title`);
        if (c.title === c.id) fail(`the title of ${c.id} is its id, not derived from its prompt`);
      }
      for (const [i, x] of all.entries())
        for (const y of all.slice(i + 1))
          if (x.title === y.title)
            fail(
              `conversations with different first prompts (${x.id}, ${y.id}) share the title ${JSON.stringify(x.title)}`,
            );
    },
  }),
];
