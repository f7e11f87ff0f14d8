/**
 * The scripted engine's command language: plain-English phrases that the conformance suite also sends to
 * real-model deployments. Matching is case-insensitive and tolerant of quotes and punctuation around values.
 * This module only recognises phrases; it decides nothing about how a turn answers them.
 */

export type Directive =
  | { kind: "remember"; word: string }
  | { kind: "recall" }
  | { kind: "no_output" }
  | { kind: "think" }
  | { kind: "write_file"; path: string; content: string }
  | { kind: "read_file"; path: string }
  | { kind: "list_files" }
  | { kind: "run_command"; command: string }
  | { kind: "list_attachments" }
  | { kind: "which_model" }
  | { kind: "repeat_instructions" }
  | { kind: "fail" }
  | { kind: "redacted_thinking" }
  | { kind: "loop_forever" }
  | { kind: "stop_reason"; reason: string }
  | { kind: "transient"; failure: "overloaded" | "rate_limited" | "dropped"; times: number }
  | { kind: "usage"; input: number; output: number; cacheRead: number; cacheWrite: number };

/** A nonce-like word; what follows it (a period, a quote) is not part of it. */
const WORD = "([A-Za-z0-9_-]+)";
/** Punctuation and quotes allowed between a phrase and its word value (`: "n-1"`), on one line. */
const GAP = "[^A-Za-z0-9_\\-\\n]{0,10}";
/** A value that is either quoted (may contain spaces) or a bare run of non-space characters. */
const VALUE = "(?:\"([^\"\\n]+)\"|'([^'\\n]+)'|`([^`\\n]+)`|“([^”\\n]+)”|‘([^’\\n]+)’|([^\\s\"'`“”‘’]+))";

interface PhraseRule {
  pattern: RegExp;
  toDirective(match: RegExpMatchArray): Directive;
}

/** The first defined capture of a VALUE group starting at `from`; bare values lose trailing punctuation. */
function valueAt(match: RegExpMatchArray, from: number): string {
  for (let i = from; i < from + 5; i++) {
    if (match[i] !== undefined) return match[i];
  }
  return (match[from + 5] ?? "").replace(/[.,;:!?)\]]+$/, "");
}

/** Strips one pair of quotes or backticks wrapping the whole command, and any trailing spaces. */
function unquoteCommand(raw: string): string {
  const text = raw.trim();
  const quoted = /^(["'`“])(.+?)(["'`”])\s*[.;]?$/.exec(text);
  return quoted ? quoted[2] : text;
}

const VALUE_GROUPS = 6;

const REMEMBER_RULE: PhraseRule = {
  pattern: new RegExp(`remember this code word${GAP}${WORD}`, "gi"),
  toDirective: (m) => ({ kind: "remember", word: m[1] }),
};

const RULES: PhraseRule[] = [
  REMEMBER_RULE,
  { pattern: /what code word did i ask you to remember/gi, toDirective: () => ({ kind: "recall" }) },
  { pattern: /produce no output at all for this turn/gi, toDirective: () => ({ kind: "no_output" }) },
  { pattern: /think step by step before answering/gi, toDirective: () => ({ kind: "think" }) },
  {
    pattern: new RegExp(`create a file named\\s+${VALUE}\\s+containing\\s+${VALUE}`, "gi"),
    toDirective: (m) => ({ kind: "write_file", path: valueAt(m, 1), content: valueAt(m, 1 + VALUE_GROUPS) }),
  },
  {
    pattern: new RegExp(`read the file named\\s+${VALUE}`, "gi"),
    toDirective: (m) => ({ kind: "read_file", path: valueAt(m, 1) }),
  },
  {
    pattern: new RegExp(`read the attached file\\s+(?:named\\s+)?${VALUE}`, "gi"),
    toDirective: (m) => ({ kind: "read_file", path: `.uploads/${valueAt(m, 1)}` }),
  },
  { pattern: /use your tools to list your files/gi, toDirective: () => ({ kind: "list_files" }) },
  {
    pattern: /run the shell command\s*:?[ \t]*([^\n]+)/gi,
    toDirective: (m) => ({ kind: "run_command", command: unquoteCommand(m[1]) }),
  },
  { pattern: /list the attached files/gi, toDirective: () => ({ kind: "list_attachments" }) },
  { pattern: /which model are you running as/gi, toDirective: () => ({ kind: "which_model" }) },
  { pattern: /repeat your instructions/gi, toDirective: () => ({ kind: "repeat_instructions" }) },
  // Only the scripted engine fails on request; it makes the seed's `error` event observable from outside.
  { pattern: /fail this turn after it starts/gi, toDirective: () => ({ kind: "fail" }) },
  // The phrases below exist to exercise the agent loop with a deterministic upstream (agent-api model).
  { pattern: /think in redacted form/gi, toDirective: () => ({ kind: "redacted_thinking" }) },
  { pattern: /keep using your tools without end/gi, toDirective: () => ({ kind: "loop_forever" }) },
  {
    pattern: /stop with reason\s+([a-z_]+)/gi,
    toDirective: (m) => ({ kind: "stop_reason", reason: m[1].toLowerCase() }),
  },
  {
    pattern: /answer (overloaded|rate limited|by dropping the connection) to the first (\d{1,3}) calls?/gi,
    toDirective: (m) => ({
      kind: "transient",
      failure:
        m[1].toLowerCase() === "overloaded"
          ? "overloaded"
          : m[1].toLowerCase() === "rate limited"
            ? "rate_limited"
            : "dropped",
      times: Number(m[2]),
    }),
  },
  {
    pattern: /report usage: input (\d+), output (\d+), cache read (\d+), cache write (\d+)/gi,
    toDirective: (m) => ({
      kind: "usage",
      input: Number(m[1]),
      output: Number(m[2]),
      cacheRead: Number(m[3]),
      cacheWrite: Number(m[4]),
    }),
  },
];

/** Every directive in the prompt, in the order it appears. */
export function parseDirectives(prompt: string): Directive[] {
  const found: Array<{ at: number; directive: Directive }> = [];
  for (const rule of RULES) {
    for (const match of prompt.matchAll(rule.pattern)) {
      found.push({ at: match.index ?? 0, directive: rule.toDirective(match) });
    }
  }
  // Stable sort: two rules never match at the same index, so order is fully determined by the prompt.
  found.sort((a, b) => a.at - b.at);
  return found.map((f) => f.directive);
}

const TOKEN_PATTERN = new RegExp(`always include the token${GAP}${WORD}`, "gi");

/** Tokens demanded by `Always include the token NONCE` anywhere in the given texts, deduplicated, in order. */
export function requiredTokens(texts: Array<string | undefined>): string[] {
  const tokens: string[] = [];
  for (const text of texts) {
    if (!text) continue;
    for (const match of text.matchAll(TOKEN_PATTERN)) {
      if (!tokens.includes(match[1])) tokens.push(match[1]);
    }
  }
  return tokens;
}

/**
 * Code words a user message asked to remember, in order. Only the `remember` rule can yield one, so only
 * it runs: every other rule over every earlier message was most of a long conversation's turn.
 */
export function rememberedWordsIn(text: string): string[] {
  const words: string[] = [];
  for (const match of text.matchAll(REMEMBER_RULE.pattern)) {
    const directive = REMEMBER_RULE.toDirective(match);
    if (directive.kind === "remember") words.push(directive.word);
  }
  return words;
}
