/**
 * What the store holds for a workspace, in bytes: the part of its disk share (service/disk-shares.ts) that
 * lives in the database. Transcripts (messages, events), session histories, compactions and pending turns of
 * the workspace's conversations; a fork's child counts in full, since the rows are copied. Sizes are what the
 * engine stores (SQLite: the bytes of each value; PostgreSQL: pg_column_size, the stored and perhaps
 * compressed size), so the sum follows the disk rather than the characters.
 */
export interface StoredBytes {
  /** The workspace's bytes and the ids of its conversations (whose local files the sandbox then measures). */
  ofWorkspace(workspaceId: string): Promise<{ bytes: number; conversationIds: string[] }>;
  /** One conversation's bytes: what a fork of it copies. */
  ofConversation(conversationId: string): Promise<number>;
}
