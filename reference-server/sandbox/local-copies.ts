/**
 * Whose each local copy is. An instance keeps, per conversation it served, a working directory, a git directory
 * and an outputs folder, all named by the conversation id; ids are one namespace for every workspace, and an
 * id deleted on another instance (or while this one was down) may be taken again by anyone. So each copy
 * carries a record of the conversation it was made for: its workspace, agent, id and the generation the
 * database gave it at creation. A copy is used only for the conversation its record names; anything else
 * finds it wiped first.
 */
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { conversationDirName } from "./safe-paths.ts";

/** The conversation a local copy belongs to (the database's generation tells a re-created id apart). */
export interface CopyOwner {
  conversationId: string;
  workspaceId: string;
  agent: string;
  generation: number;
}

export function sameOwner(a: CopyOwner, b: CopyOwner): boolean {
  return (
    a.conversationId === b.conversationId &&
    a.workspaceId === b.workspaceId &&
    a.agent === b.agent &&
    a.generation === b.generation
  );
}

function isOwner(value: unknown): value is CopyOwner {
  const owner = value as CopyOwner;
  return (
    typeof owner === "object" &&
    owner !== null &&
    typeof owner.conversationId === "string" &&
    typeof owner.workspaceId === "string" &&
    typeof owner.agent === "string" &&
    Number.isSafeInteger(owner.generation)
  );
}

/** The owner records of this instance's local copies, one small JSON file each under `dir`. */
export class LocalCopyOwners {
  readonly #dir: string;

  private constructor(dir: string) {
    this.#dir = dir;
  }

  static async open(dir: string): Promise<LocalCopyOwners> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return new LocalCopyOwners(dir);
  }

  #file(conversationId: string): string {
    return path.join(this.#dir, `${conversationDirName(conversationId)}.json`);
  }

  /** The record of the id's local copy; null when there is none (or it is unreadable: then no one owns it). */
  async read(conversationId: string): Promise<CopyOwner | null> {
    const owner = await this.#readFile(this.#file(conversationId));
    return owner?.conversationId === conversationId ? owner : null;
  }

  async #readFile(file: string): Promise<CopyOwner | null> {
    try {
      const parsed: unknown = JSON.parse(await readFile(file, "utf8"));
      return isOwner(parsed) ? parsed : null;
    } catch {
      return null;
    }
  }

  async write(owner: CopyOwner): Promise<void> {
    const file = this.#file(owner.conversationId);
    const scratch = `${file}.${process.pid}.tmp`;
    await writeFile(scratch, JSON.stringify(owner), { mode: 0o600 });
    await rename(scratch, file);
  }

  async remove(conversationId: string): Promise<void> {
    await rm(this.#file(conversationId), { force: true });
  }

  /** Every recorded copy (what reconciling with the database walks). */
  async list(): Promise<CopyOwner[]> {
    const names = await readdir(this.#dir).catch(() => [] as string[]);
    const owners: CopyOwner[] = [];
    for (const name of names) {
      if (!name.endsWith(".json")) continue;
      const owner = await this.#readFile(path.join(this.#dir, name));
      if (owner !== null) owners.push(owner);
    }
    return owners;
  }

  /** Whether a directory name (a conversation's hashed id) has a record. */
  async has(dirName: string): Promise<boolean> {
    return (await this.#readFile(path.join(this.#dir, `${dirName}.json`))) !== null;
  }
}
