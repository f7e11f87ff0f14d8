/**
 * Every conversation object the named checks read (Resources/Conversation), on whichever route returned it
 * (single fetch, list, transcript) and under whichever key: `is_owner` says whether that key's user made it,
 * `title` and `created_at` never change once the conversation exists, `updated_at` is never before
 * `created_at`; one the run made and never toggled is private; one a send made (not a fork) has no parent.
 * A conversation's reads count until its first delete began (an id may be used again after);
 * a read showing a later `created_at` is of another conversation under the id (a client of the same workspace
 * deleted the run's and sent to it again), so it starts afresh.
 */
import type { ConversationRead, RunState } from "../context.ts";
import { fieldRules } from "../model/fields.ts";
import { expectRule } from "../model/mismatch.ts";
import { visibilityRules } from "../model/visibility.ts";
import { Findings, type LogFacts, logFacts, type SweepFinding } from "./finding.ts";
import { distinctKeys } from "./keys.ts";

type Read = Extract<ConversationRead, { kind: "read" }>;

const who = (read: Read, run: RunState) =>
  read.key === run.inputs.key
    ? "the owner's key"
    : read.key === run.inputs.memberKey
      ? "the member's key"
      : "the Viewer's key";

export function judgeConversationsRead(
  log: ConversationRead[],
  run: RunState,
  { firstDelete, toggled, forkChildren }: LogFacts = logFacts(log),
): SweepFinding[] {
  const keys = distinctKeys(run);
  const first = new Map<string, Read>();
  const remade = new Set<string>();
  const found = new Findings();
  const reads = log.filter((e): e is Read => e.kind === "read").sort((a, b) => a.ended - b.ended);
  const made = (id: string) => !remade.has(id) && run.created.has(id);
  for (const read of reads) {
    const c = read.conversation;
    const id = c.id;
    if (typeof id !== "string") continue;
    const cut = firstDelete.get(id);
    if (cut !== undefined && read.ended > cut) continue;
    const where = `${read.request} with ${who(read, run)}, by ${read.madeBy}: conversation ${id}`;
    const before = first.get(id);
    const was = before?.conversation;
    if (
      was !== undefined &&
      typeof c.created_at === "string" &&
      typeof was.created_at === "string" &&
      Date.parse(c.created_at) > Date.parse(was.created_at)
    ) {
      // A later creation: another conversation with the id, made after someone else (a client of the same
      // workspace) deleted the run's. Whose it is, the run cannot tell. (A created_at that moves on every read
      // is MEANING-TIMESTAMPS-MOVE's own to find, and the explorer's.)
      first.set(id, read);
      remade.add(id);
      continue;
    }
    try {
      // Made by the run and never toggled by anyone: private, as every conversation is at creation.
      if (made(id) && !toggled.has(id) && typeof c.shared === "boolean")
        expectRule(
          fieldRules.shared,
          c.shared === false,
          "false (no share toggle was sent for it)",
          c.shared,
        );
      // Made by a send of the run, not a fork: no parent.
      if (made(id) && !forkChildren.has(id))
        expectRule(
          fieldRules.parent,
          (c.parent_conversation_id ?? null) === null && (c.forked_at_turn_index ?? null) === null,
          "parent_conversation_id and forked_at_turn_index null (it was made by a send, not a fork)",
          JSON.stringify({
            parent_conversation_id: c.parent_conversation_id,
            forked_at_turn_index: c.forked_at_turn_index,
          }),
        );
      const owner = made(id) ? run.created.get(id)?.key : undefined;
      if (keys && owner !== undefined && read.key !== undefined && keys.has(read.key)) {
        const owns = read.key === owner;
        expectRule(visibilityRules.isOwner, c.is_owner === owns, String(owns), c.is_owner);
      }
      const created = typeof c.created_at === "string" ? Date.parse(c.created_at) : Number.NaN;
      const updated = typeof c.updated_at === "string" ? Date.parse(c.updated_at) : Number.NaN;
      if (!Number.isNaN(created) && !Number.isNaN(updated))
        expectRule(
          fieldRules.createdStable,
          updated >= created,
          `updated_at ≥ ${c.created_at}`,
          c.updated_at,
        );
      if (before === undefined || was === undefined) {
        first.set(id, read);
        continue;
      }
      if (typeof was.title === "string" && typeof c.title === "string")
        expectRule(
          fieldRules.titleStable,
          c.title === was.title,
          `${JSON.stringify(was.title)}, as ${before.request} showed it earlier`,
          c.title,
        );
      if (typeof was.created_at === "string" && typeof c.created_at === "string")
        expectRule(
          fieldRules.createdStable,
          c.created_at === was.created_at,
          `${was.created_at}, as ${before.request} showed it earlier`,
          c.created_at,
        );
    } catch (error) {
      found.add(error, where, JSON.stringify(c, null, 2));
    }
  }
  return found.list();
}
