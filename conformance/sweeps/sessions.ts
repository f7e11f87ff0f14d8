/**
 * The session pointer after a turn with output (States and transitions: "a turn produced output" →
 * `agent_session_id` becomes non-null, "recorded a few seconds after the stream closes"), judged on every
 * conversation a named check waited on, not only the one STATE-SESSION-RECORDED makes: whoever's key, agent,
 * route or depth it was. A wait that expired with the pointer still null fails that check when the turn
 * before it is known to have produced output and nothing else ran in the conversation meanwhile: the turn's
 * stream reached `message_stop` with no error event and carried a block that is not blank text, it was not
 * isolated (whether a throwaway sandbox records a session is not shown), and no other turn, fork or delete
 * of the id overlapped the wait. A wait after a turn without output judges nothing: a null is right there.
 */
import type { ConversationRead, RunState } from "../context.ts";
import { fieldRules } from "../model/fields.ts";
import { expectRule } from "../model/mismatch.ts";
import { Findings, type LogFacts, logFacts, type SweepFinding } from "./finding.ts";

type TurnSent = Extract<ConversationRead, { kind: "turn-sent" }>;

export function judgeSessionsRead(
  log: ConversationRead[],
  run: RunState,
  { firstDelete }: LogFacts = logFacts(log),
): SweepFinding[] {
  const found = new Findings();
  const turns = new Map<string, TurnSent[]>();
  for (const e of log) if (e.kind === "turn-sent") turns.set(e.id, [...(turns.get(e.id) ?? []), e]);
  for (const wait of log) {
    if (wait.kind !== "session-wait" || wait.found || !run.created.has(wait.id)) continue;
    if (run.resentInto.has(wait.id) || run.sentOutside.has(wait.id)) continue;
    if ((firstDelete.get(wait.id) ?? Number.POSITIVE_INFINITY) < wait.ended) continue;
    const into = turns.get(wait.id) ?? [];
    // Another turn in flight while the wait ran may have cleared the pointer (an empty resumed turn).
    if (into.some((t) => t.started < wait.ended && t.ended > wait.started)) continue;
    const before = into.filter((t) => t.ended < wait.started).sort((a, b) => b.ended - a.ended)[0];
    if (!before?.completed || before.output !== true || before.isolated) continue;
    try {
      expectRule(
        fieldRules.sessionRecorded,
        false,
        `a non-null agent_session_id within ${run.inputs.sessionWaitMs} ms of a turn with output`,
        "null for the whole wait",
      );
    } catch (error) {
      found.add(error, `conversation ${wait.id}, after its turn with output`, `conversation ${wait.id}`);
    }
  }
  return found.list();
}
