/**
 * The stateful explorer: seeded random sequences of operations (fast-check's model-based commands), each
 * response compared with the model; a mismatch is shrunk by fast-check to a minimal sequence, replayed once
 * more to confirm it, and reported as a script of curl lines naming the rule and its API section.
 *
 * fast-check rather than a loop of our own: its `commands` arbitrary generates and shrinks sequences of
 * commands that depend on the model's state (a command whose precondition no longer holds after shrinking is
 * skipped), and its runner takes a seed and a time limit, which is what a replayable, bounded run needs.
 */
import fc from "fast-check";
import { CheckContext, type RunState } from "../context.ts";
import { LearnedChoices } from "../model/choices.ts";
import { Mismatch } from "../model/mismatch.ts";
import { ModelState } from "../model/state.ts";
import { CheckSkip } from "../outcomes.ts";
import type { ExplorerFinding, ExplorerSummary } from "../records.ts";
import { describeOperation, type Operation, operationArbitraries } from "./operations.ts";
import { replayScript } from "./script.ts";
import {
  type ExplorerShared,
  Inconclusive,
  runOperation,
  runsTurn,
  type SequenceModel,
  SequenceRun,
} from "./session.ts";

export interface ExploreOptions {
  /** Sequences drawn; 0 turns the explorer off. */
  runs: number;
  seed: number;
  /** Longest sequence (operations). */
  maxOperations?: number;
  /** Turns one sequence may spend (sends are the only costly operations). */
  turnsPerSequence?: number;
  /** Bound of the whole exploration, shrinking included. */
  timeLimitMs?: number;
}

export const DEFAULT_MAX_OPERATIONS = 16;
export const DEFAULT_TURNS_PER_SEQUENCE = 5;

class ExplorerCommand implements fc.AsyncCommand<SequenceModel, SequenceRun> {
  readonly op: Operation;
  readonly #turnsPerSequence: number;
  constructor(op: Operation, turnsPerSequence: number) {
    this.op = op;
    this.#turnsPerSequence = turnsPerSequence;
  }
  check(m: Readonly<SequenceModel>): boolean {
    return m.turns < this.#turnsPerSequence || !runsTurn(m as SequenceModel, this.op);
  }
  async run(m: SequenceModel, r: SequenceRun): Promise<void> {
    await runOperation(m, r, this.op);
  }
  toString(): string {
    return describeOperation(this.op);
  }
}

/** Runs `ops` as one sequence; resolves to the run, and the error that ended it (if any). */
async function runSequence(
  run: RunState,
  shared: ExplorerShared,
  ops: Iterable<fc.AsyncCommand<SequenceModel, SequenceRun>>,
) {
  const r = new SequenceRun(new CheckContext(run), shared);
  const m: SequenceModel = { state: new ModelState(), turns: 0 };
  try {
    await fc.asyncModelRun(() => ({ model: m, real: r }), ops);
    return { r, m, error: undefined };
  } catch (error) {
    return { r, m, error };
  }
}

export async function explore(run: RunState, options: ExploreOptions): Promise<ExplorerSummary> {
  const started = performance.now();
  const shared: ExplorerShared = {
    choices: new LearnedChoices(),
    runId: run.runId,
    models: new Map(),
    sequenceCount: 0,
    messageIds: new Set(),
    channelOwned: new Map(),
    channelItems: new Map(),
    sessionWaits: new Set(),
    channelOf: new Map(),
  };
  const turnsPerSequence = options.turnsPerSequence ?? DEFAULT_TURNS_PER_SEQUENCE;
  const arbitraries = operationArbitraries(run.inputs).map((a) =>
    a.map((op) => new ExplorerCommand(op, turnsPerSequence)),
  );
  const failures = new Map<unknown, SequenceRun>();
  let inconclusive = 0;
  let operations = 0;
  let turns = 0;
  let deepest = 0;
  const property = fc.asyncProperty(
    fc.commands(arbitraries, {
      maxCommands: options.maxOperations ?? DEFAULT_MAX_OPERATIONS,
      size: "medium",
      disableReplayLog: true,
    }),
    async (commands) => {
      const { r, m, error } = await runSequence(run, shared, commands);
      operations += r.done.length;
      turns += m.turns;
      for (const c of m.state.conversations) deepest = Math.max(deepest, c.history.length);
      if (error === undefined) return;
      if (error instanceof CheckSkip || error instanceof Inconclusive) {
        inconclusive++;
        return;
      }
      failures.set(error, r);
      throw error;
    },
  );
  const details = await fc.check(property, {
    seed: options.seed,
    numRuns: options.runs,
    interruptAfterTimeLimit: options.timeLimitMs,
    endOnFailure: false,
  });
  const findings: ExplorerFinding[] = [];
  if (details.failed && details.counterexample) {
    const error = details.errorInstance;
    const minimal = failures.get(error);
    if (minimal) findings.push(await confirm(run, shared, minimal, error, options.seed));
  }
  return {
    seed: options.seed,
    runs: details.numRuns,
    sequences: shared.sequenceCount,
    operations,
    turns,
    deepest,
    inconclusive,
    shrinks: details.numShrinks,
    interrupted: details.interrupted,
    findings,
    learned: shared.choices.entries().map(([choice, value]) => ({ choice, value })),
    departures: shared.choices.departures,
    ms: Math.round(performance.now() - started),
  };
}

/** Replays the minimal sequence once more (its script comes from this run) and describes the finding. */
async function confirm(
  run: RunState,
  shared: ExplorerShared,
  minimal: SequenceRun,
  error: unknown,
  seed: number,
): Promise<ExplorerFinding> {
  const ops = minimal.done;
  const replay = await runSequence(
    run,
    shared,
    ops.map((op) => new ExplorerCommand(op, Number.POSITIVE_INFINITY)),
  );
  const mismatch = error instanceof Mismatch ? error : undefined;
  const again = replay.error instanceof Mismatch ? replay.error : undefined;
  const reproduced = again !== undefined && mismatch !== undefined && again.rule.id === mismatch.rule.id;
  const source = reproduced ? replay.r : minimal;
  const rule = mismatch?.rule;
  const message = error instanceof Error ? error.message : String(error);
  const header = [
    rule ? `Rule: ${rule.text} (API section ${rule.section}; check ${rule.check})` : `Failure: ${message}`,
    `Step ${ops.length} departs from the API: ${mismatch ? `expected ${mismatch.expected}, saw ${mismatch.actual}` : message}`,
  ];
  return {
    rule: rule?.id ?? "explorer.unexpected",
    // A request that got no answer at all (a reset, a crash) fails the send rule every route rests on.
    check: rule?.check ?? "SEND-200-STREAM",
    section: rule?.section ?? "Endpoints",
    ruleText: rule?.text ?? message,
    expected: mismatch?.expected ?? "",
    actual: mismatch?.actual ?? message,
    seed,
    steps: ops.map(describeOperation),
    script: replayScript(source.sent, { baseUrl: run.inputs.baseUrl, seed, header }),
    reproduced,
  };
}
