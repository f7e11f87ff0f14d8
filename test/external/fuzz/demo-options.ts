import type { FuzzOptions } from "./types.ts";

/** Options for the reference server's demo, from the AGENT_API_* variables it hands out. */
export function demoFuzzOptions(
  env: Record<string, string>,
  baseUrl: string,
  numRuns: number,
  seed: number,
): FuzzOptions {
  return {
    baseUrl,
    flowUrl: baseUrl,
    keys: {
      admin: env.AGENT_API_KEY,
      member: env.AGENT_API_MEMBER_KEY,
      viewer: env.AGENT_API_VIEWER_KEY,
      revoked: env.AGENT_API_REVOKED_KEY,
      foreign: "other-admin-key",
      flow: env.AGENT_API_FLOW_KEY,
    },
    agents: {
      main: env.AGENT_API_AGENT,
      storage: env.AGENT_API_STORAGE_AGENT,
      repo: env.AGENT_API_REPO_AGENT,
      foreign: env.AGENT_API_FOREIGN_AGENT,
    },
    flowId: env.AGENT_API_FLOW_ID,
    flowInput: env.AGENT_API_FLOW_INPUT?.split("=")[0],
    routingPrefix: env.AGENT_API_ROUTING_PREFIX,
    numRuns,
    seed,
  };
}
