/**
 * The `anthropic` engine: a real model behind any Messages-API upstream, non-streaming, with a tool loop
 * whose tools run in the turn's sandbox. Text, thinking and tool blocks become AgentEvents; the session
 * context becomes the prior messages. Compaction asks the model for a summary.
 */
import Anthropic from "@anthropic-ai/sdk";
import { promptWithAttachments, toMessages, transcriptText } from "./anthropic-messages.ts";
import { isToolName, TOOL_DEFINITIONS } from "./anthropic-tools.ts";
import { needsCompaction } from "./compaction.ts";
import { rememberedCodeWords } from "./memory.ts";
import type { AgentEngine, AgentEvent, SessionEntry, TurnInput, TurnOutcome } from "./types.ts";

type MessageParam = Anthropic.Messages.MessageParam;
type ContentBlock = Anthropic.Messages.ContentBlock;
type ToolResultBlockParam = Anthropic.Messages.ToolResultBlockParam;

export interface AnthropicEngineOptions {
  baseURL?: string;
  apiKey: string;
  /** Upstream model for every turn; when absent the turn's resolved model id is sent as is. */
  model?: string;
  maxTokens?: number;
  /** Model calls per turn; a turn still asking for tools after this many stops there. */
  maxToolIterations?: number;
  /** Retries of a failed upstream call (the SDK's backoff). */
  maxRetries?: number;
  /** Enables extended thinking with this budget; off when absent. */
  thinkingBudgetTokens?: number;
}

const DEFAULTS = { maxTokens: 4096, maxToolIterations: 8, maxRetries: 2 };

const COMPACTION_INSTRUCTIONS =
  "You compact conversations. Summarize the conversation you are given for your own future reference, " +
  "keeping every fact, file name, decision and code word the user asked you to remember. Reply with the summary only.";

export function createAnthropicEngine(options: AnthropicEngineOptions): AgentEngine {
  const client = new Anthropic({
    apiKey: options.apiKey,
    baseURL: options.baseURL,
    maxRetries: options.maxRetries ?? DEFAULTS.maxRetries,
    // SDK 1.12 sends the key only as `Authorization: Bearer`; Messages-API upstreams (this project's own
    // server included) read `x-api-key`, so both are sent.
    defaultHeaders: { "x-api-key": options.apiKey },
  });
  const settings = { ...DEFAULTS, ...options };
  return {
    name: "anthropic",
    runTurn: (input) => runModelTurn(client, settings, input),
  };
}

type Settings = AnthropicEngineOptions & typeof DEFAULTS;

async function* runModelTurn(
  client: Anthropic,
  settings: Settings,
  input: TurnInput,
): AsyncGenerator<AgentEvent, TurnOutcome, void> {
  const unchanged: TurnOutcome = { context: input.context };
  const model = settings.model ?? input.model;
  try {
    let context = input.context;
    if (needsCompaction(context, input.prompt, input.compactionBudgetChars)) {
      const summary = await summarize(client, settings, model, context, input.signal);
      yield { kind: "compaction", summary };
      context = [{ role: "user", text: summary, compactSummary: true }];
    }

    const system = [input.instructions, input.system ?? ""].filter((s) => s.trim().length > 0);
    if (input.tools === null) system.push("Tools are unavailable in this turn.");
    const messages: MessageParam[] = toMessages(
      context,
      promptWithAttachments(input.prompt, input.attachments),
    );
    const replyTexts: string[] = [];

    for (let iteration = 0; iteration < settings.maxToolIterations; iteration++) {
      const response = await client.messages.create(
        {
          model,
          max_tokens: settings.maxTokens,
          ...(system.length > 0 ? { system: system.join("\n\n") } : {}),
          messages,
          ...(input.tools ? { tools: TOOL_DEFINITIONS } : {}),
          ...(settings.thinkingBudgetTokens
            ? { thinking: { type: "enabled" as const, budget_tokens: settings.thinkingBudgetTokens } }
            : {}),
        },
        { signal: input.signal },
      );
      const toolResults: ToolResultBlockParam[] = [];
      for (const block of response.content) {
        if (input.signal.aborted) return unchanged;
        if (block.type === "text" && block.text.length > 0) {
          replyTexts.push(block.text);
          yield { kind: "text", text: block.text };
        } else if (block.type === "thinking") {
          yield { kind: "thinking", thinking: block.thinking, signature: block.signature };
        } else if (block.type === "tool_use") {
          const result = yield* runTool(block, input);
          if (result === null) return unchanged;
          toolResults.push(result);
        }
      }
      if (response.stop_reason !== "tool_use" || toolResults.length === 0) break;
      messages.push({ role: "assistant", content: response.content });
      messages.push({ role: "user", content: toolResults });
    }

    const userEntry: SessionEntry = { role: "user", text: input.prompt };
    const reply = replyTexts.join("\n\n");
    return {
      context: reply ? [...context, userEntry, { role: "assistant", text: reply }] : [...context, userEntry],
    };
  } catch (error) {
    // An abort surfaces from the SDK as APIUserAbortError; the caller asked for it, so it is not a failure.
    if (input.signal.aborted) return unchanged;
    throw error;
  }
}

/** Runs one requested tool; unknown tools get an error result for the model and no event. */
async function* runTool(
  block: Extract<ContentBlock, { type: "tool_use" }>,
  input: TurnInput,
): AsyncGenerator<AgentEvent, ToolResultBlockParam | null, void> {
  const toolInput = isPlainObject(block.input) ? block.input : {};
  if (!isToolName(block.name) || input.tools === null) {
    const reason = input.tools === null ? "tools are unavailable in this turn" : `unknown tool ${block.name}`;
    return { type: "tool_result", tool_use_id: block.id, content: reason, is_error: true };
  }
  yield { kind: "tool_use", id: block.id, name: block.name, input: toolInput };
  const outcome = await input.tools.run(block.name, toolInput).catch((error: unknown) => ({
    content: error instanceof Error ? error.message : String(error),
    isError: true,
  }));
  if (input.signal.aborted) return null;
  yield { kind: "tool_result", toolUseId: block.id, content: outcome.content, isError: outcome.isError };
  return { type: "tool_result", tool_use_id: block.id, content: outcome.content, is_error: outcome.isError };
}

/** Asks the model for a summary, followed by the remembered code words. */
async function summarize(
  client: Anthropic,
  settings: Settings,
  model: string,
  context: SessionEntry[],
  signal: AbortSignal,
): Promise<string> {
  const response = await client.messages.create(
    {
      model,
      max_tokens: settings.maxTokens,
      system: COMPACTION_INSTRUCTIONS,
      messages: [{ role: "user", content: transcriptText(context) }],
    },
    { signal },
  );
  const summary = response.content
    .flatMap((b) => (b.type === "text" ? [b.text] : []))
    .join("\n\n")
    .trim();
  // Always restated in the fixed form memory.ts parses, so the words survive later compactions too.
  const words = rememberedCodeWords(context);
  const keep = words.length > 0 ? `Code words remembered: ${words.join(", ")}.` : "";
  return [summary || "Summary of earlier conversation.", keep].filter(Boolean).join("\n\n");
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
