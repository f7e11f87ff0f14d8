/**
 * The conformance suite's vocabulary: what a check is, what it may need from the user, and what a run
 * reports. The catalogue (catalogue.ts) is plain data of these shapes.
 */
import type { CheckContext } from "./context.ts";
import type { TurnTimeline } from "./sse/timing.ts";

/** MUST: the API states it. SHOULD: client guidance. INFO: "not shown" behaviour; never fails a run. */
export type Level = "MUST" | "SHOULD" | "INFO";

/** Optional inputs a check may need; a check whose needs are not all given is skipped with the reason. */
export type InputName =
  | "memberKey"
  | "viewerKey"
  | "revokedKey"
  | "foreignAgent"
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

export interface CheckDef {
  /** Stable id; users filter on it and CI reports name it. */
  id: string;
  level: Level;
  /** API section the check verifies, e.g. "Errors", "Endpoints/Send a message". */
  section: string;
  /** One line saying what the deployment must do. */
  title: string;
  needs: InputName[];
  /** Why the check has its level, in the API's words, where the level is not plain from the rule. */
  levelReason?: string;
  run(ctx: CheckContext): Promise<void>;
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

/**
 * `xfail`: a failure the run's expected-failures file lists (a known deviation); it does not fail the run.
 */
export type Outcome = "pass" | "fail" | "skip" | "xfail";

/** Why a check did not run: an input it needs was not given, or the deployment cannot show the fact. */
export type SkipKind = "input" | "unobservable";

export interface CheckResult {
  id: string;
  level: Level;
  section: string;
  title: string;
  outcome: Outcome;
  ms: number;
  /** Why it failed or was skipped. */
  reason?: string;
  /** For a skip: whether an input was missing or the deployment could not show the fact. */
  skipKind?: SkipKind;
  /**
   * For a failure: true when the deployment kept the check from reaching the API (its proxy answered, TLS
   * or a body size limit refused the request), rather than the API answering wrongly.
   */
  prevented?: boolean;
  /** For `xfail`, and for a listed check that passed: the reason the expected-failures file gives. */
  expectedFailure?: string;
  details: FailureDetail[];
  /** Observations that do not decide the outcome (e.g. `ping` frames seen). */
  notes: string[];
  /** The requests the check made; the reports show them for failures. */
  exchanges: Exchange[];
  /** The turns whose timing the check judged, each with its timeline (every report shows these). */
  timelines?: Array<{ label: string; timeline: TurnTimeline }>;
}

export interface RunReport {
  runId: string;
  baseUrl: string;
  agent: string;
  startedAt: string;
  ms: number;
  results: CheckResult[];
  /** Cleanup problems (a conversation the run created could not be deleted). */
  warnings: string[];
}
