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
/** Quotes that may wrap a value (may contain spaces, not a line break), each with its closing quote. */
const CLOSING_QUOTE: Record<string, string> = { '"': '"', "'": "'", "`": "`", "“": "”", "‘": "’" };
/** Characters a bare value (a run of non-space characters) stops at. */
const NOT_BARE = new Set(['"', "'", "`", "“", "”", "‘", "’"]);
/** Punctuation a bare value loses at its end (`read the file named a.txt.`). */
const TRAILING_PUNCTUATION = new Set([".", ",", ";", ":", "!", "?", ")", "]"]);
const SPACE = /\s/;

interface PhraseRule {
  pattern: RegExp;
  /** The directive of a match, or null when what follows the phrase is not a well-formed value. */
  toDirective(match: RegExpExecArray, values: ValueReader): Directive | null;
}

/**
 * Reads the values that follow a phrase by hand, in linear time over the whole prompt. A pattern such as
 * `“([^”\n]+)”` is retried at every occurrence of its phrase, each scanning to the end of the line when the
 * quote never closes: quadratic in a long line of repeated phrases. Here the search for a closing quote
 * remembers where it stopped, and the phrases of one rule are read left to right, so each character is
 * scanned a bounded number of times. `end` is where the last value read ended.
 */
class ValueReader {
  end = 0;
  readonly #text: string;
  /** Per closing quote: the last scan's start and the closing quote or line break it found. */
  readonly #stops = new Map<string, { from: number; found: number }>();

  constructor(text: string) {
    this.#text = text;
  }

  /** `\s+` at `at`: the index after it, or -1 when there is no space there. */
  spaces(at: number): number {
    let i = at;
    while (i < this.#text.length && SPACE.test(this.#text[i])) i++;
    return i > at ? i : -1;
  }

  /** Whether `word` (lower case) is at `at`, ignoring case. */
  word(at: number, word: string): boolean {
    return this.#text.slice(at, at + word.length).toLowerCase() === word;
  }

  /** A quoted or bare value at `at`, or null; `end` is set past it. */
  value(at: number): string | null {
    const text = this.#text;
    if (at < 0 || at >= text.length) return null;
    const closing = CLOSING_QUOTE[text[at]];
    if (closing !== undefined) {
      const close = this.#stop(at + 1, closing);
      if (close === at + 1 || text[close] !== closing) return null;
      this.end = close + 1;
      return text.slice(at + 1, close);
    }
    let stop = at;
    while (stop < text.length && !SPACE.test(text[stop]) && !NOT_BARE.has(text[stop])) stop++;
    if (stop === at) return null;
    this.end = stop;
    let cut = stop;
    while (cut > at && TRAILING_PUNCTUATION.has(text[cut - 1])) cut--;
    return text.slice(at, cut);
  }

  /** The first `closing` or line break at or after `from` (text length when none). */
  #stop(from: number, closing: string): number {
    const known = this.#stops.get(closing);
    // Nothing stops a value between the last scan's start and what it found: reuse it.
    if (known && from >= known.from && from <= known.found) return known.found;
    let i = from;
    while (i < this.#text.length && this.#text[i] !== closing && this.#text[i] !== "\n") i++;
    this.#stops.set(closing, { from, found: i });
    return i;
  }
}

/** Strips one pair of quotes or backticks wrapping the whole command, and any trailing spaces. */
function unquoteCommand(raw: string): string {
  const text = raw.trim();
  const quoted = /^(["'`“])(.+?)(["'`”])\s*[.;]?$/.exec(text);
  return quoted ? quoted[2] : text;
}

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
    // create a file named <value> containing <value>
    pattern: /create a file named/gi,
    toDirective(m, values) {
      const path = values.value(values.spaces(phraseEnd(m)));
      if (path === null) return null;
      const afterPath = values.spaces(values.end);
      if (afterPath < 0 || !values.word(afterPath, "containing")) return null;
      const content = values.value(values.spaces(afterPath + "containing".length));
      return content === null ? null : { kind: "write_file", path, content };
    },
  },
  {
    // read the file named <value>
    pattern: /read the file named/gi,
    toDirective(m, values) {
      const path = values.value(values.spaces(phraseEnd(m)));
      return path === null ? null : { kind: "read_file", path };
    },
  },
  {
    // read the attached file [named] <value>
    pattern: /read the attached file/gi,
    toDirective(m, values) {
      const at = values.spaces(phraseEnd(m));
      const afterNamed = at >= 0 && values.word(at, "named") ? values.spaces(at + "named".length) : -1;
      const name = (afterNamed >= 0 ? values.value(afterNamed) : null) ?? values.value(at);
      return name === null ? null : { kind: "read_file", path: `.uploads/${name}` };
    },
  },
  { pattern: /use your tools to list your files/gi, toDirective: () => ({ kind: "list_files" }) },
  {
    pattern: /run the shell command\s*:?[ \t]*([^\n]+)/gi,
    toDirective: (m) => ({ kind: "run_command", command: unquoteCommand(m[1]) }),
  },
  { pattern: /list the attached files/gi, toDirective: () => ({ kind: "list_attachments" }) },
  { pattern: /which model are you running as/gi, toDirective: () => ({ kind: "which_model" }) },
  { pattern: /repeat your instructions/gi, toDirective: () => ({ kind: "repeat_instructions" }) },
  // Only the scripted engine fails on request; it makes the API's `error` event observable from outside.
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

function phraseEnd(match: RegExpExecArray): number {
  return match.index + match[0].length;
}

/** Every directive in the prompt, in the order it appears. */
export function parseDirectives(prompt: string): Directive[] {
  const found: Array<{ at: number; directive: Directive }> = [];
  for (const rule of RULES) {
    const values = new ValueReader(prompt);
    const pattern = new RegExp(rule.pattern);
    for (let match = pattern.exec(prompt); match !== null; match = pattern.exec(prompt)) {
      values.end = phraseEnd(match);
      const directive = rule.toDirective(match, values);
      if (directive === null) continue;
      found.push({ at: match.index, directive });
      // Like a pattern that matched the value too: the next phrase is looked for after it.
      pattern.lastIndex = Math.max(pattern.lastIndex, values.end);
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
  for (const match of text.matchAll(REMEMBER_RULE.pattern)) words.push(match[1]);
  return words;
}
