/**
 * Titles, counts, timestamps and the other fields of a conversation (Resources/Conversation; Conventions):
 * what every route that returns a conversation must say about it, given what the model knows.
 */
import type { LearnedChoices } from "./choices.ts";
import { expectRule } from "./mismatch.ts";
import { defineRules } from "./rules.ts";
import type { Actor, ConversationModel } from "./state.ts";
import { visibilityRules } from "./visibility.ts";

const CONV = "Resources/Conversation";

export const fieldRules = defineRules("fields", {
  id: { section: CONV, check: "CONSIST-ROUTES-AGREE", text: "`id` is the conversation's id" },
  titleStable: {
    section: CONV,
    check: "GET-TITLE-STABLE",
    text: "`title` is derived from the first prompt at creation and never changed afterwards",
  },
  shared: {
    section: CONV,
    check: "STATE-SHARE-TRUE",
    text: "`shared` is false at creation and holds the owner's last toggle",
  },
  channel: {
    section: CONV,
    check: "LIST-CHANNEL-OWNED-VISIBLE",
    text: "`channel` says where the conversation lives: the same on every route and read, and not `INTERACTIVE` for one a caller sees that is neither its own nor shared (only a conversation owned by a chat channel or e-mail is visible so)",
  },
  parent: {
    section: CONV,
    check: "STATE-FORK-CHILD",
    text: "`parent_conversation_id` and `forked_at_turn_index` are set on forks, null otherwise",
  },
  turnCount: {
    section: CONV,
    check: "GET-TURN-COUNT",
    text: "`turn_count` counts the conversation's turns: one more after each turn",
  },
  timestamps: {
    section: "Conventions",
    check: "LIST-TIMESTAMPS",
    text: "Timestamps are ISO 8601 strings in UTC with milliseconds",
  },
  createdStable: {
    section: CONV,
    check: "MEANING-TIMESTAMPS-MOVE",
    text: "`created_at` never changes; `updated_at` is never before it and never moves back",
  },
  updatedMoves: {
    section: CONV,
    check: "MEANING-TIMESTAMPS-MOVE",
    text: "A turn is activity: after it, `updated_at` is later than any value read before the turn was sent",
  },
  titleFromPrompt: {
    section: CONV,
    check: "GET-TITLE-FROM-PROMPT",
    text: "`title` is derived from the first prompt, a string or text blocks: never empty, never the id, never the `system` or an older element of `messages`",
  },
  titleFromFirstPrompt: {
    section: CONV,
    check: "GET-TITLE-FROM-PROMPT",
    text: "`title` is derived from the first prompt at creation: it holds nothing first sent in a later turn's prompt, nor in a prompt of a conversation deleted under the same id (a fork's child: nothing sent after the fork)",
  },
  sessionRecorded: {
    section: "States and transitions",
    check: "STATE-SESSION-RECORDED",
    text: "After a turn with output, `agent_session_id` becomes non-null (within the Client guidance's bounded wait), on every agent kind and at every depth",
  },
  sessionType: {
    section: CONV,
    check: "STATE-SESSION-RECORDED",
    text: "`agent_session_id` is a string or null",
  },
});

/** A learned fact: the deployment's timestamps carry milliseconds other than ".000". */
export const MILLISECONDS_SHOWN = "timestamps show milliseconds";

const ISO_MS_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(Z|\+00:00)$/;

