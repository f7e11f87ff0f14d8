/** Limits: the messages array, and the attachment caps (excess dropped silently). */
import { randomBytes } from "node:crypto";
import { fail } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import { attachment, check, ensureClientError, ensureTurnOk, prompts } from "./common.ts";
import { distinctMentions, toolResultText } from "./replies.ts";

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
  /**
   * At most 10 files per turn; the rest are dropped silently. "Anything past the caps" is dropped, so the
   * first 10 arrive: judged by which exact names the agent saw, not by a count or a range ("01 to 10").
   */
  check({
    id: "LIMIT-ATTACHMENT-COUNT",
    level: "MUST",
    section: SECTION,
    title: "At most 10 attachments arrive (the first 10); the excess is dropped silently (no error)",
    needs: [],
    async run(ctx) {
      const stems = Array.from({ length: 12 }, (_, i) => `acc-att-${String(i + 1).padStart(2, "0")}`);
      const files = stems.map((stem, i) => attachment(`${stem}.txt`, `file ${i}`));
      const turn = await ctx.turn({
        prompt: `${prompts.listAttachments} Write out each file's full name.`,
        streamToolCalls: true,
        metadata: { attachments: files },
      });
      ensureTurnOk(turn);
      const said = distinctMentions(turn.text, /acc-att-\d\d(?!\d)/);
      // A listing the agent's tools made (ls .uploads) also shows what arrived; it can only add names the
      // reply left out, never the excess (a tool may see files of earlier turns).
      const listed = distinctMentions(toolResultText(turn), /acc-att-\d\d(?!\d)/);
      const excess = stems.slice(10).filter((s) => said.has(s));
      const missing = stems.slice(0, 10).filter((s) => !said.has(s) && !listed.has(s));
      if (excess.length > 0)
        fail(`attachments past the cap of 10 arrived: ${excess.join(", ")}`, turn.text.slice(0, 1500));
      if (missing.length === 10) fail("the agent saw none of the attachments", turn.text.slice(0, 1500));
      if (missing.length > 0)
        fail(
          `only ${10 - missing.length} of the first 10 attachments arrived (missing ${missing.join(", ")})`,
          turn.text.slice(0, 1500),
        );
    },
  }),
  /**
   * At most 10 MiB decoded in total; what passes the cap is dropped silently. 6 MiB + 4.5 MiB: the first
   * fits, the second would take the total past the cap. The request body is ~14.7 MB of JSON: a deployment
   * whose body limit refuses it cannot take the 10 MiB of attachments the API allows, so a 413 fails the
   * check (a proxy's own 413 page is named as such by the context, with the fix).
   */
  check({
    id: "LIMIT-ATTACHMENT-SIZE",
    level: "MUST",
    section: SECTION,
    title:
      "Attachments past 10 MiB decoded in total are dropped silently (no error); within it, exactly 10 MiB (10 × 1024 × 1024 bytes) included, all arrive",
    needs: [],
    async run(ctx) {
      const big = (name: string, bytes: number) =>
        attachment(name, randomBytes(bytes), "application/octet-stream");
      const turn = await ctx.turn({
        prompt: prompts.listAttachments,
        metadata: { attachments: [big("acc-big-1.bin", 6 * MIB), big("acc-big-2.bin", 4.5 * MIB)] },
      });
      if (turn.status === 413)
        fail(
          "the API refused the request body (10.5 MiB of attachments, ~14.7 MB as base64 JSON) with 413: its body limit is below what 10 MiB of attachments need; raise it to at least 16 MB",
          turn.response.text.slice(0, 500),
        );
      ensureTurnOk(turn);
      const seen = distinctMentions(turn.text, /acc-big-\d/);
      if (!seen.has("acc-big-1"))
        fail("the agent did not see acc-big-1.bin (6 MiB, within the cap)", turn.text.slice(0, 1500));
      if (seen.has("acc-big-2"))
        fail(
          "acc-big-2.bin arrived too: 10.5 MiB decoded in total, past the 10 MiB cap",
          turn.text.slice(0, 1500),
        );
      // At the cap, everything arrives: 6 + 4 MiB decoded is exactly 10 MiB, "at most" the cap (which counts
      // decoded bytes in MiB, 10 × 1024 × 1024, though the base64 the body carries is 13.3 MiB).
      const under = await ctx.turn({
        prompt: prompts.listAttachments,
        metadata: { attachments: [big("acc-fit-1.bin", 6 * MIB), big("acc-fit-2.bin", 4 * MIB)] },
      });
      ensureTurnOk(under, "the turn with exactly 10 MiB of attachments");
      const arrived = distinctMentions(under.text, /acc-fit-\d/);
      for (const name of ["acc-fit-1", "acc-fit-2"])
        if (!arrived.has(name))
          fail(
            `${name}.bin did not arrive although the two attachments are exactly 10 MiB decoded, at most the 10 MiB cap`,
            under.text.slice(0, 1500),
          );
    },
  }),
];
