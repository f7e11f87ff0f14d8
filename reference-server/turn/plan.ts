/**
 * A turn's plan: everything decided before its stream opens (agent, conversation, prompt, model, the lock it
 * holds), which the service builds in its prepare step and the run carries out.
 */
import type { components } from "@agent-api/client/api-types";
import type { AgentConfig, AutomationConfig } from "../config/types.ts";
import type { Release } from "../coordination/leased-locks.ts";
import type { ConversationRecord } from "../store/types.ts";

type SendMessageRequest = components["schemas"]["SendMessageRequest"];

/** Who sent the turn's message: its author in the transcript. */
export interface TurnAuthor {
  memberId: string;
  memberName: string;
}

export interface TurnPlan {
  agent: AgentConfig;
  record: ConversationRecord;
  prompt: string;
  model: string;
  system: string | undefined;
  metadata: NonNullable<SendMessageRequest["metadata"]>;
  release: Release;
  caller: TurnAuthor;
}

/** The turn's prompt: the user's text, or the automation's stored prompt when the text is empty. */
export function withAutomationPrompt(userText: string, automation: AutomationConfig | undefined): string {
  return userText.trim() === "" && automation ? automation.prompt : userText;
}

export function findAutomation(agent: AgentConfig, name: string | undefined): AutomationConfig | undefined {
  if (name === undefined) return undefined;
  // An unknown (or inactive) automation name is ignored, as the API says: no error.
  return agent.automations.find((a) => a.name === name && a.active);
}
