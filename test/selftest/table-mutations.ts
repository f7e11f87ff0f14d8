/**
 * Mutations drawn from tables rather than from the checks: every field of the conversation broken on one
 * route at a time (field × route), and every rule whose input has more than one legal shape broken for the
 * shape the suite used not to send (rule × input variant), plus the evident meaning of fields. A check that
 * reads a field on one route only, or sends one shape of an input only, lets the row through; the score per
 * class (`npm run mutation-score`) shows it. `npm test` runs the rows marked `sample`.
 */
import type { components } from "../../generated/api-types.ts";
import { CONVERSATION_CARRIERS, everyConversation, foldId } from "./conversation-rewrites.ts";
import type { Mutation } from "./proxy-calls.ts";
import { errorResponse, isEventStream, type Json, jsonOf, ProxyCall, withJson } from "./proxy-calls.ts";

/** A different value of the same type (so the spec still passes and only the meaning is wrong). */
const shiftIso = (value: Json) =>
  typeof value === "string" && !Number.isNaN(Date.parse(value))
    ? new Date(Date.parse(value) + 1_000).toISOString()
    : value;

/** Keyed by the spec's Conversation schema: a new field fails the compiler until it has a row. */
const FIELD_CHANGES: Record<keyof components["schemas"]["Conversation"], (value: Json) => Json> = {
  id: (v) => `${v}-elsewhere`,
  title: (v) => `${v} (edited)`,
  channel: (v) => (v === "INTERACTIVE" ? "NOTEBOOK" : "INTERACTIVE"),
  shared: (v) => !v,
  is_owner: (v) => !v,
  agent_session_id: (v) => (v === null ? "session-from-elsewhere" : null),
  parent_conversation_id: (v) => (v === null ? "a-parent-elsewhere" : `${v}-elsewhere`),
  forked_at_turn_index: (v) => (v === null ? 0 : v + 1),
  created_at: shiftIso,
  updated_at: shiftIso,
  turn_count: (v) => (typeof v === "number" ? v + 1 : v),
};

/** The checks that read one conversation through every route. */
const ROUTE_SWEEP = [
  "CONSIST-ROUTES-AGREE",
  "CONSIST-FORK-READBACK",
  "CONSIST-SHARED-MEMBER-VIEW",
  "CONSIST-ROUTED-SEND",
  "CONSIST-ID-CHARACTERS",
];

/** One row per route per field; the sample keeps one row of each route in `npm test`. */
const SAMPLE_ROWS = new Set(["is_owner@list", "updated_at@transcript", "turn_count@conversation"]);

function fieldOnRoute(field: string, route: string): Mutation {
  return {
    name: `field-${field}-wrong-on-${route}`,
    area: "consistency",
    table: "field × route",
    sample: SAMPLE_ROWS.has(`${field}@${route}`) || undefined,
    description: `The ${route === "conversation" ? "single fetch" : route} shows another ${field} than the other routes`,
    breaks: ROUTE_SWEEP,
    onResponse(call, res) {
      if (res.status !== 200 || call.method !== "GET" || call.route.kind !== route) return;
      const body = jsonOf(res);
      const carried = CONVERSATION_CARRIERS[route](body);
      if (carried.length === 0) return;
      const change = FIELD_CHANGES[field as keyof typeof FIELD_CHANGES];
      for (const conversation of carried)
        if (conversation && field in conversation) conversation[field] = change(conversation[field]);
      return withJson(res, body);
    },
  };
}

/** Where a send's or a path's conversation id is rewritten the same way, so the conversation stays reachable. */
function foldIds(call: ProxyCall): undefined {
  const route = call.route;
  if ((route.kind === "send" || route.kind === "routed") && call.method === "POST") {
    const body = call.json();
    const id = body?.metadata?.conversation_id;
    if (typeof id === "string" && foldId(id) !== id) {
      body.metadata.conversation_id = foldId(id);
      call.setJson(body);
    }
    return;
  }
  if (route.id !== undefined && foldId(route.id) !== route.id) {
    const encoded = encodeURIComponent(route.id);
    call.path = call.path.replace(encoded, encodeURIComponent(foldId(route.id)));
  }
}

