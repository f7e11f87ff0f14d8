/**
 * The scripted model answering the way real models do (`agent-api model --style realistic`): the same facts
 * as the plain scripted answer, told in a real model's manner. Taken from how the Messages API streams a
 * real model's turn, not from what any check expects:
 *
 * - a short text block before each tool call ("Let me read `notes.txt`."); a listing of the working
 *   directory before the first file or shell tool a turn asks for, alone or as a parallel call beside it;
 *   a read-back of a file just written before saying it is done; `./` before relative paths and a trailing
 *   newline in written content;
 * - a thinking block first when the request enables thinking (and when the prompt asks to think);
 * - the reply in several text blocks: an opening, the answer paragraph by paragraph, a sign-off;
 * - markdown around values (bold, backticks, code fences, bullet lists), long lists summed up by their
 *   ends, prompts echoed with their whitespace and casing changed; values themselves (a code word, a path,
 *   a file's content) verbatim;
 * - a word or two when asked for no output at all (some seeds, some turns), and a polite refusal instead of
 *   failing on request (only a test engine fails when asked);
 * - the dated snapshot as the answering model, usage with more fields than the four counters, many small
 *   deltas per block and a `ping` after `message_start` (transport options below).
 *
 * Deterministic given the seed: every choice is a hash of the seed and of the request's shape (its kind of
 * answer, the history's length), never of the nonces it carries, so one seed answers one suite run the same
 * way every time. The model stays stateless: a call it made on its own (look-around, read-back) is
 * recognised in the history by its id and left out of what the scripted model is asked, which answers as if
 * it had not happened.
 */
import { createHash } from "node:crypto";
import type Anthropic from "@anthropic-ai/sdk";
import {
  type ReplyPart,
  type ScriptedAnswer,
  type ScriptedModelOptions,
  scriptedAnswer,
  textBlocksOf,
  tokensOf,
} from "./scripted-model.ts";
import type { ScriptedRequest, ScriptedUpstreamOptions } from "./scripted-transport.ts";
import { signThinking } from "./signature.ts";

type MessageParam = Anthropic.Messages.MessageParam;
type ContentBlock = Anthropic.Messages.ContentBlock;
type ContentBlockParam = Anthropic.Messages.ContentBlockParam;

/**
 * Id prefixes of the calls a model makes on its own (a look at the files first, a read-back after writing):
 * how a later call of the turn tells them from the asked ones.
 */
const LOOK_AROUND_ID = "toolu_01look";
const READ_BACK_ID = "toolu_01back";
const OWN_CALL_IDS = [LOOK_AROUND_ID, READ_BACK_ID];

/** The transport options that make `agent-api model` answer in the realistic style with `seed`. */
export function realisticUpstreamOptions(
  seed: number,
): Required<Pick<ScriptedUpstreamOptions, "answer" | "chunkText" | "ping">> {
  return {
    answer: (request, options, requestChars) => realisticAnswer(request, seed, options, requestChars),
    chunkText: (value, block) => {
      const deltas = smallDeltas(value, random(seed, `deltas:${block.salt}`));
      // The Messages API opens a tool call's input with an empty partial_json.
      return block.type === "tool_use" ? ["", ...deltas] : deltas;
    },
    ping: true,
  };
}

