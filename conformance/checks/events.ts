/**
 * Events: the grammar of a turn's stream, judged on a few representative turns (plain text, thinking,
 * tool calls streamed, no output). One check per grammar rule, each failing only on its own code.
 */
import type { CheckContext, Turn } from "../context.ts";
import { CheckFailure, fail, skip } from "../outcomes.ts";
import type { GrammarCode } from "../sse/grammar.ts";
import type { CheckDef, FailureDetail } from "../types.ts";
import { ANSWERED_SILENCE, carriesOutput, check, ensureTurnOk, prompts } from "./common.ts";

const SECTION = "Events";

interface GrammarStream {
  label: string;
  turn: Turn;
}

interface GrammarStreams {
  streams: GrammarStream[];
  /** Schema violations of these streams' events, judged only by SSE-EVENT-SCHEMA. */
  schemaFailures: FailureDetail[];
  toolFile: string;
}

/** The representative turns, run once per run. */
export function grammarStreams(ctx: CheckContext): Promise<GrammarStreams> {
  return ctx.fixture("grammar-streams", async (c) => {
    const toolFile = `acc-${c.nonce()}.txt`;
    const thinkingId = c.newConversationId();
    const [text, thinking, tools, empty, routedThinking] = await Promise.all([
      c.turn({ conversationId: c.newConversationId(), prompt: prompts.hello }),
      c.turn({ conversationId: thinkingId, prompt: prompts.think }),
      c.turn({
        conversationId: c.newConversationId(),
        prompt: prompts.writeFile(toolFile, c.nonce()),
        streamToolCalls: true,
      }),
      c.turn({ conversationId: c.newConversationId(), prompt: prompts.noOutput }),
      c.turn({ routed: true, model: c.inputs.agent, prompt: prompts.think }),
    ]);
    // The grammar holds at every depth: the thinking conversation once more, resumed.
    const resumedThinking = await c.turn({ conversationId: thinkingId, prompt: prompts.think });
    const schemaFailures = c.schemaFailures.splice(0);
    return {
      streams: [
        { label: "text turn", turn: text },
        { label: "thinking turn", turn: thinking },
        { label: "tool turn (stream_tool_calls)", turn: tools },
        { label: "no-output turn", turn: empty },
        { label: "thinking turn on the model-routed send", turn: routedThinking },
        { label: "resumed thinking turn", turn: resumedThinking },
      ],
      schemaFailures,
      toolFile,
    };
  });
}

/** Every representative turn must be a 200 event stream with events, or no grammar rule can be judged. */
function judgeable(streams: GrammarStream[]): void {
  for (const { label, turn } of streams) {
    if (turn.status !== 200)
      fail(`${label}: status ${turn.status}, expected 200`, turn.response.text.slice(0, 300));
    if (!turn.reading || turn.reading.events.length === 0) {
      fail(`${label}: the response carried no events`, turn.response.text.slice(0, 300));
    }
  }
}

type Precondition = (streams: GrammarStream[]) => void;

const needsBlocks: Precondition = (streams) => {
  if (!streams.some((s) => (s.turn.reading?.blocks.length ?? 0) > 0))
    fail("no stream carried any content block");
};

const needsMessageDelta: Precondition = (streams) => {
  if (!streams.some((s) => s.turn.reading?.events.some((e) => e.name === "message_delta"))) {
    fail("no stream carried a message_delta event");
  }
};

function needsBlockType(type: string): Precondition {
  return (streams) => {
    if (!streams.some((s) => s.turn.reading?.blocks.some((b) => b.type === type))) {
      // A block of this type in any other stream of the run is judged by the grammar in the check that read it.
      skip(
        `the deployment produced no ${type} block in the representative turns (the API does not require one), so the rule could not be exercised`,
      );
    }
  };
}

function grammarCheck(code: GrammarCode, title: string, precondition?: Precondition): CheckDef {
  return check({
    id: code,
    level: "MUST",
    section: SECTION,
    title,
    needs: [],
    async run(ctx) {
      const { streams } = await grammarStreams(ctx);
      judgeable(streams);
      const details: FailureDetail[] = [];
      for (const { label, turn } of streams) {
        for (const v of turn.reading?.violations ?? []) {
          if (v.code === code) details.push({ message: `${label}: ${v.message}`, evidence: v.frame });
        }
      }
      if (details.length > 0) throw new CheckFailure(details[0].message, details);
      precondition?.(streams);
    },
  });
}

