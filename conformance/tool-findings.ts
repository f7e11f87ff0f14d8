/**
 * A deployment-level finding: every tool call the suite saw failed with one and the same error. A deployment
 * whose tool sandbox cannot start (a container that refuses bubblewrap its namespaces, say) fails each
 * check that needs a file or a command for that one reason; the report names it once, first, instead of
 * leaving the operator to guess it from a dozen unrelated-looking failures.
 */
import { type Diagnosis, describeDiagnosis } from "./deployment-errors.ts";
import type { StreamEventSeen } from "./sse/grammar.ts";

/** Distinct error texts kept: past this the errors are not "the same way" anyway. */
const MAX_DISTINCT = 4;
/** How much of a tool error is compared and quoted. */
const MAX_TEXT = 400;
/** Fewer tool results than this prove nothing about the deployment as a whole. */
const MIN_RESULTS = 2;

export interface ToolResultsSeen {
  total: number;
  errors: number;
  /** Error text → how often it came (at most MAX_DISTINCT texts). */
  errorTexts: Map<string, number>;
}

export function createToolResultsSeen(): ToolResultsSeen {
  return { total: 0, errors: 0, errorTexts: new Map() };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The text of a tool result's content: a string, or the text blocks of an array. */
function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part) => (isRecord(part) && typeof part.text === "string" ? part.text : "")).join("\n");
}

/** Counts the tool_result blocks of one turn's stream (present only with stream_tool_calls). */
export function recordToolResults(seen: ToolResultsSeen, events: readonly StreamEventSeen[]): void {
  for (const event of events) {
    if (event.name !== "content_block_start" || !isRecord(event.data)) continue;
    const block = event.data.content_block;
    if (!isRecord(block) || block.type !== "tool_result") continue;
    seen.total++;
    if (block.is_error !== true) continue;
    seen.errors++;
    const text = contentText(block.content).trim().slice(0, MAX_TEXT);
    const count = seen.errorTexts.get(text);
    if (count !== undefined) seen.errorTexts.set(text, count + 1);
    else if (seen.errorTexts.size < MAX_DISTINCT) seen.errorTexts.set(text, 1);
  }
}

/** The finding when every tool result seen was the same error; null otherwise. */
export function diagnoseToolResults(seen: ToolResultsSeen): Diagnosis | null {
  if (seen.total < MIN_RESULTS || seen.errors !== seen.total || seen.errorTexts.size !== 1) return null;
  const [text] = [...seen.errorTexts.keys()];
  return {
    problem: `every tool call of this run failed the same way (${seen.total} of ${seen.total} tool results streamed with stream_tool_calls were errors, each saying ${text ? `"${text}"` : "nothing"})`,
    cause:
      "the deployment cannot run its agents' tools (the error above says what failed), so every check that needs a file, a command, an attachment or a repository fails for this one reason",
    fix: "make the deployment's tools run (its start-up log says why they cannot); the checks below that failed for it pass once they do",
  };
}

/** The run's deployment-level findings, each one line, most telling first. */
export function deploymentFindings(seen: ToolResultsSeen): string[] {
  const tools = diagnoseToolResults(seen);
  return tools ? [describeDiagnosis(tools)] : [];
}
