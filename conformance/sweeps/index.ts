/**
 * Judgments over everything the named checks read, made once they have all run: each check exercises its rule
 * under one combination (an agent kind, a key, a route, a depth), while the run's traffic as a whole holds most
 * of them. A field filled wrongly under one combination only then fails the check that owns its rule, with the
 * request that showed it. The explorer judges its own traffic the same way, against its model.
 */
import type { RunState } from "../context.ts";
import type { CheckResult } from "../types.ts";
import { judgeActivityRead } from "./activity.ts";
import { judgeConversationsRead } from "./conversations.ts";
import { judgeCountsRead } from "./counts.ts";
import { judgeDeletesRead } from "./deletes.ts";
import { logFacts, type SweepFinding } from "./finding.ts";
import { judgeForksRead } from "./forks.ts";
import { judgeListsRead } from "./lists.ts";
import { judgeSessionsRead } from "./sessions.ts";
import { judgeTitlesRead } from "./titles.ts";
import { judgeCompactionsRead, judgeTranscriptsRead } from "./transcripts.ts";
import { judgeTurnsRead } from "./turns.ts";

export function sweepFindings(run: RunState): SweepFinding[] {
  const log = run.conversationsRead;
  const facts = logFacts(log);
  return [
    ...judgeTurnsRead(run.turnsRead, run.modelsRead),
    ...judgeConversationsRead(log, run, facts),
    ...judgeListsRead(log, run, facts),
    ...judgeForksRead(log, facts),
    ...judgeActivityRead(log, run, facts),
    ...judgeDeletesRead(log),
    ...judgeTitlesRead(log),
    ...judgeCountsRead(log, run, facts),
    ...judgeTranscriptsRead(log, run, facts),
    ...judgeCompactionsRead(log),
    ...judgeSessionsRead(log, run, facts),
  ];
}

/**
 * Fails the check owning each rule the run's traffic broke, where the run selected that check; returns what it
 * attributed, so a later pass over the grown log (`attributeExplorerSweepFindings`) adds only what is new.
 */
export function attributeSweepFindings(run: RunState, results: CheckResult[]): Set<string> {
  const attributed = new Set<string>();
  for (const finding of sweepFindings(run)) {
    attributed.add(findingKey(finding));
    const result = results.find((r) => r.id === finding.check);
    if (result) failResult(result, finding.message, finding.evidence);
  }
  return attributed;
}

/**
 * The sweeps again once the explorer has run: its random sequences (every key, agent kind, route, depth and
 * input shape) are in the same log as the named checks' calls, so every sweep's rule is asked of them too. A
 * finding the first pass made is not repeated; a new one fails its check, given a result of its own when the
 * run did not select it (as the explorer's findings are: `attributeFindings` in runner.ts).
 */
export function attributeExplorerSweepFindings(
  run: RunState,
  results: CheckResult[],
  attributed: Set<string>,
  newResult: (check: string) => CheckResult,
): void {
  for (const finding of sweepFindings(run)) {
    if (attributed.has(findingKey(finding))) continue;
    let result = results.find((r) => r.id === finding.check);
    if (!result) {
      result = newResult(finding.check);
      results.push(result);
    }
    failResult(result, `${finding.message} (in the explorer's traffic)`, finding.evidence);
  }
}

// A sweep keeps the first breach of each rule: the same rule met earlier in the log gives the same finding.
const findingKey = (f: SweepFinding) => `${f.check}\n${f.message}\n${f.evidence}`;

/**
 * A failure found after a check ran (by the explorer, by a sweep of the run's traffic) is that check's: its
 * result fails, whatever it concluded alone, with the first such finding as its reason and each as a detail.
 */
export function failResult(result: CheckResult, message: string, evidence: string): void {
  if (result.outcome !== "fail") {
    result.outcome = "fail";
    result.skipKind = undefined;
    result.reason = message;
  }
  result.details.push({ message, evidence });
}
