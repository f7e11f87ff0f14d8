/** The API's client guidance: wait for the session before resuming; retry an empty turn. */
import { fail, skip } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import {
  ANSWERED_SILENCE,
  carriesOutput,
  check,
  ensureIncludes,
  ensureTurnOk,
  memoryRound,
  prompts,
} from "./common.ts";

const SECTION = "Errors/Client guidance";

export const guidanceChecks: CheckDef[] = [
  /** Polling every 0.25 s until agent_session_id is set restores memory on the next turn. */
  check({
    id: "GUIDE-POLL-RESTORES-MEMORY",
    level: "SHOULD",
    section: SECTION,
    title: "Polling the conversation (0.25 s) until agent_session_id is set, then resuming, keeps memory",
    needs: [],
    async run(ctx) {
      const round = await memoryRound(ctx);
      if (round.sessionId === null)
        fail(`agent_session_id was not set within ${ctx.inputs.sessionWaitMs} ms`);
      ensureIncludes(round.recall.text, round.nonce, "recall after waiting");
    },
  }),
  /** Retrying a turn that returned nothing is the recovery: the retry answers. */
  check({
    id: "GUIDE-RETRY-AFTER-EMPTY",
    level: "SHOULD",
    section: SECTION,
    title: "Retrying a conversation whose turn returned nothing yields an answer",
    needs: [],
    async run(ctx) {
      const id = ctx.newConversationId();
      const empty = await ctx.turn({ conversationId: id, prompt: prompts.noOutput });
      ensureTurnOk(empty, "no-output turn", { mayBeSilent: true });
      // A retry after a turn that did answer says nothing about recovering from an empty one.
      if (carriesOutput(empty.reading.blocks)) skip(ANSWERED_SILENCE);
      const retry = await ctx.turn({ conversationId: id, prompt: prompts.hello });
      ensureTurnOk(retry, "retry");
      if (retry.text.trim() === "") fail("the retry produced no text");
    },
  }),
];
