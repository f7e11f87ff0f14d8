/**
 * The operations the explorer draws, as plain data: every route of the API, with the key, the agent, the
 * conversation and the input shape chosen at random among what the run's inputs provide. A conversation is
 * named by its position among those the sequence made so far (`slot`), so a sequence still means something
 * after shrinking removes steps.
 */
import fc from "fast-check";
import { ATTACHMENT_SHAPES, type AttachmentShape } from "../model/attachments.ts";
import type { Actor, AgentKind } from "../model/state.ts";
import type { SuiteInputs } from "../records.ts";

/** `parent`: the conversation the newest one was forked from (the newest itself when it is no fork). */
export type Target =
  | { kind: "slot"; n: number }
  | { kind: "parent" }
  | { kind: "fresh" }
  | { kind: "omit" }
  /**
   * A conversation owned by a chat channel, as a channel_id list showed it (read and forked only: the explorer
   * never sends into, shares or deletes a conversation it did not make).
   */
  | { kind: "channel" };
export type ContentShape =
  | "string"
  | "blocks"
  | "blocks-cache-control"
  | "blocks-with-image"
  | "earlier-messages"
  | "assistant-last";
/**
 * What the prompt asks: a short answer; thinking first (the stream then carries a thinking block); a code word
 * to remember, or the one remembered (memory across turns and forks, judged by the word alone); a command run
 * with the agent's tools (tool blocks when `stream_tool_calls` is set); the file attached to the turn read
 * back (a send with this prompt always attaches one file).
 */
export type PromptKind = "ok" | "think" | "remember" | "recall" | "tools" | "attached";
/** The agent a request names: a kind, or the one the target conversation belongs to. */
export type AgentChoice = AgentKind | "same";

export interface SendFlags {
  streamFalse?: boolean;
  streamToolCalls?: boolean;
  system?: boolean;
  /** A model of the models list: its first or last entry. */
  model?: "first" | "last";
  automation?: "given" | "unknown";
  attachments?: AttachmentShape;
  isolated?: boolean;
  asyncDelivery?: boolean;
  /**
   * Fields of the messages API the API accepts and ignores: usual values, or ones the messages API itself
   * would refuse (`max_tokens: 0`, `temperature: 5`, `top_p: 2`, a stop sequence, `tool_choice`).
   */
  ignoredFields?: "usual" | "odd";
  /** `stream` left out of the body (it is optional: the answer is an event stream all the same). */
  streamOmitted?: boolean;
  /**
   * Every metadata flag not otherwise set, sent with its default value (`read_only: true`, `isolated: false`,
   * `stream_tool_calls: false`, `delivery: "sync"`): a turn exactly like one without them.
   */
  explicitDefaults?: boolean;
}

export type Operation =
  | {
      op: "send";
      actor: Actor;
      agent: AgentChoice;
      target: Target;
      content: ContentShape;
      prompt: PromptKind;
      flags: SendFlags;
      route: "agent" | "prefix" | "bare";
    }
  | { op: "read"; actor: Actor; agent: AgentChoice; target: Target; route: "get" | "messages" | "compaction" }
  | {
      op: "list";
      actor: Actor;
      agent: AgentKind;
      limit?: number;
      /**
       * `true`: the channel the run's own conversations showed; `"other"`: another value of the enum, which
       * none of them has (only channel-owned ones of that channel may be listed).
       */
      channel?: boolean | "other";
      /** `anchor`: just after conversation #1's last activity; `ahead`: two days ahead (nothing is listed). */
      since?: "anchor" | "ahead";
      /** The filters naming what the inputs give: `--channel-id`, `--notebook-path`, `--automation`. */
      channelId?: boolean;
      notebookPath?: boolean;
      automation?: boolean;
    }
  | {
      op: "share";
      actor: Actor;
      agent: AgentChoice;
      target: Target;
      /**
       * `flip`: the opposite of what the model holds; `twice`: flip, then flip back (shared, then private again,
       * each toggle read back by the owner and the other reader's lists).
       */
      body: "true" | "false" | "flip" | "twice" | "string" | "empty" | "extra";
    }
  | {
      op: "fork";
      actor: Actor;
      agent: AgentChoice;
      target: Target;
      atTurn?: number;
      /**
       * The child's id: generated, a new one of the caller's, one a live conversation holds (on any agent of
       * the workspace: 409), or a deleted conversation's (free again).
       */
      child: "auto" | "fresh" | "taken" | "deleted";
      model?: "first" | "last";
      /** The inputs' automation in the body (main agent only): recorded as the child's default. */
      automation?: boolean;
      /** No body at all, or `{}` (the body is optional): at_turn, child and model are then not sent. */
      bare?: "no-body" | "empty";
    }
  | { op: "delete"; actor: Actor; agent: AgentChoice; target: Target }
  | { op: "models"; actor: Actor; agent: AgentKind };

