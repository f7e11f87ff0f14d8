/** `X-Api-Key` → the calling member of one workspace, or 401 (with the API's exact body for a revoked key). */
import type { KeyIndex } from "../config/keys.ts";
import type { ServerConfig } from "../config/types.ts";
import { revokedKey, unauthorized } from "../errors/catalogue.ts";
import type { Caller } from "../service/types.ts";

export interface AuthenticatedCaller extends Caller {
  /** Non-secret label of the key, for logs. */
  keyLabel: string;
}

export function headerValue(value: string | string[] | undefined): string | undefined {
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined || first === "" ? undefined : first;
}

/**
 * The presented key: `X-Api-Key` as the API says, else an `Authorization: Bearer` token. The official
 * messages client (@anthropic-ai/sdk 1.x) sends its `apiKey` as a bearer token, and it must work unchanged.
 */
export function presentedKey(headers: Record<string, string | string[] | undefined>): string | undefined {
  const apiKey = headerValue(headers["x-api-key"]);
  if (apiKey !== undefined) return apiKey;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(headerValue(headers.authorization) ?? "");
  return bearer?.[1];
}

export function authenticate(
  config: ServerConfig,
  keys: KeyIndex,
  presented: string | undefined,
): AuthenticatedCaller {
  if (presented === undefined) throw unauthorized();
  const key = keys.lookup(presented);
  if (!key) throw unauthorized();
  if (key.revoked) throw revokedKey();
  const member = config.workspaces
    .find((w) => w.id === key.workspaceId)
    ?.members.find((m) => m.id === key.memberId);
  return {
    workspaceId: key.workspaceId,
    memberId: key.memberId,
    memberName: member?.name ?? key.memberId,
    role: key.role,
    keyLabel: key.label,
    admissionKey: `key:${key.hash}`,
  };
}
