/** Interrupts between instances over LISTEN/NOTIFY, on a connection of their own that is made again when cut. */
import pg from "pg";
import type { TurnInterrupts } from "../types.ts";
import { query } from "./queries.ts";

/** The LISTEN/NOTIFY channel of TurnInterrupts. */
const INTERRUPT_CHANNEL = "agent_api_turn_interrupts";

/**
 * `instanceId` tells this store's own interrupts apart from other instances' on the shared channel;
 * `applicationName` names the listener's connection in pg_stat_activity.
 */
export function postgresTurnInterrupts(
  pool: pg.Pool,
  url: string,
  instanceId: string,
  applicationName: string,
): TurnInterrupts {
  return {
    async publish(conversationId, reason) {
      await query(pool, "SELECT pg_notify($1, $2)", [
        INTERRUPT_CHANNEL,
        JSON.stringify({ conversationId, reason, from: instanceId }),
      ]);
    },
    async subscribe(handler, onReconnect) {
      let closed = false;
      let listener: pg.Client | undefined;
      let retry: NodeJS.Timeout | undefined;
      let failures = 0;
      const hear = (message: pg.Notification) => {
        if (message.channel !== INTERRUPT_CHANNEL || !message.payload) return;
        try {
          const { conversationId, reason, from } = JSON.parse(message.payload) as {
            conversationId: string;
            reason: string;
            from?: string;
          };
          // PostgreSQL delivers a notification to every listener, the publisher's own included: this
          // instance already ended its turn and removed its files before it published.
          if (from !== instanceId) handler(conversationId, reason);
        } catch {
          // Not ours.
        }
      };
      // LISTEN holds its connection: one of its own, outside the pool. When it is cut, it is made again
      // (sooner at first, at most every 5 s), and the caller told, since notifications sent meanwhile are lost.
      const connect = async (): Promise<void> => {
        const client = new pg.Client({
          connectionString: url,
          application_name: `${applicationName} listener`,
        });
        let lost = false;
        const onLost = () => {
          if (lost) return;
          lost = true;
          void client.end().catch(() => undefined);
          if (!closed && listener === client) scheduleReconnect();
        };
        client.on("error", onLost);
        client.on("end", onLost);
        client.on("notification", hear);
        try {
          await client.connect();
          await client.query(`LISTEN ${INTERRUPT_CHANNEL}`);
        } catch (error) {
          lost = true;
          await client.end().catch(() => undefined);
          throw error;
        }
        listener = client;
      };
      const scheduleReconnect = () => {
        if (closed || retry !== undefined) return;
        const delay = Math.min(5_000, 50 * 2 ** Math.min(failures, 7));
        retry = setTimeout(async () => {
          retry = undefined;
          if (closed) return;
          try {
            await connect();
            failures = 0;
            if (closed) await listener?.end().catch(() => undefined);
            else onReconnect?.();
          } catch {
            failures++;
            scheduleReconnect();
          }
        }, delay);
        retry.unref();
      };
      await connect();
      return async () => {
        closed = true;
        clearTimeout(retry);
        await listener?.end().catch(() => undefined);
      };
    },
  };
}