/** The scripted model's answer to `request`, told the way a real model would tell it. */
export function realisticAnswer(
  request: ScriptedRequest,
  seed: number,
  options: ScriptedModelOptions = {},
  requestChars?: number,
): ScriptedAnswer {
  const messages = withoutOwnCalls(request.messages);
  // The request's size still counts the exploratory calls: usage is what was sent.
  const base = scriptedAnswer({ ...request, messages }, options, requestChars);
  const promptAt = lastPromptIndex(request.messages);
  const firstCall = promptAt === request.messages.length - 1;
  // What kind of answer this is, and how far the conversation is: nonces never steer a choice.
  const shape = [
    request.messages.length,
    (base.parts ?? []).map((p) => p.kind).join("+"),
    base.message.content.map((b) => (b.type === "tool_use" ? b.name : b.type)).join("+"),
  ].join(":");
  const choose = <T>(slot: string, choices: readonly T[]): T => pick(seed, `${slot}:${shape}`, choices);
  const content = base.message.content;
  const lead = content.filter((b) => b.type === "thinking" || b.type === "redacted_thinking");
  if (firstCall && lead.length === 0 && thinkingEnabled(request)) {
    const thinking = choose("thinking", THINKING);
    lead.push({
      type: "thinking",
      thinking,
      signature: signThinking(thinking, options.thinkingSignatureSecret),
    });
  }
  const rewrite = (blocks: ContentBlock[], stop = base.message.stop_reason): ScriptedAnswer => ({
    message: {
      ...base.message,
      id: `msg_${digest([seed, request.messages.length, request.messages.at(-1) ?? null]).slice(0, 24)}`,
      // The Messages API reports the dated snapshot an alias resolved to.
      model: /-\d{8}$/.test(base.message.model) ? base.message.model : `${base.message.model}-20250929`,
      content: blocks,
      stop_reason: stop,
      // The Messages API's usage carries more than the four counters; clients read what they know.
      usage: {
        ...base.message.usage,
        output_tokens: Math.max(1, tokensOf(blocks)),
        cache_creation: {
          ephemeral_5m_input_tokens: base.message.usage.cache_creation_input_tokens ?? 0,
          ephemeral_1h_input_tokens: 0,
        },
        service_tier: "standard",
      } as ScriptedAnswer["message"]["usage"],
    },
    transient: base.transient,
  });

  const toolUse = content.find((b): b is Anthropic.Messages.ToolUseBlock => b.type === "tool_use");
  if (toolUse) {
    const asked = { ...toolUse, input: asAModelWrites(toolUse, choose) } as ContentBlock;
    const offered = (request.tools ?? []).some((t) => "name" in t && t.name === "list_files");
    const alreadyListing = toolUse.name === "list_files" && Object.keys(toolUse.input as object).length === 0;
    if (firstCall && offered && !alreadyListing) {
      const look: ContentBlock = {
        type: "tool_use",
        id: `${LOOK_AROUND_ID}${digest([request.messages.length, toolUse.id]).slice(0, 20)}`,
        name: "list_files",
        input: {},
      } as ContentBlock;
      // Some models make both calls at once (parallel tool use), others look first and act on the next call.
      const together = choose("parallel", [true, false]);
      return rewrite(
        [...lead, text(choose("look", LOOK_AROUND)), look, ...(together ? [asked] : [])],
        "tool_use",
      );
    }
    const path = (toolUse.input as { path?: unknown }).path;
    const before = choose(`before:${toolUse.name}`, BEFORE_TOOL[toolUse.name] ?? BEFORE_ANY_TOOL);
    return rewrite([
      ...lead,
      text(typeof path === "string" ? before.replace("{path}", path) : before.replace(" `{path}`", "")),
      asked,
    ]);
  }
  // Only a test engine fails on request; a real model answers that it cannot.
  if (base.failAfterBlocks !== undefined) return rewrite([...lead, text(choose("refuse", REFUSE_TO_FAIL))]);
  const parts = base.parts;
  // Done writing: some models read the file back before they say so.
  const written = firstCall ? undefined : lastWrite(request.messages.slice(promptAt + 1));
  if (parts !== undefined && written !== undefined && choose("read-back", [true, false])) {
    const back: ContentBlock = {
      type: "tool_use",
      id: `${READ_BACK_ID}${digest([request.messages.length, written]).slice(0, 20)}`,
      name: "read_file",
      input: { path: written },
    } as ContentBlock;
    return rewrite([...lead, text(choose("read-back-say", READ_BACK)), back], "tool_use");
  }
  if (parts === undefined) {
    const said = content.some((b) => b.type === "text");
    // A compaction summary: the model's own memory, read back by it, so only its layout changes.
    if (said)
      return rewrite([
        ...lead,
        ...content.flatMap((b) => (b.type === "text" ? [text(`## Conversation summary\n\n${b.text}`)] : [])),
      ]);
    // Asked for no output at all: many models still say a word.
    const word = choose("silence", SILENCE);
    return rewrite(word === "" ? lead : [...lead, text(word)]);
  }
  const paragraphs = parts.map((part, i) => tell(part, (slot, choices) => choose(`${slot}:${i}`, choices)));
  const opening = choose("opening", OPENINGS);
  const signOff = choose("sign-off", SIGN_OFFS);
  const apart = choose("apart", [true, false]);
  const body = apart ? paragraphs.map(text) : [text(paragraphs.join("\n\n"))];
  return rewrite([
    ...lead,
    ...(opening === "" ? [] : [text(opening)]),
    ...body,
    ...(signOff === "" ? [] : [text(signOff)]),
  ]);
}

type Choose = <T>(slot: string, choices: readonly T[]) => T;

