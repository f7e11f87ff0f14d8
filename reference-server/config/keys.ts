/**
 * API keys exist only as SHA-256 hashes. A presented key is hashed, then compared with stored hashes
 * by crypto.timingSafeEqual.
 *
 * Why this is constant-time with respect to the key's content: the only work that touches the
 * plaintext is SHA-256, whose running time depends on the input's length, not its bytes. Everything
 * after that works on the digest. The Map lookup by digest can take a data-dependent path, but an
 * attacker who varies the key cannot steer the digest (that would need SHA-256 preimages), so timing
 * reveals nothing about how close a guess is to a real key. The final timingSafeEqual confirms the
 * match over all 32 bytes without an early exit.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { ApiKeyConfig, ServerConfig } from "./types.ts";

/** Hex SHA-256 of a key, the form in which keys are stored and configured (`key_sha256`). */
export function hashKey(plain: string): string {
  return createHash("sha256").update(plain, "utf8").digest("hex");
}

function digestEquals(a: Buffer, bHex: string): boolean {
  const b = Buffer.from(bHex, "hex");
  return b.length === a.length && timingSafeEqual(a, b);
}

/** A SHA-256 that no key hashes to (finding one would be a preimage of zero). */
const UNKNOWN_FLOW_HASH = "0".repeat(64);

export interface KeyIndex {
  /** The key's config (revoked keys included: the caller answers 401 "API key has been revoked"), or undefined. */
  lookup(plain: string): ApiKeyConfig | undefined;
  /**
   * Whether `plain` is one of the deployed flow's keys (false for an unknown flow), or, with `flowId`
   * undefined, a key of any deployed flow.
   */
  lookupFlowKey(flowId: string | undefined, plain: string): boolean;
}

export function createKeyIndex(config: Pick<ServerConfig, "keys" | "flows">): KeyIndex {
  const byHash = new Map<string, ApiKeyConfig>();
  for (const key of config.keys) byHash.set(key.hash.toLowerCase(), key);
  const flowHashes = new Map<string, string[]>();
  for (const flow of config.flows)
    flowHashes.set(
      flow.id,
      flow.keyHashes.map((h) => h.toLowerCase()),
    );
  const anyFlowHashes = [...flowHashes.values()].flat();

  return {
    lookup(plain) {
      const digest = createHash("sha256").update(plain, "utf8").digest();
      const candidate = byHash.get(digest.toString("hex"));
      return candidate && digestEquals(digest, candidate.hash) ? candidate : undefined;
    },
    lookupFlowKey(flowId, plain) {
      const digest = createHash("sha256").update(plain, "utf8").digest();
      let matched = false;
      // No early exit: every stored hash of the flow is compared. An unknown flow compares against a hash
      // no key has, so its answer takes as long as a known flow's with one key (no flow-id oracle by time).
      const hashes = flowId === undefined ? anyFlowHashes : flowHashes.get(flowId);
      for (const hash of hashes ?? [UNKNOWN_FLOW_HASH]) {
        if (digestEquals(digest, hash)) matched = true;
      }
      return matched;
    },
  };
}
