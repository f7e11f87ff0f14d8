/**
 * The conversations' turn leases (table turn_leases, tokens from the sequence turn_lease_tokens): renewals
 * go through a pool of their own, so no load of reads on the main pool holds a renewal past its lease.
 */
import type pg from "pg";
import type { TurnLeases } from "../types.ts";
import { one, query } from "./queries.ts";

export function postgresTurnLeases(pool: pg.Pool, renewals: pg.Pool): TurnLeases {
  /** Tokens granted by taking over an expired lease, until the holder asks (TurnLeases.tookOver). */
  const takenOver = new Set<number>();
  return {
    async tryAcquire(conversationId, holder, leaseMs) {
      // The database's clock decides expiry, so the instances' clocks need not agree. `xmax <> 0`: the row
      // was updated, not inserted, so this grant took over an expired lease its holder never released.
      const row = await one<{ token: string; took_over: boolean }>(
        pool,
        `INSERT INTO turn_leases (conversation_id, token, holder, expires_at)
         VALUES ($1, nextval('turn_lease_tokens'), $2, clock_timestamp() + $3 * interval '1 millisecond')
         ON CONFLICT (conversation_id) DO UPDATE
           SET token = EXCLUDED.token, holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
           WHERE turn_leases.expires_at < clock_timestamp()
         RETURNING token, (xmax <> 0) AS took_over`,
        [conversationId, holder, Math.max(1, Math.trunc(leaseMs))],
      );
      if (row === undefined) return undefined;
      if (row.took_over) takenOver.add(Number(row.token));
      return Number(row.token);
    },
    tookOver(token) {
      return takenOver.delete(token);
    },
    async renew(conversationId, token, leaseMs) {
      const renewed = await query(
        renewals,
        `UPDATE turn_leases SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
         WHERE conversation_id = $1 AND token = $2`,
        [conversationId, token, Math.max(1, Math.trunc(leaseMs))],
      );
      return (renewed.rowCount ?? 0) > 0;
    },
    async release(conversationId, token) {
      await query(pool, "DELETE FROM turn_leases WHERE conversation_id = $1 AND token = $2", [
        conversationId,
        token,
      ]);
    },
  };
}
