/**
 * Every conversation object the named checks read (Resources/Conversation), on whichever route returned it
 * (single fetch, list, transcript) and under whichever key: `is_owner` says whether that key's user made it,
 * `title` and `created_at` never change once the conversation exists, `updated_at` is never before
 * `created_at`; `shared` of one the run made is false until a toggle it accepted, then the last such toggle's
 * value (a refused toggle changes nothing); one a send made (not a fork) has no parent; `channel` never
 * changes, and is not `INTERACTIVE` on one visible only because a channel owns it.
 * A conversation's reads count until its first delete began (an id may be used again after);
 * a read showing a later `created_at` is of another conversation under the id (a client of the same workspace
 * deleted the run's and sent to it again), so it starts afresh.
 */
import type { ConversationRead, RunState } from "../context.ts";
import { fieldRules } from "../model/fields.ts";
import { expectRule } from "../model/mismatch.ts";
import { sharingRules } from "../model/sharing.ts";
import { visibilityRules } from "../model/visibility.ts";
import { Findings, type LogFacts, logFacts, type SweepFinding, sharedDuring } from "./finding.ts";
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
  { firstDelete, toggles, forkChildren }: LogFacts = logFacts(log),
): SweepFinding[] {
  const keys = distinctKeys(run);
  const first = new Map<string, Read>();
  const remade = new Set<string>();
  const ownership = new Map<string, { owners: Set<string>; channelOwnedBy: string | undefined }>();
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
      ownership.delete(id);
      continue;
    }
    try {
      // Made by the run: private at creation, then whatever the last toggle it accepted set (a refused one
      // changes nothing), on every route and under every key that reads it.
      const expected = made(id) ? sharedDuring(toggles.get(id), read.started, read.ended) : undefined;
      if (expected !== undefined && typeof c.shared === "boolean" && c.shared !== expected.shared) {
        const refused = toggles
          .get(id)
          ?.find(
            (t) =>
              t.ended < read.started &&
              t.status >= 400 &&
              t.shared === c.shared &&
              (expected.after === undefined || t.ended > expected.after.ended),
          );
        expectRule(
          refused ? sharingRules.ownerOnly : fieldRules.shared,
          false,
          expected.after === undefined
            ? "false (no share toggle it accepted was sent for it)"
            : `${expected.shared} (the last toggle it accepted set it so)`,
          refused ? `${c.shared}, as the toggle refused with ${refused.status} asked` : c.shared,
        );
      }
      // Visible, yet neither the caller's nor shared: owned by a chat channel or e-mail (Resources/Conversation,
      // visibility), so never an interactive one. One the run made is left to the visibility rules.
      if (!made(id) && c.is_owner === false && c.shared === false)
        expectRule(
          fieldRules.channel,
          c.channel !== "INTERACTIVE",
          "the channel that owns it (it is neither the caller's nor shared, so a channel owns it)",
          c.channel,
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
      // The owner's key and the second member's are two users; a Viewer key may be either's, so its
      // is_owner says nothing here.
      const user = read.key !== undefined && read.key !== run.inputs.viewerKey && keys?.has(read.key);
      if (user && owner !== undefined && owner !== run.inputs.viewerKey) {
        const owns = read.key === owner;
        expectRule(visibilityRules.isOwner, c.is_owner === owns, String(owns), c.is_owner);
      }
      // Ownership across users: one user at most owns a conversation, and one that another user sees
      // neither as its own nor shared is a channel's (the only other way it is visible), so nobody's.
      if (user && read.key !== undefined && typeof c.is_owner === "boolean") {
        const seen = ownership.get(id) ?? { owners: new Set<string>(), channelOwnedBy: undefined };
        if (c.is_owner) seen.owners.add(read.key);
        else if (c.shared === false && !made(id)) seen.channelOwnedBy ??= read.key;
        ownership.set(id, seen);
        const owners = [...seen.owners];
        const channels = seen.channelOwnedBy !== undefined && owners.some((k) => k !== seen.channelOwnedBy);
        if (owners.length > 1 || channels) {
          ownership.set(id, { owners: new Set(), channelOwnedBy: undefined });
          expectRule(
            visibilityRules.isOwner,
            false,
            "one owner at most, and none for a conversation a channel owns",
            owners.length > 1
              ? "is_owner true for two users' keys"
              : "is_owner true for one user's key, while another user's key read it as neither its own nor shared (a channel's)",
          );
        }
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
      if (typeof was.channel === "string" && typeof c.channel === "string")
        expectRule(
          fieldRules.channel,
          c.channel === was.channel,
          `${was.channel}, as ${before.request} showed it earlier`,
          c.channel,
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
