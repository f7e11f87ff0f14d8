/**
 * Conversations and who may read, write, share, fork and delete them (Resources/Conversation; States and
 * transitions; Authentication 3 and 5): the owner does everything; a member of the workspace reads and forks
 * a shared one; nobody else learns that a private one exists.
 */
import { defineRules } from "./rules.ts";
import { type Actor, type ConversationModel, WORKSPACE_ACTORS } from "./state.ts";

export type Visibility = "owner" | "reader" | "none";

export const visibilityRules = defineRules("visibility", {
  privateIs404: {
    section: "Errors",
    check: "ERR-404-PRIVATE-ROUTES",
    text: "Another user's unshared conversation gives 404 on every conversation route (existence never leaked)",
  },
  missingIs404: {
    section: "Errors",
    check: "ERR-404-PRIVATE-ROUTES",
    text: "A conversation that does not exist (or was deleted) gives 404, like a private one",
  },
  otherAgentIs404: {
    section: "Errors",
    check: "ERR-404-OTHER-AGENT-ROUTES",
    text: "A conversation of a different agent gives 404 on this agent's conversation routes",
  },
  sharedReadable: {
    section: "States and transitions",
    check: "CONSIST-SHARED-MEMBER-VIEW",
    text: "A conversation shared with the workspace is readable by its members",
  },
  ownerReads: {
    section: "Resources/Conversation",
    check: "GET-SHAPE",
    text: "The owner reads their conversation on every conversation route",
  },
  isOwner: {
    section: "Resources/Conversation",
    check: "STATE-CREATED-PRIVATE",
    text: "is_owner says whether the caller owns the conversation",
  },
  channelReadable: {
    section: "Resources/Conversation",
    check: "LIST-CHANNEL-OWNED-VISIBLE",
    text: "A conversation owned by a chat channel is visible to every reader key of the workspace: read and forked on its agent's routes (another agent's routes give 404), never owned by the caller",
  },
  viewerReads: {
    section: "Authentication",
    check: "AUTH-VIEWER-READS",
    text: "A Viewer key can read conversations",
  },
});

export function visibility(actor: Actor, c: ConversationModel): Visibility {
  if (!WORKSPACE_ACTORS.has(actor)) return "none";
  if (c.owner === actor) return "owner";
  return c.shared ? "reader" : "none";
}
