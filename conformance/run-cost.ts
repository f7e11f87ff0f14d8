/**
 * What a run cost the deployment: the turns it ran, the tokens its streams reported and the sum of their
 * `total_cost_usd` (the API's `message_delta.usage`), and the bound `--max-turns` puts on the turns. Every
 * turn the suite sends goes through one place (CheckContext.call on a messages route), which asks this
 * meter first: whatever sends a turn through the context is counted and bounded, a check and an explorer
 * alike.
 */
import { splitSseFrames } from "@agent-api/client/sse";
import { isRecord } from "./json.ts";

/** The run's cost as every report shows it. */
export interface RunCost {
  /** Turns the deployment ran: requests to a messages route answered with a 200 event stream. */
  turns: number;
  /** Turns whose stream carried a `message_delta.usage` (the token and cost sums are over these). */
  turnsWithUsage: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadInputTokens: number;
  cacheCreationInputTokens: number;
  /** Sum of the streams' `total_cost_usd`. */
  totalCostUsd: number;
  /** `--max-turns`; absent when the run had no bound. */
  maxTurns?: number;
  /** Turns not sent because the bound was spent (their checks were skipped, saying so). */
  turnsRefused: number;
}

/** The usage fields the API puts in `message_delta.usage`, and where each is summed. */
const USAGE_FIELDS = [
  ["input_tokens", "inputTokens"],
  ["output_tokens", "outputTokens"],
  ["cache_read_input_tokens", "cacheReadInputTokens"],
  ["cache_creation_input_tokens", "cacheCreationInputTokens"],
  ["total_cost_usd", "totalCostUsd"],
] as const;

export class TurnMeter {
  readonly #cost: RunCost;
  /** Turns sent and not yet answered: they hold a place under the bound until their answer says. */
  #inFlight = 0;

  constructor(maxTurns?: number) {
    this.#cost = {
      turns: 0,
      turnsWithUsage: 0,
      inputTokens: 0,
      outputTokens: 0,
      cacheReadInputTokens: 0,
      cacheCreationInputTokens: 0,
      totalCostUsd: 0,
      turnsRefused: 0,
      ...(maxTurns !== undefined && { maxTurns }),
    };
  }

  /** A place for one more turn; false (and counted as refused) when the bound is spent. */
  take(): boolean {
    const bound = this.#cost.maxTurns;
    if (bound !== undefined && this.#cost.turns + this.#inFlight >= bound) {
      this.#cost.turnsRefused++;
      return false;
    }
    this.#inFlight++;
    return true;
  }

  /**
   * The answer to a turn `take` let through: a 200 event stream is a turn (its usage summed); anything else
   * (a refusal, a 4xx) ran none and gives its place back.
   */
  settle(answer: { status: number; contentType: string | undefined; text: string } | null): void {
    this.#inFlight = Math.max(0, this.#inFlight - 1);
    if (answer?.status !== 200 || !answer.contentType?.startsWith("text/event-stream")) return;
    this.#cost.turns++;
    const usage = streamUsage(answer.text);
    if (!usage) return;
    this.#cost.turnsWithUsage++;
    for (const [field, sum] of USAGE_FIELDS) {
      const value = usage[field];
      if (typeof value === "number" && Number.isFinite(value) && value >= 0) this.#cost[sum] += value;
    }
  }

  get cost(): RunCost {
    // Float sums of dollar amounts: rounded to a millionth of a dollar, below any price's precision.
    return { ...this.#cost, totalCostUsd: Math.round(this.#cost.totalCostUsd * 1e6) / 1e6 };
  }
}

/** The last `message_delta.usage` of a stream, or undefined. */
function streamUsage(text: string): Record<string, unknown> | undefined {
  let usage: Record<string, unknown> | undefined;
  for (const frame of splitSseFrames(text)) {
    if (frame.event !== "message_delta" || frame.data === undefined) continue;
    try {
      const data: unknown = JSON.parse(frame.data);
      if (isRecord(data) && isRecord(data.usage)) usage = data.usage;
    } catch {
      // Not JSON: the grammar reports it; it carries no usage to count.
    }
  }
  return usage;
}

/** `12 turns · tokens 1,204 in, 880 out, 0 cache read, 0 cache written · $0.0123` */
export function costText(cost: RunCost): string {
  const n = (x: number) => x.toLocaleString("en-US");
  const tokens = `tokens ${n(cost.inputTokens)} in, ${n(cost.outputTokens)} out, ${n(cost.cacheReadInputTokens)} cache read, ${n(cost.cacheCreationInputTokens)} cache written`;
  const unreported = cost.turns - cost.turnsWithUsage;
  const parts = [
    `${n(cost.turns)} ${cost.turns === 1 ? "turn" : "turns"}${cost.maxTurns === undefined ? "" : ` of at most ${n(cost.maxTurns)}`}`,
    tokens,
    `total_cost_usd $${cost.totalCostUsd.toFixed(4)}`,
  ];
  if (unreported > 0) parts.push(`${n(unreported)} without usage`);
  if (cost.turnsRefused > 0) parts.push(`${n(cost.turnsRefused)} not sent (--max-turns)`);
  return parts.join(" · ");
}

/** What the run says before it starts. */
export function turnBoundText(maxTurns: number | undefined): string {
  return maxTurns === undefined
    ? "Turn bound: none (--max-turns N caps the turns this run may send)"
    : `Turn bound: at most ${maxTurns.toLocaleString("en-US")} turns (--max-turns); a check that needs more is skipped, saying so`;
}
