/**
 * The send flags and their defaults, and the meaning of the stream's fields (Endpoints/Send a message; Events):
 * which model a turn runs on, what `stream: false` and `delivery` do, which blocks a stream may carry.
 */
import type { Refusal } from "./expectation.ts";
import { defineRules } from "./rules.ts";

const SEND = "Endpoints/Send a message";

export const sendRules = defineRules("send", {
  stream200: {
    section: SEND,
    check: "SEND-200-STREAM",
    text: "A send that is not refused answers 200 text/event-stream with X-Conversation-Id",
  },
  systemApplies: {
    section: "Endpoints/Send a message",
    check: "SEND-SYSTEM-APPLIED",
    text: "`system` is appended to the agent's instructions for the turn it is sent with: a directive in it is followed, on every agent kind, key, route, depth and prompt",
  },
  readBack: {
    section: SEND,
    check: "CONVID-UNKNOWN-VERBATIM",
    text: "The conversation a turn ran in, named by X-Conversation-Id, is the caller's on the agent the send named, readable there at once",
  },
  routedReadBack: {
    section: "Endpoints/Model-routed send",
    check: "ROUTED-BARE-NAME",
    text: "A model-routed turn runs on the agent its `model` names: the conversation, named by X-Conversation-Id, is readable on that agent's routes at once",
  },
  headerId: {
    section: SEND,
    check: "CONVID-UNKNOWN-VERBATIM",
    text: "X-Conversation-Id names the conversation the turn ran in",
  },
  streamFalse: {
    section: SEND,
    check: "SEND-STREAM-FALSE",
    text: "`stream: false` still yields an event stream",
  },
  async501: { section: "Errors", check: "ERR-501-ASYNC", text: '`metadata.delivery` "async" gives 501' },
  modelSelects: {
    section: SEND,
    check: "SEND-MODEL-SELECTS",
    text: "`model` selects the turn's model (message_start names it)",
  },
  modelDefault: {
    section: SEND,
    check: "SEND-MODEL-DEFAULT",
    text: "Without `model`, the turn falls back to the automation's model, then the conversation's recorded default, then the agent's default (first in the models list)",
  },
  usageCounts: {
    section: "Events",
    check: "MEANING-USAGE-COUNTS",
    text: "`message_delta.usage` counts the turn: a turn whose stream carries output reports output_tokens > 0",
  },
  toolBlocksGated: {
    section: "Events",
    check: "SEND-TOOL-BLOCKS-DEFAULT-OFF",
    text: "`tool_use` and `tool_result` blocks only when `stream_tool_calls` is true",
  },
  modelsFirstDefault: {
    section: "Endpoints/List models",
    check: "MODELS-SHAPE",
    text: 'The models list is {data: [{type: "model", id, display_name}], has_more}, the agent\'s default model first',
  },
});

export const ASYNC_REFUSAL: Refusal = { status: 501, rule: sendRules.async501 };