const variantRows: Mutation[] = [
  {
    name: "key-header-case-sensitive",
    area: "consistency",
    table: "rule × input",
    sample: true,
    description:
      "The key header is read only when spelled X-Api-Key or X-API-Key (header names are case-insensitive)",
    breaks: ["CONSIST-KEY-HEADER-CASE"],
    onRequest(call) {
      const spelled = call.sentHeaderNames.find((name) => name.toLowerCase() === "x-api-key");
      if (spelled === undefined || spelled === "X-Api-Key" || spelled === "X-API-Key") return;
      return errorResponse(401, "authentication_error", "Invalid API key");
    },
  },
  {
    name: "conversation-id-folded-to-ascii",
    area: "consistency",
    table: "rule × input",
    description: "A conversation id with spaces or non-ASCII letters is stored rewritten (not verbatim)",
    breaks: ["CONSIST-ID-CHARACTERS"],
    onRequest: foldIds,
  },
  {
    name: "content-blocks-joined-with-space",
    area: "consistency",
    table: "rule × input",
    description: "Text blocks of the user message are joined with a space, not with blank lines",
    breaks: ["CONSIST-CONTENT-JOIN"],
    onRequest(call) {
      if ((call.route.kind !== "send" && call.route.kind !== "routed") || call.method !== "POST") return;
      const body = call.json();
      const messages = Array.isArray(body?.messages) ? body.messages : [];
      const last = messages[messages.length - 1];
      if (!Array.isArray(last?.content)) return;
      last.content = last.content
        .filter((b: Json) => b?.type === "text")
        .map((b: Json) => b.text)
        .join(" ");
      call.setJson(body);
    },
  },
  {
    name: "routed-send-without-conversation-header",
    area: "consistency",
    table: "field × route",
    description: "The model-routed send drops X-Conversation-Id, which the per-agent send carries",
    breaks: ["CONSIST-ROUTED-SEND"],
    onResponse(call, res) {
      if (call.route.kind !== "routed" || !isEventStream(res)) return;
      const headers = { ...res.headers };
      delete headers["x-conversation-id"];
      return { ...res, headers };
    },
  },
  {
    name: "fork-result-turn-off-by-one",
    area: "consistency",
    table: "field × route",
    description: "The fork result's forked_at_turn is one more than the child's forked_at_turn_index",
    breaks: ["CONSIST-FORK-READBACK"],
    onResponse(call, res) {
      if (call.route.kind !== "fork" || res.status !== 200) return;
      const body = jsonOf(res);
      if (typeof body?.forked_at_turn !== "number") return;
      body.forked_at_turn += 1;
      return withJson(res, body);
    },
  },
  {
    name: "deleted-conversation-still-listed",
    area: "consistency",
    table: "field × route",
    sample: true,
    description: "A deleted conversation is gone from the single fetch but the list still shows it",
    breaks: ["CONSIST-DELETED-EVERYWHERE"],
    onResponse(call, res, tools) {
      const seen: Map<string, Json> = tools.state.get("seen") ?? new Map();
      const deleted: Map<string, Json> = tools.state.get("deleted") ?? new Map();
      tools.state.set("seen", seen);
      tools.state.set("deleted", deleted);
      const id = call.route.id;
      if (call.route.kind === "conversation" && call.method === "GET" && res.status === 200 && id)
        seen.set(id, jsonOf(res)?.conversation);
      if (call.route.kind === "conversation" && call.method === "DELETE" && res.status === 204 && id)
        deleted.set(id, seen.get(id));
      if (call.route.kind !== "list" || res.status !== 200 || deleted.size === 0) return;
      const body = jsonOf(res);
      if (!Array.isArray(body?.conversations)) return;
      for (const conversation of deleted.values()) if (conversation) body.conversations.unshift(conversation);
      return withJson(res, body);
    },
  },
  {
    name: "share-toggle-flips",
    area: "consistency",
    table: "rule × input",
    description:
      "The share toggle flips the current value whatever it is sent (a true sent to a shared conversation unshares it)",
    breaks: ["CONSIST-SHARE-IDEMPOTENT"],
    async onRequest(call, tools) {
      if (call.route.kind !== "conversation" || call.method !== "POST" || !call.route.agent) return;
      const body = call.json();
      if (typeof body?.shared !== "boolean") return;
      const path = call.path;
      const current = jsonOf(await tools.forward(ProxyCall.make("GET", path, call.key)))?.conversation
        ?.shared;
      if (typeof current === "boolean") call.setJson({ shared: !current });
    },
  },
  {
    name: "since-only-z-form",
    area: "consistency",
    table: "rule × input",
    description:
      "since is read only in the form ending in Z; any other ISO 8601 form is ignored (the list unfiltered)",
    breaks: ["CONSIST-SINCE-FORMS"],
    onRequest(call) {
      if (call.route.kind !== "list") return;
      const url = call.url;
      const since = url.searchParams.get("since");
      if (since === null || since.endsWith("Z")) return;
      url.searchParams.delete("since");
      call.path = url.pathname + url.search;
    },
  },
  {
    name: "routed-stream-block-unclosed",
    area: "consistency",
    table: "rule × input",
    description:
      "On the model-routed send only, a text block is never closed (content_block_stop dropped): the grammar holds on one route",
    breaks: ["CONSIST-ROUTED-SEND", "ROUTED-BARE-NAME"],
    onEvents(events, call) {
      if (call.route.kind !== "routed") return;
      return events.filter((e) => e.event !== "content_block_stop");
    },
  },
];