/** One paragraph of the reply as a real model writes it; the value it reports stays verbatim. */
function tell(part: ReplyPart, choose: Choose): string {
  const { value, path, items } = part;
  if (part.isError) return `${choose("sorry", ["Sorry — ", "Unfortunately, ", ""])}${lowerFirst(part.text)}`;
  switch (part.kind) {
    case "remember":
      return value === undefined
        ? part.text
        : choose("remember", ["OK", "OK.", "Ok!", `Got it — I'll remember **${value}**.`]);
    case "recall":
      return value === undefined
        ? choose("forgot", [
            "I don't know",
            "I don't have a code word from you in this conversation.",
            "I'm sorry, but I can't find any code word you asked me to remember.",
          ])
        : choose("recall", [value, `**${value}**`, `\`${value}\``, `The code word is **${value}**.`]);
    case "which_model":
      return choose("model", [
        `${value}`,
        `\`${value}\``,
        `I'm running as **${value}**.`,
        `Model: \`${value}\``,
      ]);
    case "repeat_instructions":
      return value === undefined
        ? part.text
        : choose("instructions", [
            `Here are my instructions:\n\n${value
              .split("\n")
              .map((line) => `> ${line}`)
              .join("\n")}`,
            `My instructions are:\n\n\`\`\`\n${value}\n\`\`\``,
            reflow(value),
          ]);
    case "write_file":
      return choose("created", [
        `Created \`${path}\`.`,
        `I've created **${path}** with the requested content.`,
        `Done! The file \`${path}\` has been created.`,
      ]);
    case "read_file": {
      const shown = (value ?? "").trimEnd();
      return choose("read", [
        `The file \`${path}\` contains:\n\n\`\`\`\n${shown}\n\`\`\``,
        `Here are the contents of **${path}**:\n\n\`\`\`text\n${shown}\n\`\`\``,
        shown,
      ]);
    }
    case "run_command": {
      const shown = (value ?? "").trimEnd();
      if (shown === "")
        return choose("silent-command", [
          "The command produced no output.",
          "It ran without printing anything.",
        ]);
      return choose("command", [
        `\`\`\`\n${shown}\n\`\`\``,
        `The command printed:\n\n\`\`\`text\n${shown}\n\`\`\``,
      ]);
    }
    case "list_files":
    case "loop_forever":
    case "list_attachments": {
      if (!items || items.length === 0) return part.text;
      const what = part.kind === "list_attachments" ? "attached files" : "files";
      // A long list is often summed up by its ends.
      if (items.length > 6 && choose("list-ends", [true, false]))
        return `There are ${items.length} ${what}, from \`${items[0]}\` to \`${items.at(-1)}\`.`;
      return choose("list", [
        `Here are the ${what}:\n\n${items.map((item) => `- \`${item}\``).join("\n")}`,
        `I found ${items.length} ${what}: ${items.map((item) => `**${item}**`).join(", ")}.`,
        `${upperFirst(what)}:\n${items.map((item) => `* ${item}`).join("\n")}`,
      ]);
    }
    case "echo":
      return value === undefined
        ? part.text
        : choose("echo", [
            `You said: ${value}`,
            `You asked: "${lowerFirst(reflow(value)).replace(/[.!?]$/, "")}"`,
            `Hello! You wrote:  *${value.trim()}*`,
          ]);
    case "tokens": {
      const tokens = items ?? [];
      return choose("tokens", [
        tokens.join(" "),
        tokens.map((t) => `\`${t}\``).join(", "),
        `(token: ${tokens.map((t) => `**${t}**`).join(", ")})`,
      ]);
    }
    default:
      return part.text;
  }
}

const THINKING = [
  "Let me work out what is being asked here, then answer it directly.",
  "The user wants a short answer. I should check what is needed and reply without extra detail.",
] as const;
const LOOK_AROUND = [
  "Let me first take a look at the working directory.",
  "I'll start by checking which files are in the working directory.",
] as const;
const BEFORE_TOOL: Record<string, readonly string[]> = {
  write_file: ["I'll create `{path}` now.", "Now let me write the file."],
  read_file: ["Let me read `{path}`.", "Now I'll read the file."],
  run_command: ["I'll run that command.", "Let me run it."],
  list_files: ["Let me list the files in `{path}`.", "I'll check which files are there."],
};
const BEFORE_ANY_TOOL = ["Let me use a tool for that."] as const;
const READ_BACK = ["Let me double-check the file.", "I'll read it back to verify."] as const;
const OPENINGS = ["", "", "Sure!", "Here you go."] as const;
const SIGN_OFFS = [
  "",
  "Let me know if you need anything else!",
  "Is there anything else I can help with?",
] as const;
const SILENCE = ["", "OK.", "(no output)", "Understood."] as const;
const REFUSE_TO_FAIL = [
  "I can't deliberately make this turn fail, but I'm happy to help with anything else.",
  "I don't have a way to fail on purpose, so here is a normal reply instead.",
] as const;

