/**
 * Faults that break a rule only under a combination of conditions no named check enumerates: the explorer's
 * proof (explorer.test.ts, test/explore/). Not in the scored catalogue (mutations.ts), whose every entry a
 * named check must catch.
 */
import { DEMO_ADMIN_KEY, DEMO_MEMBER_KEY, DEMO_VIEWER_KEY } from "../../reference-server/demo/workspace.ts";
import { everyConversation } from "./conversation-rewrites.ts";
import {
  isEventStream,
  type Json,
  jsonOf,
  type Mutation,
  type ProxyCall,
  type ProxyResponse,
  type SseEvent,
  withJson,
} from "./proxy-calls.ts";

/** The agent a send addresses: the path's, or the routed `model` (`<prefix>--<agent>` or a bare name). */
function sendAgent(call: ProxyCall): string | undefined {
  if (call.route.kind === "send") return call.route.agent;
  const model = call.json()?.model;
  if (typeof model !== "string") return undefined;
  const cut = model.lastIndexOf("--");
  return cut < 0 ? model : model.slice(cut + 2);
}

/** The send's `metadata`, or {}. */
function metadataOf(call: ProxyCall): Json {
  const metadata = call.json()?.metadata;
  return metadata && typeof metadata === "object" ? metadata : {};
}

/** Edits the `message_delta` (or `message_start`) events of a stream. */
function editEvents(events: SseEvent[], name: string, edit: (data: Json) => void): SseEvent[] {
  for (const e of events) if (e.event === name && e.data) edit(e.data);
  return events;
}

/** `turn_count` as a deployment that stops counting at two would report it. */
function capTurnCount(conversation: unknown): void {
  if (conversation && typeof conversation === "object") {
    const c = conversation as { turn_count?: unknown };
    if (typeof c.turn_count === "number" && c.turn_count >= 3) c.turn_count = 2;
  }
}

