/**
 * Fork a conversation: what the body's fields do to the child (at_turn, and the defaults a child records
 * or inherits). Judged by the child's memory and by the model its turns run on.
 */
import { type CheckContext, isRecord } from "../context.ts";
import { fail, skip } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import {
  carriesOutput,
  check,
  ensureStatus,
  ensureTurnOk,
  modelsInfo,
  prompts,
  sharedConversation,
  turnRanAs,
} from "./common.ts";

const SECTION = "Endpoints/Fork a conversation";

/** Asks for the remembered words; a model told several may list them all, which these checks allow. */
const RECALL_ALL = `${prompts.recall} If there were several, list them all.`;

/** The child's id of a 200 fork; fails the check otherwise. */
async function forkChild(
  ctx: CheckContext,
  parentId: string,
  body: Record<string, unknown> | undefined,
): Promise<string> {
  const res = await ctx.fork(parentId, body);
  ensureStatus(
    res,
    [200, 201],
    body === undefined ? "fork with no body" : `fork with ${JSON.stringify(body)}`,
  );
  if (!isRecord(res.body) || typeof res.body.conversation_id !== "string")
    fail("the fork result has no conversation_id", res.text.slice(0, 300));
  return res.body.conversation_id;
}

/** A conversation of three turns, each asking to remember its own word, each session waited for. */
interface ThreeTurns {
  id: string;
  words: [string, string, string];
}

function threeTurns(ctx: CheckContext): Promise<ThreeTurns> {
  return ctx.fixture("three-turns", async (c) => {
    const id = c.newConversationId();
    const words: [string, string, string] = [c.nonce(), c.nonce(), c.nonce()];
    for (const [i, word] of words.entries()) {
      const turn = await c.turn({ conversationId: id, prompt: prompts.remember(word) });
      ensureTurnOk(turn, `turn ${i + 1}`);
      if (!carriesOutput(turn.reading.blocks))
        skip(`turn ${i + 1} produced no output when asked to remember a word, so its session may be cleared`);
      // The API records the session after every turn with output and clears it only after an empty one.
      if ((await c.waitForSession(id)) === null)
        fail(`agent_session_id was null for --session-wait-ms after turn ${i + 1}, a turn that answered`);
    }
    return { id, words };
  });
}

/** The model id of the models list a turn ran on, if one can be told. */
function modelOf(turn: Parameters<typeof turnRanAs>[0], ids: string[]): string | undefined {
  return ids.find((id) => turn.reading?.model === id) ?? ids.find((id) => turnRanAs(turn, id));
}

export const forkChecks: CheckDef[] = [
  /**
   * at_turn copies history only up to that turn: a child forked at turn 1 of three does not know the third
   * turn, whether turns count from 0 or 1 and whether the bound is inclusive.
   */
  check({
    id: "FORK-AT-TURN-CUTS",
    level: "MUST",
    section: SECTION,
    title: "A fork at_turn 1, or at_turn 0, of a three-turn conversation does not carry the third turn",
    needs: [],
    async run(ctx) {
      const parent = await threeTurns(ctx);
      // 0 is a turn too (whether turns count from 0 or 1): a value that is falsy is still a value.
      for (const at_turn of [1, 0]) {
        const child = await forkChild(ctx, parent.id, { at_turn });
        const turn = await ctx.turn({ conversationId: child, prompt: RECALL_ALL });
        ensureTurnOk(turn, `the first turn of the child forked at turn ${at_turn}`);
        if (turn.text.trim() === "") fail(`the turn of the child forked at turn ${at_turn} produced no text`);
        if (turn.text.includes(parent.words[2]))
          fail(
            `the child forked at turn ${at_turn} remembers the word of the third turn: at_turn was not applied`,
            turn.text,
          );
      }
    },
  }),
  /** Without at_turn the child carries all turns, the last one included. */
  check({
    id: "FORK-DEFAULT-ALL-TURNS",
    level: "MUST",
    section: SECTION,
    title:
      "A fork without at_turn carries all turns (the child knows the last turn), with an empty body or none at all",
    needs: [],
    async run(ctx) {
      const parent = await threeTurns(ctx);
      // Every field of the body is optional, and so is the body itself: both ask for the defaults.
      for (const [body, how] of [
        [{}, "an empty body"],
        [undefined, "no body"],
      ] as const) {
        const child = await forkChild(ctx, parent.id, body);
        const turn = await ctx.turn({ conversationId: child, prompt: RECALL_ALL });
        ensureTurnOk(turn, `the first turn of the child forked with ${how}`);
        if (!turn.text.includes(parent.words[2]))
          fail(
            `the child of a fork with ${how} (no at_turn) does not remember the parent's last turn`,
            turn.text,
          );
      }
    },
  }),
  /** A child forked without model inherits the default its parent recorded (here from its own fork). */
  check({
    id: "FORK-MODEL-INHERITED",
    level: "MUST",
    section: SECTION,
    title: "A fork without model inherits the parent's recorded model (a grandchild of a fork with model)",
    needs: [],
    async run(ctx) {
      const models = await modelsInfo(ctx);
      if (!models.otherId)
        skip("the agent offers a single model; an inherited model cannot be told from the default");
      const parent = await sharedConversation(ctx);
      const child = await forkChild(ctx, parent.id, { model: models.otherId });
      const grandchild = await forkChild(ctx, child, {});
      const turn = await ctx.turn({ conversationId: grandchild, prompt: prompts.whichModel });
      ensureTurnOk(turn, "the grandchild's first turn");
      if (!turnRanAs(turn, models.otherId))
        fail(
          `the grandchild's turn did not run on ${models.otherId}, the model its parent recorded`,
          turn.text,
        );
    },
  }),
  /**
   * An automation given at fork time is recorded on the child: its turns get the automation's model. Only
   * observable when that model is not the agent's default.
   */
  check({
    id: "FORK-AUTOMATION-RECORDED",
    level: "MUST",
    section: SECTION,
    title: "Fork with automation records it as the child's default (its turns run on the automation's model)",
    needs: ["automation"],
    async run(ctx) {
      const automation = ctx.inputs.automation;
      const models = await modelsInfo(ctx);
      const probe = await ctx.turn({ prompt: prompts.whichModel, metadata: { automation } });
      ensureTurnOk(probe, "a turn with the automation");
      const automationModel = modelOf(probe, models.ids);
      if (!automationModel || automationModel === models.defaultId)
        skip(
          "a turn with the automation runs on the agent's default model, so a recorded automation cannot be told",
        );
      const parent = await sharedConversation(ctx);
      const child = await forkChild(ctx, parent.id, { automation });
      const turn = await ctx.turn({ conversationId: child, prompt: prompts.whichModel });
      ensureTurnOk(turn, "the child's first turn");
      if (!turnRanAs(turn, automationModel))
        fail(
          `the child's turn did not run on ${automationModel}, the model of the automation it was forked with`,
          turn.text,
        );
    },
  }),
];