/** The keys and agents this run's inputs provide (the owner's key and main agent always). */
export function availableActors(inputs: SuiteInputs): Actor[] {
  const actors: Actor[] = ["owner", "none", "unknown"];
  if (inputs.memberKey) actors.push("member");
  if (inputs.viewerKey) actors.push("viewer");
  if (inputs.revokedKey) actors.push("revoked");
  if (inputs.foreignKey) actors.push("foreign");
  return actors;
}

export function availableAgents(inputs: SuiteInputs): AgentKind[] {
  const agents: AgentKind[] = ["main", "unknown"];
  if (inputs.storageAgent) agents.push("storage");
  if (inputs.repoAgent) agents.push("repo");
  if (inputs.foreignAgent) agents.push("foreign");
  return agents;
}

/** Callers that may pass the gate weigh more: most interesting sequences are theirs. */
function actorArb(actors: Actor[], ownerWeight = 6): fc.Arbitrary<Actor> {
  const weight = (a: Actor) => (a === "owner" ? ownerWeight : a === "member" || a === "viewer" ? 3 : 1);
  return fc.oneof(...actors.map((a) => ({ arbitrary: fc.constant(a), weight: weight(a) })));
}

function agentChoiceArb(agents: AgentKind[]): fc.Arbitrary<AgentChoice> {
  return fc.oneof(
    { arbitrary: fc.constant<AgentChoice>("same"), weight: 8 },
    ...agents.map((a) => ({ arbitrary: fc.constant<AgentChoice>(a), weight: 1 })),
  );
}

/**
 * A send's agent: mostly the target's own, and the storage- and repository-backed agents as often as the
 * default one, so conversations of every agent kind are made, resumed and read back.
 */
function sendAgentArb(agents: AgentKind[]): fc.Arbitrary<AgentChoice> {
  const weight = (a: AgentKind) => (a === "storage" || a === "repo" ? 2 : 1);
  return fc.oneof(
    { arbitrary: fc.constant<AgentChoice>("same"), weight: 6 },
    ...agents.map((a) => ({ arbitrary: fc.constant<AgentChoice>(a), weight: weight(a) })),
  );
}

function agentArb(agents: AgentKind[]): fc.Arbitrary<AgentKind> {
  return fc.oneof(...agents.map((a) => ({ arbitrary: fc.constant(a), weight: a === "main" ? 6 : 1 })));
}

/** Mostly the newest conversations, so a sequence builds deep ones (several turns, forks of forks). */
const slotArb: fc.Arbitrary<Target> = fc
  .oneof(
    { arbitrary: fc.constant(0), weight: 5 },
    { arbitrary: fc.constant(1), weight: 2 },
    { arbitrary: fc.nat({ max: 7 }), weight: 2 },
  )
  .map((n) => ({ kind: "slot", n }));
const targetArb = fc.oneof(
  { arbitrary: slotArb, weight: 8 },
  { arbitrary: fc.constant<Target>({ kind: "fresh" }), weight: 1 },
);
/** Reads and forks may also name a channel-owned conversation. */
const readTargetArb = fc.oneof(
  { arbitrary: targetArb, weight: 8 },
  { arbitrary: fc.constant<Target>({ kind: "channel" }), weight: 1 },
);

