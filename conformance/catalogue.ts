/**
 * The catalogue: every check of the suite, in the order they start (long set-up chains first so a run
 * finishes sooner). Ids are stable; `agent-api check --list` prints this.
 */
import { authChecks } from "./checks/auth.ts";
import { consistencyChecks } from "./checks/consistency.ts";
import { conversationIdChecks } from "./checks/conversation-ids.ts";
import { endpointChecks } from "./checks/endpoints.ts";
import { eventChecks } from "./checks/events.ts";
import { forkChecks } from "./checks/forks.ts";
import { guidanceChecks } from "./checks/guidance.ts";
import { limitChecks } from "./checks/limits.ts";
import { listChecks } from "./checks/lists.ts";
import { repoChecks } from "./checks/repo.ts";
import { routeChecks } from "./checks/routes.ts";
import { sendChecks } from "./checks/send.ts";
import { stateChecks } from "./checks/states.ts";
import { streamingChecks } from "./checks/streaming.ts";
import type { CheckDef } from "./types.ts";

export const catalogue: CheckDef[] = [
  ...stateChecks,
  // Early: the opt-in idle check is the longest turn of a run.
  ...streamingChecks,
  ...repoChecks,
  ...guidanceChecks,
  ...conversationIdChecks,
  ...eventChecks,
  ...sendChecks,
  ...endpointChecks,
  ...limitChecks,
  ...authChecks,
  ...routeChecks,
  // After the timing-sensitive session checks, so their turns do not compete with these chains.
  ...forkChecks,
  // Each reads one fact through every route that shows it; independent of the chains above.
  ...consistencyChecks,
  // Last: the default-limit check needs more than 50 conversations, which the run has made by then.
  ...listChecks,
];

const seen = new Set<string>();
for (const c of catalogue) {
  if (seen.has(c.id)) throw new Error(`duplicate check id ${c.id}`);
  seen.add(c.id);
}
