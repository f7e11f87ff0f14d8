/**
 * Which host user a sandboxed command runs as. Never the server's own user when the server can avoid it:
 * a command that escapes bubblewrap then holds no privilege, and owns nothing of the server's.
 *
 * - `auto` (default): a server running as root gives each conversation its own uid and gid,
 *   `SANDBOX_UID_BASE + hash(conversation) mod SANDBOX_UID_SPAN`, so one conversation's escaped process
 *   cannot read another's files either; a server running as another user cannot switch users, and says so.
 * - `UID[:GID]`: every conversation runs as that one user (a dedicated account the operator made).
 * - `server`: the server's own user (refused for root unless chosen explicitly; a warning is printed).
 */
import { createHash } from "node:crypto";

/** Far above any uid adduser, systemd or subordinate-id ranges (/etc/subuid) hand out. */
export const SANDBOX_UID_BASE = 2_000_000_000;
/**
 * As wide as stays below 2^31 (some tools read uids as signed): two conversations share a uid with even odds
 * only among ~13,000 conversations, and sharing matters only after an escape from bubblewrap.
 */
export const SANDBOX_UID_SPAN = 1 << 27;

export type SandboxUserSetting = "auto" | "server" | { uid: number; gid: number };

export interface HostUser {
  uid: number;
  gid: number;
}

export interface SandboxIdentity {
  readonly mode: "per-conversation" | "fixed" | "server";
  /** One line for the server's start-up output when tools run as the server's own user; else null. */
  readonly warning: string | null;
  /** The user a conversation's commands run as; null means the server's own user (no switch). */
  userFor(conversationKey: string): HostUser | null;
}

/** Parses the `--sandbox-user` flag: `auto`, `server`, `UID` or `UID:GID`. */
export function parseSandboxUser(text: string): SandboxUserSetting {
  if (text === "auto" || text === "server") return text;
  const match = /^(\d{1,10})(?::(\d{1,10}))?$/.exec(text);
  if (!match) throw new Error(`--sandbox-user must be auto, server, UID or UID:GID (got "${text}")`);
  const uid = Number(match[1]);
  const gid = match[2] === undefined ? uid : Number(match[2]);
  if (uid === 0 || gid === 0) throw new Error("--sandbox-user must not be root (uid or gid 0)");
  if (uid >= 2 ** 32 - 1 || gid >= 2 ** 32 - 1) throw new Error("--sandbox-user is out of range");
  return { uid, gid };
}

export function resolveSandboxIdentity(setting: SandboxUserSetting, canSwitch: boolean): SandboxIdentity {
  const serverUid = process.getuid?.() ?? -1;
  const asServer = (warning: string | null): SandboxIdentity => ({
    mode: "server",
    warning,
    userFor: () => null,
  });
  if (setting === "server")
    return asServer(
      serverUid === 0
        ? "--sandbox-user server: tools run as root on the host (without capabilities); an escape would be root"
        : null,
    );
  if (!canSwitch) {
    if (typeof setting === "object")
      throw new Error(
        "--sandbox-user UID needs a server running as root (to switch users) and setpriv (util-linux)",
      );
    return asServer(
      serverUid === 0
        ? "tools run as root on the host: setpriv (util-linux) is missing, so the server cannot switch users"
        : `tools run as the server's own user (uid ${serverUid}); start the server as root to give each conversation its own unprivileged uid`,
    );
  }
  if (typeof setting === "object") return { mode: "fixed", warning: null, userFor: () => setting };
  return {
    mode: "per-conversation",
    warning: null,
    userFor(conversationKey) {
      const hash = createHash("sha256").update(conversationKey).digest();
      const id = SANDBOX_UID_BASE + (hash.readUInt32BE(0) % SANDBOX_UID_SPAN);
      return { uid: id, gid: id };
    },
  };
}
