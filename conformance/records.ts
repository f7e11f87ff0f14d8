/**
 * The suite's inputs and what a check records of its exchanges: shapes with no dependency on the suite's
 * modules, so the context, the HTTP layer and the outcomes use them without importing types.ts (which
 * names the context: an import circle).
 */
import type { TurnTimeline } from "./sse/timing.ts";

/** Optional inputs a check may need; a check whose needs are not all given is skipped with the reason. */
export type InputName =
  | "memberKey"
  | "viewerKey"
  | "revokedKey"
  | "foreignAgent"
  | "foreignKey"
  | "automation"
  | "storageAgent"
  | "repoAgent"
  | "repoUrl"
  | "flowUrl"
  | "flowId"
  | "flowKey"
  | "flowInput"
  | "routingPrefix"
  | "channelId"
  | "notebookPath"
  | "idleSeconds";

export interface SuiteInputs {
  baseUrl: string;
  agent: string;
  key: string;
  memberKey?: string;
  viewerKey?: string;
  revokedKey?: string;
  foreignAgent?: string;
  /** A key of another workspace (the explorer sends it to this workspace's agents). */
  foreignKey?: string;
  automation?: string;
  storageAgent?: string;
  repoAgent?: string;
  repoUrl?: string;
  flowUrl?: string;
  flowId?: string;
  flowKey?: string;
  /** `name=value` pairs for the deployed flow's input variables. */
  flowInput?: string[];
  routingPrefix?: string;
  /** A chat channel id (e.g. a Slack channel) with at least one conversation of the agent visible to `key`. */
  channelId?: string;
  /** A notebook path with at least one conversation of the agent visible to `key`. */
  notebookPath?: string;
  /** Opt-in: a turn stays quiet this long (a proxy idle time-out it must survive). */
  idleSeconds?: number;
  /** Bound for waiting on `agent_session_id` (the API's client guidance). */
  sessionWaitMs: number;
}

/** One HTTP request and its response as the report shows them (keys masked, bodies cut short). */
export interface Exchange {
  method: string;
  url: string;
  requestHeaders: Record<string, string>;
  requestBody?: string;
  status: number;
  responseHeaders: Record<string, string>;
  responseBody: string;
  ms: number;
  /** An event stream's arrival times: headers, first byte, each block, the end. */
  timeline?: TurnTimeline;
}

export interface FailureDetail {
  message: string;
  /** JSON pointer into the offending body or event (schema violations). */
  pointer?: string;
  schemaPath?: string;
  /** The offending SSE frame or JSON excerpt. */
  evidence?: string;
}

/** Why a check did not run: an input it needs was not given, or the deployment cannot show the fact. */
export type SkipKind = "input" | "unobservable";

/** A sequence the explorer found breaking a rule of the model, shrunk to a minimum. */
export interface ExplorerFinding {
  /** The model's rule id (`forks.allTurns`). */
  rule: string;
  /** The named check that owns the rule (the failure is that check's). */
  check: string;
  section: string;
  ruleText: string;
  expected: string;
  actual: string;
  seed: number;
  /** The minimal sequence, one line per operation; the last one departs from the API. */
  steps: string[];
  /** The sequence as curl lines (keys from the AGENT_API_* variables). */
  script: string;
  /** Whether replaying the minimal sequence once more showed the same departure. */
  reproduced: boolean;
}

/** What the explorer did in a run. */
export interface ExplorerSummary {
  seed: number;
  /** Sequences drawn (shrinking and the replay not counted). */
  runs: number;
  /** Sequences run against the deployment, shrinking and the replay included. */
  sequences: number;
  operations: number;
  turns: number;
  /** The most turns any conversation of the exploration held (forks count their copied turns). */
  deepest: number;
  /** Sequences a transient refusal or an error event ended before they could show anything. */
  inconclusive: number;
  shrinks: number;
  /** The time limit ended the exploration early. */
  interrupted: boolean;
  findings: ExplorerFinding[];
  /** Choices the API leaves open, as this deployment made them. */
  learned: Array<{ choice: string; value: string }>;
  /** Later answers that departed from a learned choice (information, never a failure). */
  departures: Array<{ choice: string; learned: string; seen: string }>;
  ms: number;
}