/** Arbitraries of every operation over what `inputs` provide. */
export function operationArbitraries(inputs: SuiteInputs): Array<fc.Arbitrary<Operation>> {
  const actors = actorArb(availableActors(inputs));
  const agents = availableAgents(inputs);
  const routes: Array<"agent" | "prefix" | "bare"> = inputs.routingPrefix
    ? ["agent", "prefix", "bare"]
    : ["agent", "bare"];
  // Each flag present now and then; the refusing ones (async delivery) rarely, so conversations grow deep.
  const sometimes = <T>(arb: fc.Arbitrary<T>, oneIn = 3): fc.Arbitrary<T | undefined> =>
    fc.oneof({ arbitrary: fc.constant(undefined), weight: oneIn - 1 }, { arbitrary: arb, weight: 1 });
  const automations: Array<"given" | "unknown"> = inputs.automation ? ["given", "unknown"] : ["unknown"];
  const flags: fc.Arbitrary<SendFlags> = fc.record({
    streamFalse: sometimes(fc.constant(true), 4),
    streamToolCalls: sometimes(fc.constant(true)),
    system: sometimes(fc.constant(true), 4),
    model: sometimes(fc.constantFrom<"first" | "last">("first", "last")),
    automation: sometimes(fc.constantFrom(...automations), 5),
    attachments: sometimes(fc.constantFrom(...ATTACHMENT_SHAPES), 4),
    isolated: sometimes(fc.constant(true), 6),
    asyncDelivery: sometimes(fc.constant(true), 12),
    ignoredFields: sometimes(fc.constantFrom<"usual" | "odd">("usual", "odd"), 4),
    streamOmitted: sometimes(fc.constant(true), 5),
    explicitDefaults: sometimes(fc.constant(true), 5),
  });
  const send = fc
    .record({
      op: fc.constant("send" as const),
      // Sends that run a turn are what makes a conversation deep: the owner's weigh most.
      actor: actorArb(availableActors(inputs), 12),
      agent: sendAgentArb(agents),
      target: fc.oneof(
        { arbitrary: slotArb, weight: 6 },
        { arbitrary: fc.constant<Target>({ kind: "fresh" }), weight: 1 },
        { arbitrary: fc.constant<Target>({ kind: "omit" }), weight: 1 },
      ),
      content: fc.constantFrom<ContentShape>(
        "string",
        "blocks",
        "blocks-cache-control",
        "blocks-with-image",
        "earlier-messages",
        "assistant-last",
      ),
      // Remember and recall weigh as much as the short answer: a recall judges memory only right after a
      // remembered turn (or in the fork that copied it), so the pair must meet often.
      prompt: fc.oneof(
        { arbitrary: fc.constant<PromptKind>("ok"), weight: 4 },
        { arbitrary: fc.constant<PromptKind>("remember"), weight: 3 },
        { arbitrary: fc.constant<PromptKind>("recall"), weight: 3 },
        { arbitrary: fc.constant<PromptKind>("think"), weight: 2 },
        { arbitrary: fc.constant<PromptKind>("tools"), weight: 1 },
        { arbitrary: fc.constant<PromptKind>("attached"), weight: 2 },
      ),
      flags: fc.oneof({ arbitrary: fc.constant<SendFlags>({}), weight: 2 }, { arbitrary: flags, weight: 3 }),
      route: fc.oneof(
        { arbitrary: fc.constant<"agent">("agent"), weight: 4 },
        ...routes.map((r) => ({ arbitrary: fc.constant(r), weight: 1 })),
      ),
    })
    // A turn asked to read its attached file carries one, whatever else its flags hold.
    .map((o) => (o.prompt === "attached" ? { ...o, flags: { ...o.flags, attachments: "one" as const } } : o));
  const read = fc.record({
    op: fc.constant("read" as const),
    actor: actors,
    agent: agentChoiceArb(agents),
    target: readTargetArb,
    route: fc.constantFrom<"get" | "messages" | "compaction">("get", "messages", "compaction"),
  });
  const list = fc.record(
    {
      op: fc.constant("list" as const),
      actor: actors,
      agent: agentArb(agents),
      limit: fc.constantFrom(1, 2, 3, 5, 50, 200),
      channel: fc.constantFrom<boolean | "other">(false, false, true, "other"),
      since: fc.constantFrom<"anchor" | "ahead" | undefined>(undefined, "anchor", "anchor", "ahead"),
      ...(inputs.channelId && { channelId: fc.boolean() }),
      ...(inputs.notebookPath && { notebookPath: fc.boolean() }),
      ...(inputs.automation && { automation: fc.boolean() }),
    },
    { requiredKeys: ["op", "actor", "agent"] },
  );
  const share = fc.record({
    op: fc.constant("share" as const),
    actor: actorArb(availableActors(inputs), 12),
    agent: agentChoiceArb(agents),
    target: targetArb,
    body: fc.oneof(
      {
        arbitrary: fc.constantFrom<"true" | "false" | "flip" | "twice">("true", "false", "flip", "twice"),
        weight: 6,
      },
      {
        arbitrary: fc.constantFrom<"string" | "empty" | "extra">("string", "string", "empty", "extra"),
        weight: 2,
      },
    ),
  });
  const fork = fc.record(
    {
      op: fc.constant("fork" as const),
      actor: actorArb(availableActors(inputs), 12),
      agent: agentChoiceArb(agents),
      target: readTargetArb,
      atTurn: fc.nat({ max: 4 }),
      child: fc.constantFrom<"auto" | "fresh" | "taken" | "deleted">(
        "auto",
        "fresh",
        "fresh",
        "taken",
        "deleted",
      ),
      model: fc.constantFrom<"first" | "last">("first", "last"),
      ...(inputs.automation && { automation: fc.boolean() }),
      // About one fork in ten (an optional key is left out half the time).
      bare: fc.oneof(
        { arbitrary: fc.constant(undefined), weight: 4 },
        { arbitrary: fc.constantFrom<"no-body" | "empty">("no-body", "empty"), weight: 1 },
      ),
    },
    { requiredKeys: ["op", "actor", "agent", "target", "child"] },
  );
  // A delete aims at the newest conversation, the one before it, and the newest one's parent as often: a
  // parent's delete must leave its child.
  const del = fc.record({
    op: fc.constant("delete" as const),
    actor: actorArb(availableActors(inputs), 12),
    agent: agentChoiceArb(agents),
    target: fc.oneof(
      {
        arbitrary: fc.constantFrom<Target>(
          { kind: "slot", n: 0 },
          { kind: "slot", n: 1 },
          { kind: "parent" },
        ),
        weight: 6,
      },
      { arbitrary: targetArb, weight: 2 },
    ),
  });
  const models = fc.record({ op: fc.constant("models" as const), actor: actors, agent: agentArb(agents) });
  return [
    send as fc.Arbitrary<Operation>,
    send as fc.Arbitrary<Operation>,
    send as fc.Arbitrary<Operation>,
    send as fc.Arbitrary<Operation>,
    send as fc.Arbitrary<Operation>,
    read,
    read,
    read,
    list,
    share,
    share,
    share,
    fork,
    fork,
    del,
    del,
    models,
  ];
}

