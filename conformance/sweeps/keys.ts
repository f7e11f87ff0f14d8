import type { RunState } from "../context.ts";

/** The keys of the run's users (owner, member, Viewer), when they are all different keys. */
export function distinctKeys(run: RunState): Set<string> | undefined {
  const keys = [run.inputs.key, run.inputs.memberKey, run.inputs.viewerKey].filter(
    (k): k is string => typeof k === "string" && k !== "",
  );
  const set = new Set(keys);
  return set.size === keys.length ? set : undefined;
}