const meaningRows: Mutation[] = [
  {
    name: "turn-count-frozen",
    area: "meaning",
    table: "field × route",
    description: "turn_count stays 1 whatever the number of turns",
    breaks: ["GET-TURN-COUNT"],
    onResponse(call, res) {
      return everyConversation(call, res, (c) => {
        if (typeof c.turn_count === "number") c.turn_count = 1;
      });
    },
  },
  {
    name: "updated-at-frozen",
    area: "meaning",
    table: "field × route",
    sample: true,
    description: "updated_at never moves after creation (it repeats created_at on every route)",
    breaks: ["MEANING-TIMESTAMPS-MOVE"],
    onResponse(call, res) {
      return everyConversation(call, res, (c) => {
        if (typeof c.created_at === "string") c.updated_at = c.created_at;
      });
    },
  },
  {
    name: "list-ordered-by-creation",
    area: "meaning",
    table: "field × route",
    description: "The list is ordered by creation, newest first, not by newest activity",
    breaks: ["MEANING-LIST-NEWEST-ACTIVITY", "LIST-SHAPE-ORDER"],
    onResponse(call, res) {
      if (call.route.kind !== "list" || res.status !== 200) return;
      const body = jsonOf(res);
      if (!Array.isArray(body?.conversations)) return;
      body.conversations.sort((a: Json, b: Json) => String(b.created_at).localeCompare(String(a.created_at)));
      return withJson(res, body);
    },
  },
  {
    name: "usage-counts-nothing",
    area: "meaning",
    table: "field × route",
    description: "message_delta.usage reports 0 output tokens on a turn that produced text",
    breaks: ["MEANING-USAGE-COUNTS"],
    onEvents(events) {
      for (const e of events) {
        const usage = e.event === "message_delta" ? e.data?.usage : undefined;
        if (usage && typeof usage.output_tokens === "number") usage.output_tokens = 0;
      }
      return events;
    },
  },
];

export const tableMutations: Mutation[] = [
  ...Object.keys(FIELD_CHANGES).flatMap((field) =>
    Object.keys(CONVERSATION_CARRIERS).map((route) => fieldOnRoute(field, route)),
  ),
  ...variantRows,
  ...meaningRows,
];
