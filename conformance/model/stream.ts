/**
 * The stream's grammar and field meanings (Events). The grammar itself is conformance/sse/grammar.ts, one state
 * machine the checks and the model share: each of its error codes is a rule here, owned by the check of the
 * same id. The meanings the grammar cannot judge alone (which model, which blocks) are in send-flags.ts.
 */
import type { GrammarCode, GrammarViolation } from "../sse/grammar.ts";
import type { ModelRule } from "./rules.ts";

/** The check that judges a code, where its id is not the code itself. */
const OWNER: Partial<Record<GrammarCode, string>> = { "SSE-ERROR-SHAPE": "SSE-ERROR-EVENT" };

/** The grammar's error codes, each the id of the check that judges it (or OWNER's). */
const GRAMMAR_ERRORS: GrammarCode[] = [
  "SSE-FRAME-LINES",
  "SSE-FRAME-UNTERMINATED",
  "SSE-DATA-JSON",
  "SSE-TYPE-MATCHES-EVENT",
  "SSE-UNKNOWN-EVENT",
  "SSE-DONE-SENTINEL",
  "SSE-FIRST-MESSAGE-START",
  "SSE-MESSAGE-START-ONCE",
  "SSE-BLOCK-TRIPLE",
  "SSE-INDEX-RUNNING",
  "SSE-BLOCK-TYPE",
  "SSE-TOOL-BLOCKS-GATED",
  "SSE-DELTA-TYPE",
  "SSE-THINKING-SIGNATURE",
  "SSE-TOOL-INPUT-JSON",
  "SSE-START-EMPTY",
  "SSE-MESSAGE-DELTA",
  "SSE-USAGE-FIVE-FIELDS",
  "SSE-STOP-LAST",
  "SSE-AFTER-STOP",
  "SSE-ERROR-SHAPE",
];

export const streamRules: Record<string, ModelRule> = Object.fromEntries(
  GRAMMAR_ERRORS.map((code) => [
    code,
    {
      id: `stream.${code}`,
      section: "Events",
      check: OWNER[code] ?? code,
      level: "MUST",
      text: `The turn's event stream follows the API's grammar (${code})`,
    } satisfies ModelRule,
  ]),
);

/** The rule a grammar violation breaks. */
export function ruleOfViolation(v: GrammarViolation): ModelRule {
  return streamRules[v.code] ?? streamRules["SSE-FRAME-LINES"];
}