/** One line naming an operation, for the reports. */
export function describeOperation(o: Operation): string {
  const target = (t: Target) =>
    t.kind === "slot"
      ? `conversation #${t.n}`
      : t.kind === "parent"
        ? "the newest conversation's parent"
        : t.kind === "fresh"
          ? "a new id"
          : t.kind === "channel"
            ? "a channel-owned conversation"
            : "no id";
  const agent = (a: AgentChoice) => (a === "same" ? "its agent" : `the ${a} agent`);
  switch (o.op) {
    case "send": {
      const flags = Object.entries(o.flags)
        .filter(([, v]) => v !== undefined && v !== false)
        .map(([k, v]) => (v === true ? k : `${k}=${v}`));
      const via =
        o.route === "agent"
          ? ""
          : o.route === "prefix"
            ? " via the routed send (prefix)"
            : " via the routed send (bare name)";
      return `${o.actor} sends to ${target(o.target)} on ${agent(o.agent)}${via}, content ${o.content}, prompt ${o.prompt}${flags.length ? `, ${flags.join(", ")}` : ""}`;
    }
    case "read":
      return `${o.actor} reads ${target(o.target)} (${o.route}) on ${agent(o.agent)}`;
    case "list":
      return `${o.actor} lists the ${o.agent} agent's conversations${o.limit ? ` limit=${o.limit}` : ""}${o.channel === "other" ? " by another channel" : o.channel ? " by channel" : ""}${o.since === "anchor" ? " since just after conversation #1's last activity" : o.since === "ahead" ? " since two days ahead" : ""}${o.channelId ? " by channel_id" : ""}${o.notebookPath ? " by notebook_path" : ""}${o.automation ? " by automation" : ""}`;
    case "share":
      return `${o.actor} shares ${target(o.target)} on ${agent(o.agent)} with body ${o.body}`;
    case "fork":
      if (o.bare)
        return `${o.actor} forks ${target(o.target)} on ${agent(o.agent)} with ${o.bare === "no-body" ? "no body" : "the body {}"}`;
      return `${o.actor} forks ${target(o.target)} on ${agent(o.agent)}${o.atTurn !== undefined ? ` at_turn=${o.atTurn}` : ""}, child id ${o.child}${o.model ? `, model ${o.model}` : ""}${o.automation ? ", the automation" : ""}`;
    case "delete":
      return `${o.actor} deletes ${target(o.target)} on ${agent(o.agent)}`;
    case "models":
      return `${o.actor} lists the ${o.agent} agent's models`;
  }
}
