/** The one SQLite connection the store's tables share: its compiled statements and its transactions. */
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";

export interface SqliteDatabase {
  readonly db: DatabaseSync;
  /** The statement of this SQL text, compiled once. */
  statement(sql: string): StatementSync;
  /** Runs `work` in one IMMEDIATE transaction (rolled back when it throws). */
  transaction<T>(work: () => T): T;
  /** Forgets the compiled statements (the store closes). */
  forgetStatements(): void;
}

export function sqliteDatabase(db: DatabaseSync): SqliteDatabase {
  // Statements are compiled once per distinct SQL text (the list and update statements vary by which
  // filters/fields are present, so they are keyed by their text too).
  const statements = new Map<string, StatementSync>();
  function statement(sql: string): StatementSync {
    let prepared = statements.get(sql);
    if (!prepared) {
      prepared = db.prepare(sql);
      statements.set(sql, prepared);
    }
    return prepared;
  }

  function transaction<T>(work: () => T): T {
    db.exec("BEGIN IMMEDIATE");
    try {
      const result = work();
      db.exec("COMMIT");
      return result;
    } catch (error) {
      if (db.isTransaction) db.exec("ROLLBACK");
      throw error;
    }
  }

  return { db, statement, transaction, forgetStatements: () => statements.clear() };
}

export function toSqlValue(value: unknown): SQLInputValue {
  if (value === undefined) return null;
  if (typeof value === "boolean") return value ? 1 : 0;
  return value as SQLInputValue;
}

export function isUniqueViolation(error: unknown): boolean {
  const errcode = (error as { errcode?: unknown }).errcode;
  // 1555 = SQLITE_CONSTRAINT_PRIMARYKEY, 2067 = SQLITE_CONSTRAINT_UNIQUE.
  return errcode === 1555 || errcode === 2067;
}
