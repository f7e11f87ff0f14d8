/** Limits: the messages array, and the attachment caps (excess dropped silently). */
import { randomBytes } from "node:crypto";
import { fail } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import { attachment, check, ensureClientError, ensureTurnOk, prompts } from "./common.ts";
import { distinctMentions } from "./send.ts";

const SECTION = "Limits";
const MIB = 1024 * 1024;

export const limitChecks: CheckDef[] = [
  /** messages must be non-empty (the status is not shown: any 4xx). */
  check({
    id: "LIMIT-MESSAGES-NONEMPTY",
    level: "MUST",
    section: SECTION,
    title: "An empty or missing messages array is refused with a 4xx",
    needs: [],
    async run(ctx) {
      ensureClientError((await ctx.turn({ messages: [] })).response, "messages: []");
      const missing = await ctx.call("sendMessage", {
        method: "POST",
        url: `${ctx.agentUrl()}/v1/messages`,
        key: ctx.inputs.key,
        json: { stream: true },
      });
      ensureClientError(missing, "no messages field");
    },
  }),
  /** At most 10 files per turn; the rest are dropped silently. */
  check({
    id: "LIMIT-ATTACHMENT-COUNT",
    level: "MUST",
    section: SECTION,
    title: "At most 10 attachments arrive; the excess is dropped silently (no error)",
    needs: [],
    async run(ctx) {
      const files = Array.from({ length: 12 }, (_, i) =>
        attachment(`acc-att-${String(i + 1).padStart(2, "0")}.txt`, `file ${i}`),
      );
      const turn = await ctx.turn({ prompt: prompts.listAttachments, metadata: { attachments: files } });
      ensureTurnOk(turn);
      const seen = distinctMentions(turn.text, /acc-att-\d\d/);
      if (seen.size === 0) fail("the agent saw none of the attachments", turn.text);
      if (seen.size > 10) fail(`the agent saw ${seen.size} attachments`, turn.text);
    },
  }),
  /** At most 10 MiB decoded in total; what passes the cap is dropped silently. */
  check({
    id: "LIMIT-ATTACHMENT-SIZE",
    level: "MUST",
    section: SECTION,
    title: "Attachments past 10 MiB decoded in total are dropped silently (no error)",
    needs: [],
    async run(ctx) {
      const big = (name: string) => attachment(name, randomBytes(6 * MIB), "application/octet-stream");
      const turn = await ctx.turn({
        prompt: prompts.listAttachments,
        metadata: { attachments: [big("acc-big-1.bin"), big("acc-big-2.bin")] },
      });
      ensureTurnOk(turn);
      const seen = distinctMentions(turn.text, /acc-big-\d/);
      if (seen.size === 0) fail("the agent saw neither attachment (the first fits the cap)", turn.text);
      if (seen.size > 1) fail("both 6 MiB attachments arrived (12 MiB in total)", turn.text);
    },
  }),
];
