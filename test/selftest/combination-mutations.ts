/**
 * Faults that break a rule only under a combination of conditions no named check enumerates: the explorer's
 * proof (explorer.test.ts, test/explore/). Not in the scored catalogue (mutations.ts), whose every entry a
 * named check must catch.
 */
import { DEMO_ADMIN_KEY, DEMO_VIEWER_KEY } from "../../reference-server/demo/workspace.ts";
import { isEventStream, jsonOf, type Mutation, type ProxyResponse, withJson } from "./proxy-calls.ts";

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
];

export function combinationMutation(name: string): Mutation {
  const found = combinationMutations.find((m) => m.name === name);
  if (!found) throw new Error(`unknown combination mutation ${name}`);
  return found;
}
