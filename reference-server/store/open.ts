/**
 * The store a server runs on, named by `--store`: a postgres:// (or postgresql://) URL for PostgreSQL, shared
 * by every instance that names it; nothing (or `sqlite`) for the embedded SQLite file in the data directory.
 */
import { join } from "node:path";
import { openPostgresStore, type PostgresStoreOptions } from "./postgres/index.ts";
import { openSqliteStore, type SqliteStoreOptions } from "./sqlite/index.ts";
import type { ServerStore } from "./types.ts";

export interface OpenedServerStore {
  store: ServerStore;
  /** For the start-up line: the engine and where, without credentials. */
  description: string;
}

export function isPostgresUrl(spec: string): boolean {
  return /^postgres(ql)?:\/\//i.test(spec);
}

export async function openServerStore(
  spec: string | undefined,
  dataDir: string,
  sqliteOptions: SqliteStoreOptions,
  postgresOptions: PostgresStoreOptions = {},
): Promise<OpenedServerStore> {
  if (spec === undefined || spec === "" || spec === "sqlite") {
    const file = join(dataDir, "agent-api.sqlite");
    return { store: openSqliteStore(file, sqliteOptions), description: `SQLite (${file})` };
  }
  if (!isPostgresUrl(spec))
    throw new Error(
      `--store must be a postgres:// URL or "sqlite" (got ${JSON.stringify(spec.slice(0, 40))})`,
    );
  let where = "PostgreSQL";
  try {
    const url = new URL(spec);
    where = `PostgreSQL (${url.host}${url.pathname})`;
  } catch {
    throw new Error("--store is not a valid URL");
  }
  return { store: await openPostgresStore(spec, postgresOptions), description: where };
}
