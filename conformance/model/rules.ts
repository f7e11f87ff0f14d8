/**
 * A rule of the executable model: one statement of the API, its section, and the named check of the catalogue
 * that owns it (a mismatch the explorer finds fails that check). COVERAGE.md lists every rule with its owner.
 */
import type { Level } from "../types.ts";

export interface ModelRule {
  /** Stable id, `<resource>.<what>`. */
  id: string;
  /** API section, as the checks name it. */
  section: string;
  /** The catalogue check a deployment breaking this rule fails. */
  check: string;
  level: Level;
  /** The rule in the API's words, short. */
  text: string;
}

type RuleSpec = Omit<ModelRule, "id" | "level"> & { level?: Level };

/** Rules of one resource, keyed by a short name; each id is `<resource>.<name>`. */
export function defineRules<const K extends string>(
  resource: string,
  specs: Record<K, RuleSpec>,
): Record<K, ModelRule> {
  const out = {} as Record<K, ModelRule>;
  for (const [name, spec] of Object.entries(specs) as Array<[K, RuleSpec]>) {
    out[name] = { id: `${resource}.${name}`, level: spec.level ?? "MUST", ...spec } as ModelRule;
  }
  return out;
}
