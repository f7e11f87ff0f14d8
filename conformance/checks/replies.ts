/**
 * Reading a turn's reply: file names as a reply writes them, the tool calls a streamed turn carries with their
 * results, and the judgement that the agent read an attachment. Checks of several sections use them.
 */
import { type CheckContext, isRecord, type Turn } from "../context.ts";
import { excerpt, fail } from "../outcomes.ts";
import { ensureIncludes } from "./common.ts";

/**
 * One file name as a reply writes it, reduced to the bare name: markdown around it (`**a.txt**`,
 * `` `a.txt` ``, `_a.txt_`, a link's brackets), quotes, a directory part (`.uploads/a.txt`) and sentence
 * punctuation after it go, so one file mentioned in several ways counts once.
 */
export function normaliseName(word: string): string {
  const basename = (w: string) => w.slice(Math.max(w.lastIndexOf("/"), w.lastIndexOf("\\")) + 1);
  // The directory part first: a link `[a.txt](.uploads/a.txt)` keeps only what follows its last slash.
  const name = basename(word.trim());
  // Index scans, each character looked at a bounded number of times: a deployment's reply may hold a word of
  // megabytes, and `[.,:;!?]+$` or a recount of parentheses per removed character is quadratic on it.
  let start = 0;
  let end = name.length;
  let opens = 0;
  let closes = 0;
  for (let i = 0; i < name.length; i++) {
    if (name[i] === "(") opens++;
    else if (name[i] === ")") closes++;
  }
  for (;;) {
    const before = end - start;
    while (start < end && LEADING_MARKUP.has(name[start])) if (name[start++] === "(") opens--;
    while (end > start && TRAILING_MARKUP.has(name[end - 1])) end--;
    while (end > start && SENTENCE_PUNCTUATION.has(name[end - 1])) end--;
    // A closing parenthesis belongs to the name only when the name opened one ("a (1).txt" vs "(a.txt)").
    while (end > start && name[end - 1] === ")" && opens < closes) {
      end--;
      closes--;
    }
    if (end - start === before) break;
  }
  return basename(name.slice(start, end));
}

const LEADING_MARKUP = new Set(["*", "_", "`", '"', "'", "“", "‘", "<", "[", "("]);
const TRAILING_MARKUP = new Set(["*", "_", "`", '"', "'", "”", "’", ">", "]"]);
const SENTENCE_PUNCTUATION = new Set([".", ",", ":", ";", "!", "?"]);

/**
 * A word naming one of the de-duplicated attachments; it may hold a space (`acc-dup (1).txt`). The look-behind
 * starts a word only at its first character: tried from inside a long run, the pattern would scan the run
 * again from every position (quadratic in a reply's longest word).
 */
export const DEDUP_NAME = /(?<![^\s"'`,;])[^\s"'`,;]*acc-dup(?: \(\d+\))?[^\s"'`,;]*/;

/** Distinct names in `text` matching `stem` (how many different attachment names a reply mentions). */
export function distinctMentions(text: string, stem: RegExp): Set<string> {
  const flags = stem.flags.includes("g") ? stem.flags : `${stem.flags}g`;
  return new Set(
    (text.match(new RegExp(stem.source, flags)) ?? []).map(normaliseName).filter((n) => n !== ""),
  );
}

/** A tool call of a turn streamed with `stream_tool_calls: true`, paired with its result. */
export interface ToolCall {
  id: string;
  name: string;
  /** The input's JSON, and its string values, for looking a path up. */
  input: string;
  result?: { isError: boolean; content: string };
}

function resultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content
      .map((b) => (isRecord(b) && typeof b.text === "string" ? b.text : JSON.stringify(b)))
      .join("\n");
  return content === undefined ? "" : JSON.stringify(content);
}

function stringValues(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(stringValues);
  if (isRecord(value)) return Object.values(value).flatMap(stringValues);
  return [];
}

/** Whether the turn's stream carries any tool block (the deployment streams them). */
export function hasToolBlocks(turn: Turn): boolean {
  return (turn.reading?.blocks ?? []).some((b) => b.type === "tool_use" || b.type === "tool_result");
}

/** The turn's tool_use blocks with their tool_result (matched on tool_use_id). */
export function toolCalls(turn: Turn): ToolCall[] {
  const blocks = turn.reading?.blocks ?? [];
  const calls: ToolCall[] = [];
  for (const b of blocks.filter((x) => x.type === "tool_use")) {
    const partial = b.deltas.map((d) => (typeof d.partial_json === "string" ? d.partial_json : "")).join("");
    let parsed: unknown = b.start.input;
    if (partial !== "") {
      try {
        parsed = JSON.parse(partial);
      } catch {
        parsed = partial;
      }
    }
    const json = partial !== "" ? partial : JSON.stringify(b.start.input ?? {});
    calls.push({
      id: String(b.start.id ?? ""),
      name: String(b.start.name ?? ""),
      input: [json, ...stringValues(parsed)].join("\n"),
    });
  }
  for (const r of blocks.filter((x) => x.type === "tool_result")) {
    const source = r.deltas[0] && isRecord(r.deltas[0]) ? { ...r.start, ...r.deltas[0] } : r.start;
    const call = calls.find((c) => c.id !== "" && c.id === source.tool_use_id);
    if (call) call.result = { isError: source.is_error === true, content: resultText(source.content) };
  }
  return calls;
}

export function describeCalls(calls: ToolCall[]): string {
  return calls
    .map(
      (c) =>
        `${c.name} ${excerpt(c.input.split("\n")[0], 200)} → ${
          c.result
            ? `${c.result.isError ? "is_error " : ""}${excerpt(c.result.content, 300)}`
            : "no tool_result"
        }`,
    )
    .join("\n");
}

/** The contents of the turn's successful tool results (what the agent's tools actually saw). */
export function toolResultText(turn: Turn): string {
  return toolCalls(turn)
    .filter((c) => c.result && !c.result.isError)
    .map((c) => c.result?.content ?? "")
    .join("\n");
}

/**
 * Judges that the agent read `content` from `.uploads/<name>`. Streamed with `stream_tool_calls: true`, the
 * evidence is a read tool's `tool_result` on that path; the reply text is used only when the deployment
 * streams no tool blocks or no tool touched the file (a weaker pass, noted).
 */
export function ensureAttachmentRead(
  ctx: CheckContext,
  turn: Turn,
  name: string,
  content: string,
  what: string,
): void {
  const reads = toolCalls(turn).filter((c) => c.input.includes(name));
  if (reads.length === 0) {
    ctx.note(
      hasToolBlocks(turn)
        ? `no tool call named ${name}: judged from the reply text alone (weaker evidence than a tool_result)`
        : "the stream carries no tool blocks although stream_tool_calls was true: judged from the reply text alone (weaker evidence than a tool_result)",
    );
    ensureIncludes(turn.text, content, what);
    return;
  }
  const read = reads.find(
    (c) =>
      c.result && !c.result.isError && c.result.content.includes(content) && c.input.includes(".uploads"),
  );
  if (!read)
    fail(
      `${what}: no tool call on .uploads/${name} returned the attachment's content ${content}`,
      describeCalls(reads),
    );
}