/** A tool input as models write it: `./` before a relative path, a file's content ending with a newline. */
function asAModelWrites(use: Anthropic.Messages.ToolUseBlock, choose: Choose): unknown {
  const input = { ...(use.input as Record<string, unknown>) };
  if (typeof input.path === "string" && !input.path.startsWith("/") && !input.path.startsWith("."))
    input.path = choose("dot-slash", ["", "./"]) + input.path;
  if (use.name === "write_file" && typeof input.content === "string" && !input.content.endsWith("\n"))
    input.content += choose("newline", ["", "\n"]);
  return input;
}

/** The request's messages without the calls the model made on its own, and their results. */
function withoutOwnCalls(messages: MessageParam[]): MessageParam[] {
  const own = (id: string) => OWN_CALL_IDS.some((prefix) => id.startsWith(prefix));
  const looked = (b: ContentBlockParam) =>
    (b.type === "tool_use" && own(b.id)) || (b.type === "tool_result" && own(b.tool_use_id));
  if (!messages.some((m) => Array.isArray(m.content) && m.content.some(looked))) return messages;
  return messages.flatMap((m): MessageParam[] => {
    if (!Array.isArray(m.content) || !m.content.some(looked)) return [m];
    const content = (m.content as ContentBlockParam[]).filter((b) => !looked(b));
    return content.length > 0 ? [{ ...m, content } as MessageParam] : [];
  });
}

/**
 * The path of the turn's last asked call when it wrote a file successfully and was not read back yet: the
 * calls after the prompt, from the history as sent.
 */
function lastWrite(turnSoFar: MessageParam[]): string | undefined {
  const blocks = turnSoFar.flatMap((m) =>
    Array.isArray(m.content) ? (m.content as ContentBlockParam[]) : [],
  );
  if (blocks.some((b) => b.type === "tool_use" && b.id.startsWith(READ_BACK_ID))) return undefined;
  const asked = blocks.filter(
    (b): b is Anthropic.Messages.ToolUseBlockParam =>
      b.type === "tool_use" && !b.id.startsWith(LOOK_AROUND_ID),
  );
  const last = asked.at(-1);
  const path = (last?.input as { path?: unknown } | undefined)?.path;
  if (last?.name !== "write_file" || typeof path !== "string") return undefined;
  const result = blocks.find(
    (b): b is Anthropic.Messages.ToolResultBlockParam =>
      b.type === "tool_result" && b.tool_use_id === last.id,
  );
  return result && !result.is_error ? path : undefined;
}

/** The newest user message carrying text: this turn's prompt (later ones carry tool results). */
function lastPromptIndex(messages: MessageParam[]): number {
  for (let i = messages.length - 1; i >= 0; i--)
    if (messages[i].role === "user" && textBlocksOf(messages[i]).length > 0) return i;
  return -1;
}

function thinkingEnabled(request: ScriptedRequest): boolean {
  const thinking = (request as { thinking?: { type?: string } }).thinking;
  return thinking?.type === "enabled" || thinking?.type === "adaptive";
}

/** Whitespace runs made single spaces: a model restating a text rarely keeps its line breaks. */
function reflow(value: string): string {
  return value.replace(/\s+/g, " ").trim();
}

function lowerFirst(value: string): string {
  return value.charAt(0).toLowerCase() + value.slice(1);
}

function upperFirst(value: string): string {
  return value.charAt(0).toUpperCase() + value.slice(1);
}

/** Deltas of 1 to 12 characters, as a real model streams a few tokens at a time. */
function smallDeltas(value: string, next: () => number): string[] {
  if (value.length === 0) return [value];
  const out: string[] = [];
  for (let at = 0; at < value.length; ) {
    const size = 1 + Math.floor(next() * 12);
    out.push(value.slice(at, at + size));
    at += size;
  }
  return out;
}

function pick<T>(seed: number, slot: string, choices: readonly T[]): T {
  return choices[Math.floor(random(seed, slot)() * choices.length)];
}

/** A small seeded generator (mulberry32) keyed by the seed and a slot name. */
function random(seed: number, slot: string): () => number {
  let state = createHash("sha256").update(`${seed}:${slot}`).digest().readUInt32LE(0);
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function text(value: string): ContentBlock {
  return { type: "text", text: value, citations: null };
}

function digest(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("hex");
}