export const eventChecks: CheckDef[] = [
  /** The stream is served as text/event-stream (with X-Conversation-Id). */
  check({
    id: "SSE-CONTENT-TYPE",
    level: "MUST",
    section: SECTION,
    title: "A turn's response is 200 with Content-Type text/event-stream",
    needs: [],
    async run(ctx) {
      const { streams } = await grammarStreams(ctx);
      for (const { label, turn } of streams) {
        if (turn.status !== 200) fail(`${label}: status ${turn.status}`);
        const type = turn.headers["content-type"] ?? "";
        if (!type.startsWith("text/event-stream")) fail(`${label}: Content-Type ${JSON.stringify(type)}`);
      }
    },
  }),
  grammarCheck("SSE-FRAME-LINES", 'Each event is an "event:" line followed by a "data:" line'),
  grammarCheck("SSE-FRAME-UNTERMINATED", "Each event frame ends with a blank line"),
  grammarCheck("SSE-DATA-JSON", "Each data line is one JSON object"),
  grammarCheck("SSE-TYPE-MATCHES-EVENT", "The data's type equals the event name"),
  grammarCheck("SSE-UNKNOWN-EVENT", "Only the API's event names appear"),
  grammarCheck("SSE-FIRST-MESSAGE-START", "The first event is message_start"),
  grammarCheck("SSE-MESSAGE-START-ONCE", "message_start appears once"),
  grammarCheck(
    "SSE-BLOCK-TRIPLE",
    "Blocks arrive whole: content_block_start, one complete content_block_delta, content_block_stop",
    needsBlocks,
  ),
  grammarCheck("SSE-INDEX-RUNNING", "Block index is a running counter from 0", needsBlocks),
  grammarCheck("SSE-BLOCK-TYPE", "Block types are text, thinking, tool_use, tool_result", needsBlocks),
  grammarCheck(
    "SSE-TOOL-BLOCKS-GATED",
    "tool_use/tool_result blocks appear only with stream_tool_calls",
    needsBlocks,
  ),
  grammarCheck(
    "SSE-DELTA-TYPE",
    "Delta types match their block (text_delta, thinking_delta, input_json_delta)",
    needsBlocks,
  ),
  grammarCheck(
    "SSE-START-EMPTY",
    "content_block_start carries an empty text or thinking string",
    needsBlocks,
  ),
  grammarCheck(
    "SSE-THINKING-SIGNATURE",
    "A thinking block is followed by a signature_delta",
    needsBlockType("thinking"),
  ),
  grammarCheck(
    "SSE-TOOL-INPUT-JSON",
    "A tool_use block's input_json_delta is complete JSON",
    needsBlockType("tool_use"),
  ),
  grammarCheck(
    "SSE-MESSAGE-DELTA",
    "One message_delta with a non-empty string stop_reason precedes message_stop",
    needsMessageDelta,
  ),
  grammarCheck(
    "SSE-USAGE-FIVE-FIELDS",
    "message_delta.usage has input/output/cache-read/cache-creation tokens and total_cost_usd",
    needsMessageDelta,
  ),
  grammarCheck("SSE-STOP-LAST", "The stream ends at message_stop (or an error event)"),
  grammarCheck("SSE-AFTER-STOP", "Nothing follows message_stop"),
  grammarCheck("SSE-DONE-SENTINEL", "No [DONE] sentinel"),
  /** Every event's data validates against its named schema in the bundled spec. */
  check({
    id: "SSE-EVENT-SCHEMA",
    level: "MUST",
    section: SECTION,
    title: "Every event's data matches its schema in the bundled spec",
    needs: [],
    async run(ctx) {
      const { streams, schemaFailures } = await grammarStreams(ctx);
      judgeable(streams);
      if (schemaFailures.length > 0) throw new CheckFailure(schemaFailures[0].message, schemaFailures);
    },
  }),
  /** A turn with no output is message_start, message_delta, message_stop and nothing else. */
  check({
    id: "SSE-EMPTY-TURN-GRAMMAR",
    level: "MUST",
    section: SECTION,
    title: "A turn with no output is still message_start, message_delta, message_stop",
    needs: [],
    async run(ctx) {
      const { streams } = await grammarStreams(ctx);
      const empty = streams[3].turn;
      const names = empty.reading?.events.map((e) => e.name) ?? [];
      if (empty.status !== 200) fail(`status ${empty.status}`);
      if (carriesOutput(empty.reading?.blocks ?? [])) skip(ANSWERED_SILENCE);
      const expected = ["message_start", "message_delta", "message_stop"];
      if (names.join() !== expected.join())
        fail(`events ${names.join(", ") || "(none)"}; expected ${expected.join(", ")}`);
    },
  }),
  /** The stop reason is end_turn (others are not shown by the API: INFO). */
  check({
    id: "SSE-STOP-REASON",
    level: "INFO",
    section: SECTION,
    title: 'The stop reason is "end_turn" (other stop reasons are not shown)',
    needs: [],
    async run(ctx) {
      const { streams } = await grammarStreams(ctx);
      judgeable(streams);
      for (const { label, turn } of streams) {
        if (turn.reading?.stopReason !== "end_turn")
          fail(`${label}: stop_reason ${JSON.stringify(turn.reading?.stopReason)}`);
      }
    },
  }),
  /**
   * `stream_tool_calls` only adds blocks (Endpoints/Send a message): the tool turn ends as the text turn does.
   * Other stop reasons are not shown (SSE-STOP-REASON, INFO), so this is judged only where the text turn ended
   * `end_turn`: then a different reason on the flagged turn is the flag's doing.
   */
  check({
    id: "SSE-STOP-REASON-TOOLS",
    level: "MUST",
    section: "Endpoints/Send a message",
    title: "A turn with stream_tool_calls: true ends with end_turn as the deployment's turns without it do",
    needs: [],
    async run(ctx) {
      const { streams } = await grammarStreams(ctx);
      const plain = streams[0].turn.reading;
      const tools = streams[2].turn;
      if (plain?.end !== "message_stop" || plain.stopReason !== "end_turn")
        skip(
          `the text turn did not end at message_stop with end_turn (${JSON.stringify(plain?.stopReason)})`,
        );
      ensureTurnOk(tools, "the tool turn (stream_tool_calls)");
      if (tools.reading.stopReason !== "end_turn")
        fail(
          `the turn with stream_tool_calls: true ended with stop_reason ${JSON.stringify(tools.reading.stopReason)}; the same deployment's turn without it ended end_turn`,
        );
    },
  }),
  /** message_start.message.id names the turn's message: non-empty, a different one on each turn. */
  check({
    id: "MEANING-MESSAGE-START",
    level: "MUST",
    section: SECTION,
    title: "message_start.message.id is a non-empty string, different on each turn",
    needs: [],
    async run(ctx) {
      const { streams } = await grammarStreams(ctx);
      judgeable(streams);
      const seen = new Map<string, string>();
      for (const { label, turn } of streams) {
        if (!turn.reading?.events.some((e) => e.name === "message_start")) continue;
        const id = turn.reading.messageId;
        if (typeof id !== "string" || id.trim() === "")
          fail(`${label}: message_start.message.id is ${JSON.stringify(id)}, not a non-empty string`);
        const other = seen.get(id);
        if (other !== undefined)
          fail(`${label} and ${other} both have message_start.message.id ${JSON.stringify(id)}`);
        seen.set(id, label);
      }
    },
  }),
  /**
   * No ping or comment frames, and no lines of the SSE standard beyond the API's `event:` and `data:` (clients
   * skip or read them as the standard says; proxies may need them: INFO).
   */
  check({
    id: "SSE-NO-PING",
    level: "INFO",
    section: SECTION,
    title:
      "No ping or comment frames, no id:, retry: or unknown field lines, a space after each colon (outside the API's layout; standard clients read them, proxies may need them)",
    needs: [],
    async run(ctx) {
      const { streams } = await grammarStreams(ctx);
      judgeable(streams);
      const noted = new Set(["SSE-PING", "SSE-COMMENT", "SSE-OTHER-FIELD", "SSE-FIELD-FORM"]);
      for (const { label, turn } of streams) {
        const note = turn.reading?.violations.find((v) => noted.has(v.code));
        if (note) fail(`${label}: ${note.message}`, note.frame);
      }
    },
  }),
  /** A failure after the stream opened is an error event on a 200 stream, with the API's shape. */
  check({
    id: "SSE-ERROR-EVENT",
    level: "MUST",
    section: SECTION,
    title: 'A failure after the stream opened is an error event {error: {type: "api_error", message}}',
    needs: [],
    async run(ctx) {
      const { streams } = await grammarStreams(ctx);
      // A test engine (the reference server's scripted one) fails on this prompt; a real model does not.
      const provoked = await ctx.turn({
        conversationId: ctx.newConversationId(),
        prompt: prompts.fail,
        expectFailure: true,
      });
      const all = [...streams, { label: "turn asked to fail", turn: provoked }];
      const errors = all.flatMap(
        (s) => s.turn.reading?.violations.filter((v) => v.code === "SSE-ERROR-SHAPE") ?? [],
      );
      if (errors.length > 0) fail(errors[0].message, errors[0].frame);
      // Whatever the engine does with the prompt, a turn is answered 200 with an event stream.
      if (provoked.status !== 200) {
        fail(
          `the turn asked to fail was answered ${provoked.status}, not 200 with an error event`,
          provoked.response.text.slice(0, 500),
        );
      }
      if (!all.some((s) => s.turn.reading?.end === "error")) {
        skip(
          "no turn failed after its stream opened: the turn asked to fail ended at message_stop, as did every representative turn, and the API gives no way to make one fail",
        );
      }
    },
  }),
];