export const combinationMutations: Mutation[] = [
  {
    name: "turn-count-stops-at-two",
    area: "meaning",
    description:
      "turn_count counts one more after each turn only up to two: from a conversation's third turn on, every route that returns it says 2",
    breaks: ["GET-TURN-COUNT"],
    onResponse(call, res): ProxyResponse | undefined {
      const kind = call.route.kind;
      if (call.method !== "GET" || res.status !== 200 || isEventStream(res)) return undefined;
      if (kind !== "conversation" && kind !== "transcript" && kind !== "list") return undefined;
      const body = jsonOf(res);
      if (!body || typeof body !== "object") return undefined;
      capTurnCount(body.conversation);
      if (Array.isArray(body.conversations)) body.conversations.forEach(capTurnCount);
      return withJson(res, body);
    },
  },
  {
    name: "viewer-routed-send-runs",
    area: "status",
    description:
      "A Viewer key's send is refused with 403 on the agent's own route, but the model-routed send runs it when the model field names the agent with the routing prefix",
    breaks: ["AUTH-403-VIEWER-SEND"],
    onRequest(call) {
      if (call.route.kind !== "routed" || call.method !== "POST") return undefined;
      const body = call.json();
      const model = body && typeof body === "object" ? (body as { model?: unknown }).model : undefined;
      // Only the prefixed form: the bare agent name is refused as it should be.
      if (call.key === DEMO_VIEWER_KEY && typeof model === "string" && model.includes("--")) {
        call.key = DEMO_ADMIN_KEY;
      }
      return undefined;
    },
  },
  // Values of the stream under one combination (issue 29: "a field's type is checked and its value is not").
  {
    name: "cost-in-cents-when-resumed",
    area: "meaning",
    description:
      "total_cost_usd is the turn's cost in US dollars, except on a resumed turn, whose cost is reported in cents",
    breaks: ["MEANING-USAGE-COUNTS"],
    onEvents(events, call, tools) {
      const id = metadataOf(call).conversation_id;
      if (typeof id !== "string") return undefined;
      const resumed = tools.state.has(`seen:${id}`);
      tools.state.set(`seen:${id}`, true);
      if (!resumed) return undefined;
      return editEvents(events, "message_delta", (d) => {
        if (typeof d.usage?.total_cost_usd === "number") d.usage.total_cost_usd *= 100;
      });
    },
  },
  {
    name: "message-id-fixed-on-repo-agent",
    area: "meaning",
    description: "message_start.message.id is the same on every turn of the repository-backed agent",
    breaks: ["MEANING-MESSAGE-START"],
    onEvents(events, call) {
      if (sendAgent(call) !== "acme-widgets") return undefined;
      return editEvents(events, "message_start", (d) => {
        if (d.message) d.message.id = "msg_acme_widgets";
      });
    },
  },
  {
    name: "stop-tool-use-on-storage-agent-with-tool-calls",
    area: "meaning",
    description:
      "A turn on the storage-backed agent with stream_tool_calls: true ends with stop_reason tool_use (end_turn without the flag)",
    breaks: ["SSE-STOP-REASON-TOOLS"],
    onEvents(events, call) {
      if (sendAgent(call) !== "notes-agent" || metadataOf(call).stream_tool_calls !== true) return undefined;
      return editEvents(events, "message_delta", (d) => {
        if (d.delta) d.delta.stop_reason = "tool_use";
      });
    },
  },
  {
    name: "title-is-the-system-text",
    area: "meaning",
    description:
      "A conversation's title is derived from the `system` of its first call, when that call had one",
    breaks: ["GET-TITLE-FROM-PROMPT"],
    onRequest(call, tools) {
      if (call.method !== "POST" || (call.route.kind !== "send" && call.route.kind !== "routed"))
        return undefined;
      const id = metadataOf(call).conversation_id;
      const system = call.json()?.system;
      if (typeof id === "string" && typeof system === "string" && !tools.state.has(`first:${id}`))
        tools.state.set(`title:${id}`, system);
      if (typeof id === "string") tools.state.set(`first:${id}`, true);
      return undefined;
    },
    onResponse(call, res, tools) {
      return everyConversation(call, res, (c) => {
        const title = tools.state.get(`title:${c.id}`);
        if (typeof title === "string") c.title = title;
      });
    },
  },
  {
    name: "forked-at-turn-unclamped",
    area: "meaning",
    description:
      "forked_at_turn (and the child's forked_at_turn_index) records the at_turn asked for, unclamped",
    breaks: ["FORK-AT-TURN-CUTS"],
    onResponse(call, res, tools) {
      if (call.route.kind === "fork" && call.method === "POST" && res.status === 200) {
        const at = call.json()?.at_turn;
        const body = jsonOf(res);
        if (typeof at !== "number" || !body) return undefined;
        body.forked_at_turn = at;
        tools.state.set(`fork:${body.conversation_id}`, at);
        return withJson(res, body);
      }
      return everyConversation(call, res, (c) => {
        const at = tools.state.get(`fork:${c.id}`);
        if (typeof at === "number") c.forked_at_turn_index = at;
      });
    },
  },
  {
    name: "channel-id-filter-ignored-for-member",
    area: "meaning",
    description: "The channel_id filter is honoured for the owner's key, ignored for a member's",
    breaks: ["LIST-CHANNEL-ID-FILTER"],
    onRequest(call) {
      if (call.route.kind !== "list" || call.key !== DEMO_MEMBER_KEY || !call.path.includes("channel_id="))
        return undefined;
      const [path, query = ""] = call.path.split("?");
      const kept = new URLSearchParams(query);
      kept.delete("channel_id");
      call.path = kept.size > 0 ? `${path}?${kept}` : path;
      return undefined;
    },
  },
  {
    name: "channel-owned-interactive-for-member",
    area: "meaning",
    description:
      "A channel-owned conversation's channel reads INTERACTIVE to a member's key (its stored channel to the owner's)",
    breaks: ["LIST-CHANNEL-OWNED-VISIBLE"],
    onResponse(call, res) {
      if (call.key !== DEMO_MEMBER_KEY) return undefined;
      return everyConversation(call, res, (c) => {
        if (c.is_owner === false && c.shared === false && c.channel !== "INTERACTIVE")
          c.channel = "INTERACTIVE";
      });
    },
  },
  {
    name: "session-not-recorded-on-storage-agent-resumed",
    area: "meaning",
    description:
      "On the storage-backed agent, agent_session_id stays null after a resumed turn with output (recorded after a first turn only)",
    breaks: ["STATE-SESSION-RECORDED"],
    onResponse(call, res) {
      if (call.route.agent !== "notes-agent") return undefined;
      return everyConversation(call, res, (c) => {
        if (typeof c.turn_count === "number" && c.turn_count >= 2) c.agent_session_id = null;
      });
    },
  },
];

export function combinationMutation(name: string): Mutation {
  const found = combinationMutations.find((m) => m.name === name);
  if (!found) throw new Error(`unknown combination mutation ${name}`);
  return found;
}
