/**
 * Streaming: the API says a turn's result "is streamed back as server-sent events" and send-message "streams
 * the result". A proxy or gateway that buffers the response still delivers a correct body, so only arrival
 * times tell the two apart. The checks run a turn whose blocks are produced seconds apart (a tool command
 * that sleeps) and judge when its parts arrived, never what the agent said.
 */
import type { CheckContext, Turn } from "../context.ts";
import { fail, skip } from "../outcomes.ts";
import { type TurnTimeline, timelineText } from "../sse/timing.ts";
import type { CheckDef } from "../types.ts";
import { check, ensureTurnOk, prompts } from "./common.ts";

const SECTION = "What the service does";

/** How long the turn's tool command sleeps: blocks before it are produced this long before those after it. */
export const SLOW_TOOL_SECONDS = 3;
/**
 * A streamed turn shows the sleep as a gap between arrivals; a buffered one shows none. Half the sleep leaves
 * room for a loaded machine and a slow first byte, and still no buffered turn comes near it.
 */
const GAP_MS = (SLOW_TOOL_SECONDS * 1000) / 2;

const STREAMED_REASON =
  'MUST: the API says the result "is streamed back as server-sent events" and that send-message "streams the result"; a response held back until the turn ends is one body, not a stream.';
const IDLE_REASON =
  'MUST: the stream "ends at message_stop" (or an error event); a turn cut while its tool or model is quiet ends with neither. Opt-in (--idle-seconds) because it takes that long.';
const HEADERS_REASON =
  'MUST: the API says a failure after the stream opens "arrives as an error event on a response already sent as 200": the status and headers go out while the turn still runs.';

interface SlowTurn {
  turn: Turn;
  timeline: TurnTimeline;
}

/** One turn whose tool command sleeps, tool calls streamed; shared by the streaming checks. */
function slowToolTurn(ctx: CheckContext): Promise<SlowTurn> {
  return ctx.fixture("slow-tool-turn", async (c) => {
    const turn = await c.turn({
      conversationId: c.newConversationId(),
      prompt: prompts.runCommand(`sleep ${SLOW_TOOL_SECONDS}; echo ${c.nonce()}`),
      streamToolCalls: true,
    });
    ensureTurnOk(turn, "the turn with a slow tool command");
    if (!turn.timeline) fail("the turn's arrival times were not recorded");
    // A turn shorter than the sleep did not run the command: nothing in it was produced apart in time.
    if (turn.timeline.endMs < SLOW_TOOL_SECONDS * 1000) {
      skip(
        `the turn ended after ${turn.timeline.endMs} ms, before a ${SLOW_TOOL_SECONDS} s command could end: the agent did not run it, so no part of the turn was produced apart in time`,
      );
    }
    return { turn, timeline: turn.timeline };
  });
}

/** The longest wait between two events (comment lines do not count: they carry nothing), headers included. */
function longestQuiet(turn: Turn): number {
  const timing = turn.response.timing;
  if (!timing || !turn.reading) return 0;
  let last = timing.headersMs;
  let longest = 0;
  for (const event of turn.reading.events) {
    const at = timing.frameMs[event.frameIndex] ?? timing.endMs;
    longest = Math.max(longest, at - last);
    last = at;
  }
  return longest;
}

/** The longest wait between two consecutive blocks' arrivals, and the blocks around it. */
function longestGap(timeline: TurnTimeline): { ms: number; before: string; after: string } {
  let best = { ms: 0, before: "", after: "" };
  const arrivals = timeline.blocks.map((b) => ({ at: b.stopMs ?? b.startMs, name: `#${b.index} ${b.type}` }));
  for (let i = 1; i < arrivals.length; i++) {
    const ms = arrivals[i].at - arrivals[i - 1].at;
    if (ms > best.ms) best = { ms, before: arrivals[i - 1].name, after: arrivals[i].name };
  }
  return best;
}