/** Compares one conversation object with the model and learns what it first shows (title, created_at). */
export function judgeConversation(
  body: Record<string, unknown>,
  c: ConversationModel,
  actor: Actor,
  choices: LearnedChoices,
): void {
  expectRule(fieldRules.id, body.id === c.id, JSON.stringify(c.id), body.id);
  expectRule(
    visibilityRules.isOwner,
    body.is_owner === (c.owner === actor),
    String(c.owner === actor),
    body.is_owner,
  );
  expectRule(fieldRules.shared, body.shared === c.shared, String(c.shared), body.shared);
  if (!c.parentGone) judgeParent(body, c);
  const copied = c.history.length - c.ownTurns;
  let expectedCount = c.ownTurns;
  if (copied > 0) {
    // Whether a child's count includes the turns it copied is not shown: learned from the first child read.
    const key = "turn_count of a fork counts its copied turns";
    let learned = choices.get(key);
    if (learned === undefined && (body.turn_count === c.history.length || body.turn_count === c.ownTurns)) {
      learned = String(body.turn_count === c.history.length);
      choices.observe(key, learned);
    }
    expectedCount = learned === "false" ? c.ownTurns : c.history.length;
  }
  expectRule(fieldRules.turnCount, body.turn_count === expectedCount, String(expectedCount), body.turn_count);
  if (typeof body.title === "string") {
    // A fork child's title (copied or derived from its own first prompt) is not shown.
    if (c.parent === null) {
      expectRule(
        fieldRules.titleFromPrompt,
        body.title.trim() !== "" && body.title !== c.id,
        "a title derived from the first prompt",
        JSON.stringify(body.title),
      );
    }
    if (c.title === undefined) {
      // The first read after the first turn: the title comes from that turn's prompt, never from the `system`
      // or the older `messages` elements the same request carried.
      const title = body.title.toLowerCase();
      const from = (c.notTitle ?? []).find((t) => title.includes(t.toLowerCase()));
      expectRule(
        fieldRules.titleFromPrompt,
        from === undefined,
        `a title derived from the first prompt, not from ${JSON.stringify(from)} beside it`,
        JSON.stringify(body.title),
      );
      c.title = body.title;
    }
    expectRule(fieldRules.titleStable, body.title === c.title, JSON.stringify(c.title), body.title);
  }
  for (const field of ["created_at", "updated_at"] as const) {
    const v = body[field];
    expectRule(
      fieldRules.timestamps,
      typeof v === "string" && ISO_MS_UTC.test(v),
      "an ISO 8601 UTC timestamp with milliseconds",
      v,
    );
  }
  const created = String(body.created_at);
  const updated = String(body.updated_at);
  if (c.createdAt === undefined) c.createdAt = created;
  expectRule(fieldRules.createdStable, created === c.createdAt, c.createdAt, created);
  expectRule(
    fieldRules.createdStable,
    Date.parse(updated) >= Date.parse(created),
    `updated_at ≥ ${created}`,
    updated,
  );
  if (c.updatedAt !== undefined) {
    expectRule(
      fieldRules.createdStable,
      Date.parse(updated) >= Date.parse(c.updatedAt),
      `updated_at ≥ ${c.updatedAt}`,
      updated,
    );
  }
  // Whether the deployment's clock shows milliseconds at all is learned (".000" throughout says it may not),
  // so a strict advance is asked for only where it can show.
  if ([created, updated].some((t) => /\.\d{3}/.test(t) && !/\.000/.test(t)))
    choices.observe(MILLISECONDS_SHOWN, "true");
  if (c.mustExceed !== undefined && choices.get(MILLISECONDS_SHOWN) === "true") {
    expectRule(
      fieldRules.updatedMoves,
      Date.parse(updated) > Date.parse(c.mustExceed),
      `updated_at later than ${c.mustExceed} (read before the conversation's last turn)`,
      updated,
    );
  }
  c.updatedAt = updated;
  if (typeof body.channel === "string") c.channel = body.channel;
  const session = body.agent_session_id;
  expectRule(
    fieldRules.sessionType,
    session === null || typeof session === "string",
    "a string or null",
    session,
  );
  if (typeof body.channel === "string" && !c.fromChannel)
    choices.observe("channel of a conversation made through the API", body.channel);
}

function judgeParent(body: Record<string, unknown>, c: ConversationModel): void {
  expectRule(
    fieldRules.parent,
    (body.parent_conversation_id ?? null) === (c.parent?.id ?? null),
    JSON.stringify(c.parent?.id ?? null),
    body.parent_conversation_id,
  );
  if (c.parent === null) {
    expectRule(
      fieldRules.parent,
      (body.forked_at_turn_index ?? null) === null,
      "null",
      body.forked_at_turn_index,
    );
  } else {
    expectRule(
      fieldRules.parent,
      body.forked_at_turn_index === c.parent.forkedAt,
      String(c.parent.forkedAt),
      body.forked_at_turn_index,
    );
  }
}
