/**
 * The sandbox's directories under rootDir (see index.ts for the layout), made at start with the modes the
 * sandbox users need, and the path of each conversation's working directory, git directory and outputs.
 */
import { chmod, mkdir, realpath } from "node:fs/promises";
import path from "node:path";
import { conversationDirName, safeSegment } from "./safe-paths.ts";
import { removeTree } from "./tree-ops.ts";

/** Directories the sandbox users must traverse (never list) to reach their working directory. */
const TRAVERSABLE = 0o711;

export interface SandboxLayout {
  root: string;
  dirs: { conversations: string; repos: string; store: string; tmp: string };
  /** Why the throwaway directories of a previous run could not be removed, or null. */
  leftovers: string | null;
  conversationDir(id: string): string;
  gitDirOf(id: string): string;
  storeDir(workspaceId: string, agent: string, conversationId: string): string;
}

export async function prepareLayout(rootDir: string): Promise<SandboxLayout> {
  await mkdir(rootDir, { recursive: true, mode: 0o700 });
  const root = await realpath(rootDir);
  const dirs = {
    conversations: path.join(root, "conversations"),
    repos: path.join(root, "repos"),
    store: path.join(root, "workspace-store"),
    tmp: path.join(root, "tmp"),
  };
  // Throwaway directories of a previous run are garbage now; one that cannot go must not stop the server.
  const leftovers = await removeTree(dirs.tmp).then(
    () => null,
    (error: Error) => `could not empty ${dirs.tmp} at start: ${error.message}`,
  );
  for (const dir of Object.values(dirs)) await mkdir(dir, { recursive: true, mode: 0o700 });
  // Sandbox users reach their own directory by its full path (bubblewrap binds it as them); they may pass
  // through these, never list them. The clones and the store stay private to the server.
  for (const dir of [root, dirs.conversations, dirs.tmp]) await chmod(dir, TRAVERSABLE);
  return {
    root,
    dirs,
    leftovers,
    conversationDir: (id) => path.join(dirs.conversations, conversationDirName(id)),
    gitDirOf: (id) => path.join(dirs.repos, `${conversationDirName(id)}.git`),
    // Each conversation publishes into its own folder: no conversation can overwrite another's outputs.
    storeDir: (workspaceId, agent, conversationId) =>
      path.join(
        dirs.store,
        safeSegment(workspaceId),
        safeSegment(agent),
        conversationDirName(conversationId),
      ),
  };
}
