/** Conversations (table conversations, with the generation its sequence assigns), over the shared row mapping. */
import type pg from "pg";
import {
  type ConversationRow,
  conversationColumns,
  conversationFields,
  patchedFields,
  rowToConversation,
} from "../conversation-row.ts";
import { listConversationsQuery, POSTGRES_DIALECT } from "../list-query.ts";
import { ConversationExistsError, type ConversationsPart } from "../types.ts";
import { bytes, isUniqueViolation, one, query } from "./queries.ts";
import { inTransaction } from "./transaction.ts";

/** Columns stored as UTF-8 bytes (migrations.ts says why). */
const BYTES_COLUMNS = new Set(["title"]);

function toParam(column: string, value: unknown): unknown {
  if (value === undefined) return null;
  if (BYTES_COLUMNS.has(column) && typeof value === "string") return bytes(value);
  return value;
}

const listedColumns = Object.values(conversationColumns).join(", ");

const insertConversationSql = `INSERT INTO conversations (${conversationFields.map((f) => conversationColumns[f]).join(", ")})
  VALUES (${conversationFields.map((_, i) => `$${i + 1}`).join(", ")})`;

export function postgresConversations(pool: pg.Pool): ConversationsPart {
  const transaction = <T>(work: (client: pg.PoolClient) => Promise<T>) => inTransaction(pool, work);
  const toConversation = (row: Record<string, unknown>) =>
    rowToConversation(row as unknown as ConversationRow);
  return {
    async getConversation(id) {
      const row = await one<Record<string, unknown>>(
        pool,
        `SELECT ${listedColumns} FROM conversations WHERE id = $1`,
        [id],
      );
      return row ? toConversation(row) : undefined;
    },

    async insertConversation(record) {
      try {
        const { rows } = await query<{ generation: string }>(
          pool,
          `${insertConversationSql} RETURNING generation`,
          conversationFields.map((f) => toParam(conversationColumns[f], record[f])),
        );
        return Number(rows[0].generation);
      } catch (error) {
        if (isUniqueViolation(error)) throw new ConversationExistsError(record.id);
        throw error;
      }
    },

    async conversationGenerations(ids) {
      if (ids.length === 0) return new Map();
      const { rows } = await query<{ id: string; generation: string }>(
        pool,
        "SELECT id, generation FROM conversations WHERE id = ANY($1::text[])",
        [ids],
      );
      return new Map(rows.map((row) => [row.id, Number(row.generation)]));
    },

    async updateConversation(id, patch) {
      const fields = patchedFields(patch);
      if (fields.length === 0) return;
      const sql = `UPDATE conversations SET ${fields.map((f, i) => `${conversationColumns[f]} = $${i + 1}`).join(", ")} WHERE id = $${fields.length + 1}`;
      await query(pool, sql, [
        ...fields.map((f) => toParam(conversationColumns[f], patch[f as keyof typeof patch])),
        id,
      ]);
    },

    async deleteConversation(id) {
      return transaction(async (db) => {
        // Waits for a commit of this conversation in flight on another connection, then removes it whole.
        const locked = await query(db, "SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE", [id]);
        await query(
          db,
          "DELETE FROM session_messages WHERE session_id IN (SELECT id FROM sessions WHERE conversation_id = $1)",
          [id],
        );
        await query(db, "DELETE FROM sessions WHERE conversation_id = $1", [id]);
        if (locked.rowCount === 0) return false;
        const deleted = await query(db, "DELETE FROM conversations WHERE id = $1", [id]);
        return (deleted.rowCount ?? 0) > 0;
      });
    },

    async listConversations(filter) {
      const { sql, params } = listConversationsQuery(filter, POSTGRES_DIALECT);
      // Named, so each connection parses the query once per shape (there are 64) rather than every time.
      const { rows } = await query(pool, sql, params);
      return rows.map(toConversation);
    },
  };
}
