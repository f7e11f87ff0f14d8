/**
 * The system prompt of a turn: the agent's instructions, then where the model is (working directory,
 * attachments, outputs, repository and whether the turn may change it, tools), then the caller's `system`
 * text, appended (the API: it never replaces the instructions). The first two are the same on every turn
 * of a conversation, so they end with a prompt-cache breakpoint.
 */
import type Anthropic from "@anthropic-ai/sdk";
import { ENVIRONMENT_HEADING } from "../scripted-model/prompt-parts.ts";
import type { TurnInput } from "./types.ts";

type TextBlockParam = Anthropic.Messages.TextBlockParam;

export function environmentText(input: Pick<TurnInput, "environment" | "tools">): string {
  const { agentKind, isolated, readOnly } = input.environment;
  const lines = [ENVIRONMENT_HEADING];
  if (isolated) {
    lines.push(
      "You work in a throwaway directory: it starts empty (no repository, no workspace files) and is discarded after this turn.",
    );
  } else if (agentKind === "repo") {
    lines.push(
      "Your working directory is a clone of your agent's git repository; it persists between the turns of this conversation.",
      readOnly
        ? "This turn is read-only: nothing you change is committed or pushed."
        : "When this turn ends, every change you made is committed and pushed to the repository's default branch.",
    );
  } else {
    lines.push(
      "Your working directory holds your agent's files, restored fresh each turn; changes to them are not kept.",
      "Files you write to outputs/ are published to the workspace when the turn ends.",
    );
  }
  lines.push(
    "Files the user attaches arrive in .uploads/ (never committed); the user message names them.",
    input.tools
      ? "Tools: write_file, read_file, list_files and run_command (sh -c, no network), all relative to your working directory."
      : "Tools are unavailable in this turn.",
  );
  return lines.join("\n");
}

export function systemPrompt(input: TurnInput): TextBlockParam[] {
  const blocks: TextBlockParam[] = [];
  if (input.instructions.trim().length > 0) blocks.push({ type: "text", text: input.instructions });
  blocks.push({ type: "text", text: environmentText(input), cache_control: { type: "ephemeral" } });
  if (input.system !== undefined && input.system.trim().length > 0)
    blocks.push({ type: "text", text: input.system });
  return blocks;
}
