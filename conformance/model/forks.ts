/**
 * Forks (Endpoints/Fork a conversation; States and transitions): who may fork, the child's id, how much
 * history it copies, the defaults it records, and its independence from the parent afterwards.
 */
import type { LearnedChoices } from "./choices.ts";
import type { StatusExpectation } from "./expectation.ts";
import { lookUpConversation } from "./lookup.ts";
import { expectRule } from "./mismatch.ts";
import { defineRules } from "./rules.ts";
import type { Actor, AgentKind, ConversationModel, ModelState } from "./state.ts";

const FORK = "Endpoints/Fork a conversation";

export const forkRules = defineRules("forks", {
  readerForks: {
    section: "States and transitions",
    check: "STATE-SHARED-MEMBER-FORK",
    text: "A caller who may read a conversation may fork it: 200 with the fork result",
  },
  taken409: {
    section: FORK,
    check: "ERR-409-FORK-TAKEN",
    text: "A fork whose conversation_id is already taken gets 409",
  },
  customId: {
    section: FORK,
    check: "FORK-CUSTOM-ID",
    text: "The child gets the conversation_id the body names",
  },
  result: {
    section: "Resources/Fork result",
    check: "CONSIST-FORK-READBACK",
    text: "The fork result names the child, its parent and forked_at_turn, and the child says the same",
  },
  childPrivateOwned: {
    section: "States and transitions",
    check: "STATE-FORK-CHILD",
    text: "The child is private and owned by the caller; the parent is unchanged",
  },
  allTurns: {
    section: FORK,
    check: "FORK-DEFAULT-ALL-TURNS",
    text: "Without at_turn the child copies all turns",
  },
  atTurnCopies: {
    section: FORK,
    check: "FORK-AT-TURN-CUTS",
    text: "at_turn copies history up to that turn, clamped to the conversation's length",
  },
  independent: {
    section: "States and transitions",
    check: "STATE-FORK-CHILD",
    text: "After the fork, parent and child are independent: turns of one never appear in the other, and deleting the parent leaves the child",
  },
  forkedAtRecorded: {
    section: "Resources/Fork result",
    check: "FORK-AT-TURN-CUTS",
    text: "`forked_at_turn` names the turn the child was cut at: within the parent's length (at_turn clamped), at its end without at_turn, and read the same way on every fork",
  },
  modelRecorded: {
    section: FORK,
    check: "FORK-MODEL-RECORDED",
    text: "The fork's model is recorded on the child as the default of its future turns",
  },
});

export function predictFork(
  state: ModelState,
  actor: Actor,
  agent: AgentKind,
  id: string,
  childId: string | undefined,
): StatusExpectation {
  const found = lookUpConversation(state, actor, agent, id);
  if ("refusal" in found) return { kind: "exact", refusal: found.refusal };
  if (childId !== undefined && state.live(childId)) {
    return { kind: "exact", refusal: { status: 409, rule: forkRules.taken409 } };
  }
  if (actor === "viewer") {
    // Permissions of a Viewer beyond reading and sending: not shown.
    return {
      kind: "learned",
      among: [200, 403],
      rule: forkRules.readerForks,
      choice: "fork by a Viewer key",
    };
  }
  return { kind: "exact", refusal: { status: 200, rule: forkRules.readerForks } };
}

/**
 * How many of the parent's turns a child forked `atTurn` holds: all without at_turn; with it, the API shows
 * neither whether turns count from 0 or 1, so the offset is learned from the first fork whose at_turn is
 * inside the conversation, then clamped.
 */
export function copiedTurns(
  parent: ConversationModel,
  atTurn: number | undefined,
  seenCopied: number,
  choices: LearnedChoices,
): { expected: number | undefined; rule: typeof forkRules.allTurns } {
  const length = parent.history.length;
  if (atTurn === undefined) return { expected: length, rule: forkRules.allTurns };
  if (atTurn >= 0 && atTurn < length) {
    const offset = choices.get("fork at_turn: turns copied minus at_turn");
    if (offset === undefined) {
      // Counting from 0 or from 1 are the two readings; anything else is no reading of the API.
      if (seenCopied !== atTurn && seenCopied !== Math.min(length, atTurn + 1)) {
        return { expected: atTurn, rule: forkRules.atTurnCopies };
      }
      choices.observe("fork at_turn: turns copied minus at_turn", String(seenCopied - atTurn));
      return { expected: seenCopied, rule: forkRules.atTurnCopies };
    }
    return { expected: Math.max(0, Math.min(length, atTurn + Number(offset))), rule: forkRules.atTurnCopies };
  }
  if (atTurn >= length) return { expected: length, rule: forkRules.atTurnCopies };
  return { expected: undefined, rule: forkRules.atTurnCopies };
}

/**
 * `forked_at_turn` of a fork of `parent`. Whether it counts from 0 or 1, and names the last turn copied or the
 * count, is not shown: each reading is learned from the first fork of its kind (without at_turn; with an
 * at_turn well inside the conversation, where no clamp applies) and expected on every later one.
 */
export function judgeForkedAt(
  parent: ConversationModel,
  atTurn: number | undefined,
  forkedAt: unknown,
  choices: LearnedChoices,
): void {
  if (typeof forkedAt !== "number") return;
  const length = parent.history.length;
  expectRule(
    forkRules.forkedAtRecorded,
    forkedAt >= 0 && forkedAt <= length,
    `a turn index within the parent's ${length} turns (at_turn ${atTurn ?? "omitted"}, clamped)`,
    forkedAt,
  );
  const learn = (choice: string, offset: number) => {
    const learned = choices.get(choice);
    if (learned === undefined) {
      choices.observe(choice, String(offset));
      return;
    }
    expectRule(
      forkRules.forkedAtRecorded,
      offset === Number(learned),
      `${Number(learned) + forkedAt - offset} (as earlier forks of this kind recorded it)`,
      forkedAt,
    );
  };
  if (atTurn === undefined) {
    expectRule(
      forkRules.forkedAtRecorded,
      forkedAt >= length - 1,
      `the parent's last turn (${length - 1} or ${length}): a fork without at_turn copies all turns`,
      forkedAt,
    );
    learn("fork without at_turn: forked_at_turn minus the parent's turns", forkedAt - length);
  } else if (atTurn + 1 < length)
    learn("fork at_turn inside: forked_at_turn minus at_turn", forkedAt - atTurn);
}
