/**
 * The fields of every turn the named checks read, judged once they have all run: `X-Conversation-Id`, the
 * message id, the usage and its cost, the stop reason with `stream_tool_calls` (conformance/model/turn-meaning.ts holds the rules).
 * A check's own turns are one combination each (an agent kind, a route, a depth, a key); together the run's
 * turns are most of them, so a field filled wrongly under one combination only fails the check that owns its
 * rule, with the turn that showed it. The explorer judges its own turns the same way.
 */
import type { TurnRead } from "../context.ts";
import { LearnedChoices } from "../model/choices.ts";
import { expectRule } from "../model/mismatch.ts";
import { sendRules } from "../model/send-flags.ts";
import { judgeModelNamed, judgeTurnMeaning } from "../model/turn-meaning.ts";
import { Findings, type SweepFinding } from "./finding.ts";

/**
 * Ids a header carries as they are: visible ASCII, inner spaces, no `%`. How a header carries any other id
 * (non-ASCII letters, edge spaces, a `%` a client would decode) is not shown, so those are not judged here.
 */
const HEADER_SAFE = /^[\x21-\x24\x26-\x7e](?:[\x20-\x24\x26-\x7e]*[\x21-\x24\x26-\x7e])?$/;

/** Which turn `read` was, in words a report reader can find again. */
function describe(read: TurnRead, depth: number): string {
  const route = read.routed ? "the model-routed send" : `send-message on agent ${read.agent}`;
  const where = read.conversationId ? `, turn ${depth} of conversation ${read.conversationId}` : "";
  const flag = read.streamToolCalls ? " with stream_tool_calls" : "";
  return `a turn sent by ${read.madeBy} through ${route}${flag}${where}`;
}

/**
 * The first breach of each rule among the turns read to their end (a stream that ended in an error event or
 * broke the grammar is judged by the checks of those rules instead).
 */
export function judgeTurnsRead(
  turns: TurnRead[],
  models: ReadonlyMap<string, Array<Record<string, unknown>>> = new Map(),
): SweepFinding[] {
  const memory = { messageIds: new Set<string>(), choices: new LearnedChoices() };
  const depths = new Map<string, number>();
  const found = new Findings();
  for (const read of turns) {
    const depth = read.conversationId ? (depths.get(read.conversationId) ?? 0) + 1 : 1;
    if (read.conversationId) depths.set(read.conversationId, depth);
    const { reading } = read;
    try {
      // Whatever the stream then did, its 200 named the conversation (Endpoints/Send a message: the id
      // resolution table): the one asked for, or a new one.
      if (read.asked === undefined || HEADER_SAFE.test(read.asked))
        expectRule(
          sendRules.headerId,
          read.asked === undefined
            ? typeof read.header === "string" && read.header !== ""
            : read.header === read.asked,
          read.asked === undefined ? "a generated id" : JSON.stringify(read.asked),
          JSON.stringify(read.header ?? null),
        );
      if (reading.end !== "message_stop" || reading.violations.some((v) => v.severity === "error")) continue;
      judgeTurnMeaning(reading, read.streamToolCalls, memory);
      judgeModelNamed(reading.model, models.get(read.agent));
    } catch (error) {
      // The frames that carry the judged fields.
      const frames = reading.frames.filter((f) => f.event === "message_start" || f.event === "message_delta");
      found.add(error, describe(read, depth), frames.map((f) => f.raw).join("\n\n"));
    }
  }
  return found.list();
}
