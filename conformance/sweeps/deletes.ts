/**
 * Every conversation the run read again after deleting it (Endpoints/Send a message, the id resolution
 * table: an unknown id is created with that id; Endpoints/Delete a conversation: removed): what is read under
 * the id afterwards is a new conversation, whoever made it. It was made after the delete, so its `created_at`
 * is later than the deleted one's `created_at` and no earlier than the last `updated_at` it showed (both the
 * deployment's own clock), and its `turn_count` counts no more turns than were sent into the id since.
 */
import type { ConversationRead } from "../context.ts";
import { deleteRules } from "../model/deletes.ts";
import { expectRule } from "../model/mismatch.ts";
import { Findings, type SweepFinding } from "./finding.ts";

type Read = Extract<ConversationRead, { kind: "read" }>;
type Deleted = Extract<ConversationRead, { kind: "deleted" | "fork-child" }>;

const time = (value: unknown) => (typeof value === "string" ? Date.parse(value) : Number.NaN);

export function judgeDeletesRead(log: ConversationRead[]): SweepFinding[] {
  const found = new Findings();
  const reads = log.filter((e): e is Read => e.kind === "read" && typeof e.conversation.id === "string");
  const deletes = log.filter((e): e is Deleted => e.kind === "deleted").sort((a, b) => a.ended - b.ended);
  for (const [i, d] of deletes.entries()) {
    const next = deletes.slice(i + 1).find((e) => e.id === d.id);
    const of = reads.filter((r) => r.conversation.id === d.id);
    const before = of.filter((r) => r.ended < d.started);
    const after = of.filter((r) => r.started > d.ended && (next === undefined || r.ended < next.started));
    if (before.length === 0 || after.length === 0) continue;
    const oldCreated = Math.max(...before.map((r) => time(r.conversation.created_at)));
    const oldUpdated = Math.max(...before.map((r) => time(r.conversation.updated_at)));
    for (const r of after) {
      const c = r.conversation;
      const created = time(c.created_at);
      const where = `${r.request} by ${r.madeBy}, after conversation ${d.id} was deleted`;
      try {
        if (!Number.isNaN(created) && !Number.isNaN(oldCreated))
          expectRule(
            deleteRules.remadeIsNew,
            created > oldCreated && (Number.isNaN(oldUpdated) || created >= oldUpdated),
            `created_at after the deleted conversation's (created ${new Date(oldCreated).toISOString()}, last active ${Number.isNaN(oldUpdated) ? "unknown" : new Date(oldUpdated).toISOString()})`,
            c.created_at,
          );
        const sent = log.filter(
          (e) => e.kind === "turn-sent" && e.id === d.id && e.started > d.ended && e.started < r.ended,
        ).length;
        // A fork that took the freed id made a child holding the turns it copied: its count is not bounded here.
        const forkedOnto = log.some(
          (e) => e.kind === "fork-child" && e.id === d.id && e.started > d.ended && e.started < r.ended,
        );
        if (typeof c.turn_count === "number" && !forkedOnto)
          expectRule(
            deleteRules.remadeIsNew,
            c.turn_count <= sent,
            `turn_count at most ${sent}, the turns sent into the id since the delete`,
            c.turn_count,
          );
      } catch (error) {
        found.add(error, where, JSON.stringify(c, null, 2));
      }
    }
  }
  return found.list();
}