export const streamingChecks: CheckDef[] = [
  check({
    id: "SSE-STREAMED-INCREMENTAL",
    level: "MUST",
    section: SECTION,
    title: "A turn is streamed: blocks arrive as they are produced, not all at the end",
    needs: [],
    levelReason: STREAMED_REASON,
    async run(ctx) {
      const { turn, timeline } = await slowToolTurn(ctx);
      ctx.showTimeline("turn with a slow tool command", turn);
      if (timeline.blocks.length < 2) {
        skip(
          `the turn carried ${timeline.blocks.length} block(s): nothing arrived before the command's result could`,
        );
      }
      const gap = longestGap(timeline);
      if (gap.ms < GAP_MS) {
        fail(
          `the turn's blocks arrived together (longest gap between two blocks ${gap.ms} ms, while its ${SLOW_TOOL_SECONDS} s command ran between them): the response was buffered, not streamed. A proxy in front of the API must not buffer text/event-stream (nginx: proxy_buffering off, or honour X-Accel-Buffering: no)`,
          timelineText(timeline),
        );
      }
    },
  }),
  check({
    id: "SSE-HEADERS-BEFORE-END",
    level: "MUST",
    section: SECTION,
    title: "A turn's status and headers arrive while the turn still runs, not when it ends",
    needs: [],
    levelReason: HEADERS_REASON,
    async run(ctx) {
      const { turn, timeline } = await slowToolTurn(ctx);
      ctx.showTimeline("turn with a slow tool command", turn);
      const end = timeline.finalEventMs ?? timeline.endMs;
      if (end - timeline.headersMs < GAP_MS) {
        fail(
          `the headers arrived ${timeline.headersMs} ms after the request, ${end - timeline.headersMs} ms before the turn ended ${end} ms after it (its ${SLOW_TOOL_SECONDS} s command ran in between): the whole response was held back until the turn ended`,
          timelineText(timeline),
        );
      }
    },
  }),
  check({
    id: "SSE-IDLE-SURVIVES",
    level: "MUST",
    section: SECTION,
    title: "A turn that stays quiet longer than --idle-seconds still ends at message_stop (nothing cuts it)",
    needs: ["idleSeconds"],
    levelReason: IDLE_REASON,
    async run(ctx) {
      const seconds = ctx.inputs.idleSeconds ?? 0;
      const quietMs = seconds * 1000;
      let turn: Turn;
      try {
        turn = await ctx.turn({
          conversationId: ctx.newConversationId(),
          // Past the idle time by a margin, so a time-out of exactly that length is crossed.
          prompt: prompts.runCommand(`sleep ${seconds + 5}; echo ${ctx.nonce()}`),
          streamToolCalls: true,
        });
      } catch (error) {
        fail(
          `the turn failed while its tool command slept ${seconds + 5} s: ${error instanceof Error ? error.message : String(error)}. A proxy idle time-out shorter than a quiet turn cuts it: keep the connection alive (SSE comment lines more often than the proxy's idle time-out) or raise that time-out`,
        );
      }
      ctx.showTimeline(`turn quiet for ${seconds + 5} s`, turn);
      if (turn.status !== 200 || !turn.reading) fail(`status ${turn.status}, expected a 200 event stream`);
      const quiet = longestQuiet(turn);
      if (turn.reading.end === "eof") {
        fail(
          `the stream ended without message_stop or an error event after ${turn.timeline?.endMs ?? "?"} ms (longest quiet ${quiet} ms): something between the API and the client cut the quiet turn. Keep the connection alive (SSE comment lines more often than the proxy's idle time-out) or raise that time-out`,
          turn.timeline ? timelineText(turn.timeline) : undefined,
        );
      }
      if (turn.reading.end === "error") {
        skip(
          `the turn ended with an error event (${turn.reading.errorMessage ?? "no message"}): the deployment's own turn or tool limit, which the API does not show, ended it before it could be quiet for ${seconds} s`,
        );
      }
      if (quiet < quietMs) {
        skip(
          `the turn was never quiet for ${seconds} s (longest ${quiet} ms between events): its tool command did not sleep that long, e.g. a tool time-out shorter than ${seconds + 5} s (the reference server: agent-api serve --tool-timeout-seconds)`,
        );
      }
    },
  }),
];
