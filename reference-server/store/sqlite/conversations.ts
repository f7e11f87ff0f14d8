/** Conversations (table conversations, and the generation counter), over the shared row mapping. */
import {
  type ConversationRow,
  conversationColumns,
  conversationFields,
  patchedFields,
  rowToConversation,
} from "../conversation-row.ts";
import { listConversationsQuery } from "../list-query.ts";
import { ConversationExistsError, type ConversationsPart, type ListFilter } from "../types.ts";
import { isUniqueViolation, type SqliteDatabase, toSqlValue } from "./database.ts";
import type { SqliteSessions } from "./sessions.ts";

export function sqliteConversations(database: SqliteDatabase, sessions: SqliteSessions): ConversationsPart {
  const { statement, transaction } = database;
  const insertConversationSql = `INSERT INTO conversations (${conversationFields.map((f) => conversationColumns[f]).join(", ")}, generation)
    VALUES (${conversationFields.map(() => "?").join(", ")}, ?)`;

  return {
    async getConversation(id) {
      const row = statement("SELECT * FROM conversations WHERE id = ?").get(id) as
        | ConversationRow
        | undefined;
      return row ? rowToConversation(row) : undefined;
    },

    async insertConversation(record) {
      try {
        return transaction(() => {
          const { last } = statement(
            "UPDATE conversation_generations SET last = last + 1 RETURNING last",
          ).get() as { last: number };
          statement(insertConversationSql).run(...conversationFields.map((f) => toSqlValue(record[f])), last);
          return last;
        });
      } catch (error) {
        if (isUniqueViolation(error)) throw new ConversationExistsError(record.id);
        throw error;
      }
    },

    async conversationGenerations(ids) {
      const generations = new Map<string, number>();
      for (const id of ids) {
        const row = statement("SELECT generation FROM conversations WHERE id = ?").get(id) as
          | { generation: number }
          | undefined;
        if (row) generations.set(id, row.generation);
      }
      return generations;
    },

    async updateConversation(id, patch) {
      const fields = patchedFields(patch);
      if (fields.length === 0) return;
      const sql = `UPDATE conversations SET ${fields.map((f) => `${conversationColumns[f]} = ?`).join(", ")} WHERE id = ?`;
      statement(sql).run(...fields.map((f) => toSqlValue(patch[f as keyof typeof patch])), id);
    },

    async deleteConversation(id) {
      return transaction(() => {
        // Messages, events and compactions go by ON DELETE CASCADE; sessions carry no foreign key.
        sessions.deleteSessionsOf(id);
        return statement("DELETE FROM conversations WHERE id = ?").run(id).changes > 0;
      });
    },

    async listConversations(filter: ListFilter) {
      const { sql, params } = listConversationsQuery(filter);
      return (statement(sql).all(...params) as unknown as ConversationRow[]).map(rowToConversation);
    },
  };
}
