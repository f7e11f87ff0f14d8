/**
 * The coverage map: every normative sentence or table row of the API
 * (as the spec, `spec/`, states it), quoted short, with the checks that verify it, or why
 * none can. Kept by hand; `npm run coverage` renders it with the catalogue into COVERAGE.md, and
 * coverage.test.ts fails when the two disagree (an id the catalogue lacks, a check the map never names)
 * or when COVERAGE.md is stale.
 */
import type { components } from "@agent-api/client/api-types";
import { shapeRules } from "./explorer/session.ts";
import { type ModelRule, modelRules } from "./model/index.ts";
import type { CheckDef } from "./types.ts";

export interface SeedRule {
  /** API section, as the checks name it ("Endpoints/Send a message"). */
  section: string;
  /** The sentence or table row, quoted short. */
  rule: string;
  /** Check ids that fail on a deployment breaking the rule. */
  checks?: string[];
  /** Why no check can verify it (exactly one of checks and none). */
  none?: string;
  /** What the checks leave out, when they verify only part of the rule. */
  note?: string;
}

/** Reasons shared by many rows. */
const NOT_SHOWN = "not shown by the API: nothing to verify";
const SETUP =
  "how a deployment is set up, not a behaviour of the API: the suite is given the base URL and names";
const WEB = "happens in the web interface, outside the API";
const CALLER = "a rule for the caller; what the service does otherwise is not stated";
const ONE_DEPLOYMENT = "compares deployments; the suite sees one";

const CONV = "Conventions";
const DOES = "What the service does";
const AGENT = "Resources/Agent";
const CONVERSATION = "Resources/Conversation";
const TRANSCRIPT = "Resources/Transcript";
const RESOURCES = "Resources";
const STATES = "States and transitions";
const SEND = "Endpoints/Send a message";
const IDS = "Endpoints/Send a message: conversation id resolution";
const ROUTED = "Endpoints/Model-routed send";
const ENDPOINTS = "Endpoints";
const LIST = "Endpoints/List conversations";
const FORK = "Endpoints/Fork a conversation";
const AUTH = "Authentication";
const EVENTS = "Events";
const ERRORS = "Errors";
const LIMITS = "Limits";
const VERSIONING = "Versioning";

export const seedRules: SeedRule[] = [
  // ---- Conventions
  {
    section: CONV,
    rule: "`{base_url}`: a fixed HTTPS host (hosted); `http://<server-ip>:3001` by default (self-hosted)",
    none: SETUP,
  },
  {
    section: CONV,
    rule: "the API port is 3001, the web interface uses 3000, the operator may change the API port",
    none: SETUP,
  },
  {
    section: CONV,
    rule: "TLS profile: `https://<your-domain>`, a reverse proxy forwards `/api/` to the API server",
    none: SETUP,
  },
  {
    section: CONV,
    rule: "Paths are identical in all deployments",
    checks: ["SEND-200-STREAM", "MODELS-SHAPE", "GET-SHAPE"],
    note: "the API's paths work on the deployment checked; other deployments are not compared",
  },
  {
    section: CONV,
    rule: "A repository-backed agent is named `<owner>-<repo>` in lowercase, `/` replaced by `-`",
    none: `${SETUP} (--repo-agent)`,
  },
  { section: CONV, rule: "A storage-backed agent is named with the name its creator gave it", none: SETUP },
  {
    section: CONV,
    rule: "Timestamps are ISO 8601 strings in UTC with milliseconds",
    checks: ["GET-SHAPE", "LIST-TIMESTAMPS"],
  },

  // ---- What the service does
  {
    section: DOES,
    rule: "A call to an agent runs one full agent turn; files, repository, skills, tools and secrets are live in a sandbox",
    checks: ["SEND-TOOL-BLOCKS", "STATE-RESUME-KEEPS-FILES"],
    note: "skills and secrets are not observable through the API",
  },
  {
    section: DOES,
    rule: "The result is streamed as server-sent events in the messages API's format, so standard clients connect",
    checks: ["SEND-OFFICIAL-CLIENT", "SSE-EVENT-SCHEMA"],
  },
  {
    section: DOES,
    rule: "The result is streamed back: each part reaches the client as it is produced, not when the turn ends",
    checks: ["SSE-STREAMED-INCREMENTAL", "SSE-IDLE-SURVIVES"],
    note: "judged by arrival times of a turn whose tool command sleeps; SSE-IDLE-SURVIVES runs with --idle-seconds",
  },
  {
    section: DOES,
    rule: "1. Conversation state is kept on the server; one new user message per call; the thread is `metadata.conversation_id`",
    checks: ["CONVID-OWN-RESUMES", "SEND-NEWEST-USER-ONLY"],
  },
  {
    section: DOES,
    rule: "1. The agent resumes with its full prior context, including files it wrote; no history is replayed by the caller",
    checks: ["CONVID-OWN-RESUMES", "STATE-RESUME-KEEPS-FILES"],
  },
  {
    section: DOES,
    rule: "2. Transcripts are stored durably, so a conversation can be resumed days or weeks later",
    none: "not observable within one run (days or weeks)",
  },
  {
    section: DOES,
    rule: "3. Calls made with an API key are read-only with respect to a connected repository unless the caller asks otherwise",
    checks: ["REPO-READ-ONLY-DEFAULT", "REPO-READ-ONLY-FALSE-PUSHES"],
  },
  {
    section: DOES,
    rule: "4. Conversations can be forked, shared read-only with the workspace, listed, read as a transcript, and deleted",
    checks: [
      "STATE-FORK-CHILD",
      "STATE-SHARE-TRUE",
      "CONVID-OTHERS-SHARED-403",
      "LIST-SHAPE-ORDER",
      "TRANSCRIPT-SHAPE",
      "STATE-DELETE",
    ],
  },
  {
    section: DOES,
    rule: "5. A deployed flow is an HTTP endpoint that takes named input variables",
    checks: ["FLOW-INVOKE"],
  },

  // ---- Resources
  { section: AGENT, rule: "Fields of the agent resource: not shown", none: NOT_SHOWN },
  { section: AGENT, rule: "it has a default model", checks: ["SEND-MODEL-DEFAULT"] },
  {
    section: AGENT,
    rule: "it can be repository-backed or storage-backed",
    checks: ["SEND-STORAGE-AGENT", "REPO-READ-ONLY-DEFAULT"],
  },
  { section: AGENT, rule: "it belongs to one workspace", checks: ["AUTH-404-FOREIGN-AGENT"] },
  {
    section: AGENT,
    rule: "it can have named automations (an active automation carries a stored prompt and a model)",
    checks: ["SEND-AUTOMATION-BODY-WINS", "FORK-AUTOMATION-RECORDED"],
  },
  {
    section: CONVERSATION,
    rule: "`id`: any string chosen by the caller, or generated when omitted; need not be a UUID",
    checks: ["CONVID-UNKNOWN-VERBATIM", "CONVID-OMITTED-GENERATED", "CONSIST-ID-CHARACTERS"],
  },
  {
    section: CONVERSATION,
    rule: "`title`: derived from the first prompt at creation",
    checks: ["GET-TITLE-FROM-PROMPT"],
  },
  { section: CONVERSATION, rule: "`title`: never changed afterwards", checks: ["GET-TITLE-STABLE"] },
  {
    section: CONVERSATION,
    rule: "`channel`: `INTERACTIVE`, `NOTEBOOK`, `SLACK`, `EMAIL`",
    checks: ["GET-SHAPE", "LIST-CHANNEL-FILTER"],
    note: "every response is also validated against the spec's enum",
  },
  {
    section: CONVERSATION,
    rule: "`shared`: `false` by default (private to creator)",
    checks: ["STATE-CREATED-PRIVATE"],
  },
  {
    section: CONVERSATION,
    rule: "`is_owner`: whether the caller owns it",
    checks: [
      "STATE-CREATED-PRIVATE",
      "STATE-SHARE-TRUE",
      "STATE-SHARED-MEMBER-FORK",
      "CONSIST-SHARED-MEMBER-VIEW",
    ],
  },
  {
    section: CONVERSATION,
    rule: "`agent_session_id`: null until the server has recorded it after a turn",
    checks: ["STATE-SESSION-RECORDED", "STATE-SESSION-NULL-AT-CLOSE"],
  },
  {
    section: CONVERSATION,
    rule: "`agent_session_id`: cleared to null when a resumed turn produced no output",
    checks: ["STATE-EMPTY-TURN-CLEARS"],
  },
  {
    section: CONVERSATION,
    rule: "`parent_conversation_id`: set on forks",
    checks: ["STATE-FORK-CHILD", "FORK-CUSTOM-ID", "CONSIST-FORK-READBACK"],
  },
  { section: CONVERSATION, rule: "`forked_at_turn_index`: set on forks", checks: ["STATE-FORK-CHILD"] },
  {
    section: CONVERSATION,
    rule: "`created_at`, `updated_at`: timestamps",
    checks: ["GET-SHAPE", "LIST-TIMESTAMPS", "MEANING-TIMESTAMPS-MOVE"],
  },
  {
    section: CONVERSATION,
    rule: "`turn_count`: integer",
    checks: ["GET-SHAPE", "GET-TURN-COUNT"],
    note: "evident meaning: the number of turns run on the conversation",
  },
  {
    section: CONVERSATION,
    rule: "The single-conversation fetch returns an object with a `conversation` property",
    checks: ["GET-SHAPE"],
  },
  {
    section: CONVERSATION,
    rule: "Fields of that object other than `agent_session_id`: not shown",
    none: NOT_SHOWN,
  },
  {
    section: CONVERSATION,
    rule: "Visible to a caller: conversations the caller owns",
    checks: ["LIST-SHAPE-ORDER", "GET-SHAPE"],
  },
  {
    section: CONVERSATION,
    rule: "Visible to a caller: conversations shared with the workspace",
    checks: ["LIST-VISIBILITY", "AUTH-VIEWER-READS", "STATE-SHARE-TRUE"],
  },
  {
    section: CONVERSATION,
    rule: "Visible to a caller: conversations owned by a channel (chat channel, e-mail)",
    checks: ["LIST-CHANNEL-OWNED-VISIBLE"],
  },
  {
    section: CONVERSATION,
    rule: "(and no others: another member's private conversation is not visible)",
    checks: ["LIST-VISIBILITY", "CONVID-OTHERS-UNSHARED-404", "ERR-404-PRIVATE-ROUTES"],
  },
  {
    section: TRANSCRIPT,
    rule: "`conversation`, `messages` (messages-API shape), `events` (raw agent event stream)",
    checks: ["TRANSCRIPT-SHAPE", "CONSIST-ROUTES-AGREE", "MEANING-TRANSCRIPT-ORDER"],
    note: "MEANING-TRANSCRIPT-ORDER: the messages-API shape is a conversation in the order it ran (oldest first)",
  },
  { section: TRANSCRIPT, rule: "Elements of `events[]`: not shown", none: NOT_SHOWN },
  {
    section: TRANSCRIPT,
    rule: 'Message: `role` `user` or `assistant`; `content` blocks `{type: "text", text}`',
    checks: ["TRANSCRIPT-SHAPE"],
  },
  {
    section: TRANSCRIPT,
    rule: "`author_user_id`, `author_name`: present on user messages",
    checks: ["TRANSCRIPT-SHAPE", "MEANING-TRANSCRIPT-AUTHOR"],
    note: "MEANING-TRANSCRIPT-AUTHOR: the id's evident meaning, one per sender",
  },
  {
    section: TRANSCRIPT,
    rule: "`is_compact_summary`: `true` on a `user` message that represents an automatic compaction",
    checks: ["COMPACTION-FLAGGED"],
  },
  {
    section: TRANSCRIPT,
    rule: "Clients render it as a context-compacted notice, not as a user turn",
    none: "a rule for clients",
  },
  {
    section: RESOURCES,
    rule: "Fork result: `conversation_id`, `parent_conversation_id`, `forked_at_turn`, `agent_session_id`",
    checks: ["FORK-CUSTOM-ID", "STATE-FORK-CHILD"],
  },
  {
    section: RESOURCES,
    rule: "Model entry: `type` always `model`, `id`, `display_name`",
    checks: ["MODELS-SHAPE"],
  },
  {
    section: RESOURCES,
    rule: "Model entry `id`: usable in the `model` field",
    checks: ["SEND-MODEL-SELECTS", "FORK-MODEL-RECORDED"],
  },
  {
    section: RESOURCES,
    rule: "Attachment `name`: sanitized to a safe basename and de-duplicated",
    checks: ["SEND-ATTACHMENT-SANITIZED", "SEND-ATTACHMENT-DEDUP"],
  },
  { section: RESOURCES, rule: "Attachment `mediaType`: media type of the file", none: CALLER },
  { section: RESOURCES, rule: "Attachment `dataBase64`: base64 only, no `data:` prefix", none: CALLER },
  {
    section: RESOURCES,
    rule: "Compaction info: `{compacted: <boolean>, summary: <string>}`",
    checks: ["COMPACTION-SHAPE"],
  },

  // ---- States and transitions
  {
    section: STATES,
    rule: "send-message, `conversation_id` omitted → created, private, `agent_session_id` null; id in `X-Conversation-Id`",
    checks: ["CONVID-OMITTED-GENERATED", "STATE-CREATED-PRIVATE", "STATE-SESSION-NULL-AT-CLOSE"],
  },
  {
    section: STATES,
    rule: "send-message, unknown `conversation_id` → created with exactly that id",
    checks: ["CONVID-UNKNOWN-VERBATIM"],
  },
  {
    section: STATES,
    rule: "send-message, own id on this agent → resumed; the turn continues prior context",
    checks: ["CONVID-OWN-RESUMES"],
  },
  {
    section: STATES,
    rule: "turn stream closes, output → `agent_session_id` non-null, recorded a few seconds after",
    checks: ["STATE-SESSION-RECORDED", "STATE-SESSION-NULL-AT-CLOSE"],
    note: '"output" is a block the stream shows: a turn whose stream carries no block (a refusal, an empty reply) is a turn without output for every check; a block the stream does not show (redacted thinking, tool blocks without stream_tool_calls) counts as no output. Such a turn is not sent again (a resend into the same conversation would judge another history): every check that reads it is inconclusive, naming the cause, except those that asked for silence, and SEND-200-STREAM, which owns "turns answer", tries a silent hello again in a new conversation and fails when its 4 tries all end without output',
  },
  {
    section: STATES,
    rule: "resumed turn ends with no output → `agent_session_id` null; next turn starts a clean session",
    checks: ["STATE-EMPTY-TURN-CLEARS", "STATE-EMPTY-TURN-CLEAN-SESSION"],
    note: "no output: no block in the stream; a block the stream does not show counts as none",
  },
  {
    section: STATES,
    rule: "send right after a stream closed, session not yet recorded → no memory of the previous turn; no error",
    checks: ["STATE-RACE-NO-MEMORY", "STATE-RACE-MEMORY-LOST"],
  },
  {
    section: STATES,
    rule: "share toggle `shared` true by the owner → shared; members may read and fork; sending a turn gives 403",
    checks: [
      "STATE-SHARE-TRUE",
      "STATE-SHARED-MEMBER-FORK",
      "CONVID-OTHERS-SHARED-403",
      "AUTH-VIEWER-READS",
      "CONSIST-SHARE-IDEMPOTENT",
    ],
  },
  {
    section: STATES,
    rule: "share toggle `shared` false by the owner → private again",
    checks: ["STATE-SHARE-FALSE", "CONSIST-SHARE-IDEMPOTENT"],
  },
  {
    section: STATES,
    rule: "fork, caller may read it → child created, private, owned by caller; parent unchanged",
    checks: ["STATE-FORK-CHILD", "STATE-SHARED-MEMBER-FORK"],
  },
  {
    section: STATES,
    rule: "fork → the child's first turn answers from parent context up to `at_turn`",
    checks: ["STATE-FORK-CONTEXT", "FORK-AT-TURN-CUTS", "FORK-DEFAULT-ALL-TURNS", "STATE-FORK-AT-TURN"],
  },
  {
    section: STATES,
    rule: "delete by the owner (no admin override) → removed; 204",
    checks: [
      "STATE-DELETE",
      "AUTH-OWNER-ONLY-DELETE",
      "CONSIST-DELETED-EVERYWHERE",
      "CONSIST-DELETED-ID-NEW",
    ],
    note: "CONSIST-DELETED-ID-NEW: a removed conversation's id is an unknown id again (created anew, nothing of the old one)",
  },
  {
    section: STATES,
    rule: "agent sandbox: kept warm for a while, then reclaimed; the first turn after reclaim is slower; no context is lost",
    none: "the retention period is not shown and cannot be waited out through the API",
    note: "STATE-RESUME-KEEPS-FILES sees files kept across turns",
  },
  {
    section: STATES,
    rule: "Sandbox retention period; other conversation states and moves: not shown",
    none: NOT_SHOWN,
  },

  // ---- Send a message
  {
    section: ENDPOINTS,
    rule: "All endpoints use the header described under Authentication",
    checks: ["AUTH-401-MISSING", "AUTH-401-EVERY-ROUTE"],
  },
  {
    section: SEND,
    rule: "`POST …/v1/messages` runs one agent turn and streams the result",
    checks: ["SEND-200-STREAM"],
  },
  {
    section: SEND,
    rule: "Request body (JSON)",
    checks: ["SEND-MALFORMED-JSON"],
    note: "the status for a body that is not JSON is not shown (INFO)",
  },
  { section: SEND, rule: "`messages`: required, non-empty", checks: ["LIMIT-MESSAGES-NONEMPTY"] },
  {
    section: SEND,
    rule: 'Only the newest element with `role: "user"` is used',
    checks: ["SEND-NEWEST-USER-ONLY"],
  },
  {
    section: SEND,
    rule: "`content` is a string or an array of text blocks joined with blank lines",
    checks: ["SEND-CONTENT-BLOCKS", "CONSIST-CONTENT-JOIN"],
    note: "the join is judged on the transcript's user message, where the stored text shows it",
  },
  { section: SEND, rule: "Non-text blocks are not read", checks: ["SEND-CONTENT-BLOCKS"] },
  {
    section: SEND,
    rule: "`stream`: callers send `true`; `false` still yields an event stream",
    checks: ["SEND-STREAM-FALSE"],
  },
  { section: SEND, rule: "`model`: one of the ids from the models list", checks: ["SEND-MODEL-SELECTS"] },
  {
    section: SEND,
    rule: "`model`: falls back to the automation's model",
    none: "the automation's model is not an input of the suite, so a fallback to it cannot be told from the agent's default",
    note: "FORK-AUTOMATION-RECORDED and SEND-AUTOMATION-BODY-WINS read it from a turn",
  },
  { section: SEND, rule: "`model`: then the agent's default", checks: ["SEND-MODEL-DEFAULT"] },
  {
    section: SEND,
    rule: "`system`: appended to the agent's own instructions; never replaces them",
    checks: ["SEND-SYSTEM-APPLIED", "SEND-SYSTEM-APPENDS"],
    note: "'never replaces' rests on the agent repeating its instructions (INFO)",
  },
  {
    section: SEND,
    rule: "Only `messages`, `stream`, `model`, `system`, `metadata` are read; other messages-API fields are accepted and ignored",
    checks: ["SEND-IGNORED-FIELDS"],
  },
  { section: SEND, rule: "`max_tokens` is not required", checks: ["SEND-200-STREAM"] },
  {
    section: SEND,
    rule: "Client-side tool definitions cannot be injected",
    checks: ["SEND-NO-CLIENT-TOOLS"],
  },
  {
    section: SEND,
    rule: "`metadata.conversation_id`: resume target; generated by default",
    checks: ["CONVID-OMITTED-GENERATED", "CONVID-OWN-RESUMES"],
  },
  {
    section: SEND,
    rule: "`metadata.stream_tool_calls` (default `false`): adds `tool_use` and `tool_result` blocks",
    checks: [
      "SEND-TOOL-BLOCKS",
      "SEND-TOOL-BLOCKS-DEFAULT-OFF",
      "SSE-TOOL-BLOCKS-GATED",
      "SEND-RESUMED-BODY-READ",
      "SSE-STOP-REASON-TOOLS",
    ],
    note: "the flag only adds blocks: a turn with it ends as one without it (SSE-STOP-REASON-TOOLS: `end_turn`); every turn's body is read, a resumed turn's too (SEND-RESUMED-BODY-READ: system, stream_tool_calls, model, attachments)",
  },
  {
    section: SEND,
    rule: "`metadata.attachments`: at most 10 files and 10 MiB decoded",
    checks: ["LIMIT-ATTACHMENT-COUNT", "LIMIT-ATTACHMENT-SIZE"],
  },
  {
    section: SEND,
    rule: "each attachment is written to `.uploads/<name>` and announced to the agent",
    checks: ["SEND-ATTACHMENT-READ", "SEND-ATTACHMENT-DEDUP"],
  },
  {
    section: SEND,
    rule: "malformed entries and anything past the caps are dropped silently",
    checks: ["SEND-ATTACHMENT-MALFORMED-DROPPED", "LIMIT-ATTACHMENT-COUNT", "LIMIT-ATTACHMENT-SIZE"],
  },
  {
    section: SEND,
    rule: "Attachments are never committed to a connected repository",
    checks: ["REPO-ATTACHMENTS-NOT-COMMITTED"],
  },
  {
    section: SEND,
    rule: "`metadata.read_only` (default `true` for API-key calls): repo readable, the turn never commits or pushes",
    checks: ["REPO-READ-ONLY-DEFAULT"],
  },
  {
    section: SEND,
    rule: "`read_only: false`: a changing turn stages all, commits as a fixed agent author, pushes to the default branch",
    checks: ["REPO-READ-ONLY-FALSE-PUSHES"],
  },
  {
    section: SEND,
    rule: "`metadata.isolated`: a throwaway sandbox with no repo clone and no workspace files",
    checks: ["SEND-ISOLATED"],
    note: "judged on the conversation's files; the repository side is not checked",
  },
  {
    section: SEND,
    rule: "`metadata.automation`: its stored prompt and model become defaults for the turn; values in the body win",
    checks: ["SEND-AUTOMATION-BODY-WINS"],
    note: "the stored prompt is not an input of the suite",
  },
  {
    section: SEND,
    rule: "`metadata.automation`: an unknown name is ignored",
    checks: ["SEND-AUTOMATION-UNKNOWN-IGNORED"],
  },
  {
    section: SEND,
    rule: '`metadata.delivery`: `"sync"` (default) is supported',
    checks: ["SEND-DELIVERY-SYNC"],
  },
  { section: SEND, rule: '`metadata.delivery`: `"async"` returns 501', checks: ["ERR-501-ASYNC"] },
  {
    section: SEND,
    rule: "`metadata.builder`, `metadata.test`: internal, used by the web interface; not for integrations",
    none: WEB,
  },
  {
    section: SEND,
    rule: "Storage-backed agents have no repository and never push",
    none: "a storage-backed agent has no repository the suite could watch",
    note: "SEND-STORAGE-AGENT runs a turn on one",
  },
  {
    section: SEND,
    rule: "Storage-backed agents' working files are restored fresh each turn and not written back",
    none: "the agent's stored files are not readable through the API",
  },
  {
    section: SEND,
    rule: "A turn's durable output is its outputs directory, published to the workspace store",
    none: "the workspace store has no route in the API",
  },
  {
    section: IDS,
    rule: "omitted → new conversation; id in `X-Conversation-Id`",
    checks: ["CONVID-OMITTED-GENERATED"],
  },
  { section: IDS, rule: "unknown id → created with that id verbatim", checks: ["CONVID-UNKNOWN-VERBATIM"] },
  { section: IDS, rule: "caller's own, on this agent → resumes", checks: ["CONVID-OWN-RESUMES"] },
  {
    section: IDS,
    rule: "belongs to a different agent or workspace → 404 with message `Conversation not found`",
    checks: ["CONVID-OTHER-AGENT-404", "CONVID-OTHER-WORKSPACE-404"],
  },
  {
    section: IDS,
    rule: "someone else's, not shared → 404 (existence never leaked)",
    checks: ["CONVID-OTHERS-UNSHARED-404"],
  },
  {
    section: IDS,
    rule: "someone else's, shared with the workspace → 403",
    checks: ["CONVID-OTHERS-SHARED-403"],
  },
  {
    section: SEND,
    rule: "Response: `200`, `Content-Type: text/event-stream`, header `X-Conversation-Id`",
    checks: ["SEND-200-STREAM", "SSE-CONTENT-TYPE"],
  },

  // ---- Other endpoints
  {
    section: ROUTED,
    rule: "`POST …/api/agents/v1/messages`: same body and behaviour as send-message",
    checks: [
      "ROUTED-BARE-NAME",
      "ROUTED-PREFIX",
      "CONSIST-ROUTED-SEND",
      "CONSIST-ROUTED-SAME-RULES",
      "CONSIST-ROUTED-REFUSALS",
    ],
  },
  {
    section: ROUTED,
    rule: "`model` holds a routing string `<routing_prefix>--<agent>`",
    checks: ["ROUTED-PREFIX"],
  },
  { section: ROUTED, rule: "… or a bare agent name", checks: ["ROUTED-BARE-NAME"] },
  {
    section: ROUTED,
    rule: "The literal routing prefix is omitted here",
    none: `${NOT_SHOWN} (--routing-prefix gives it)`,
  },
  {
    section: "Endpoints/List models",
    rule: "Response `200`: `{data: [<model entry>], has_more: <boolean>}`",
    checks: ["MODELS-SHAPE"],
  },
  {
    section: "Endpoints/List models",
    rule: "The agent's configured default model is first",
    checks: ["SEND-MODEL-DEFAULT", "CONSIST-MODELS-EVERY-KEY"],
  },
  {
    section: "Endpoints/List models",
    rule: "Same authentication and error behaviour as send-message",
    checks: [
      "AUTH-KEY-WORKS",
      "AUTH-401-MISSING",
      "AUTH-401-UNKNOWN",
      "AUTH-401-REVOKED",
      "AUTH-404-FOREIGN-AGENT",
    ],
  },
  {
    section: LIST,
    rule: "`channel`: `INTERACTIVE`, `NOTEBOOK`, `SLACK`, `EMAIL`",
    checks: ["LIST-CHANNEL-FILTER"],
  },
  { section: LIST, rule: "`channel_id`", checks: ["LIST-CHANNEL-ID-FILTER"] },
  { section: LIST, rule: "`notebook_path`", checks: ["LIST-NOTEBOOK-PATH-FILTER"] },
  { section: LIST, rule: "`automation`: automation name", checks: ["LIST-AUTOMATION-FILTER"] },
  { section: LIST, rule: "`since`: ISO 8601", checks: ["LIST-SINCE-FILTER", "CONSIST-SINCE-FORMS"] },
  {
    section: LIST,
    rule: "`limit`: 1 to 200, default 50",
    checks: ["LIMIT-LIST-RANGE", "LIMIT-LIST-DEFAULT-50", "LIMIT-LIST-OUT-OF-RANGE"],
  },
  {
    section: LIST,
    rule: "Response `{conversations: [<conversation>]}`, ordered newest activity first",
    checks: ["LIST-SHAPE-ORDER", "MEANING-LIST-NEWEST-ACTIVITY"],
    note: "a turn is activity; nothing else is assumed to be",
  },
  { section: LIST, rule: "Paging beyond `limit`: not shown", none: NOT_SHOWN },
  {
    section: "Endpoints/Get a conversation",
    rule: "Response: `{conversation: <conversation>}`",
    checks: ["GET-SHAPE"],
  },
  {
    section: "Endpoints/Get a transcript",
    rule: "Response: the transcript object",
    checks: ["TRANSCRIPT-SHAPE"],
  },
  {
    section: "Endpoints/Get last compaction",
    rule: "Response: `{compacted, summary}`; it tells an empty turn from a compaction step",
    checks: ["COMPACTION-SHAPE", "COMPACTION-FLAGGED", "COMPACTION-NOT-EMPTY-TURN"],
  },
  {
    section: "Endpoints/Toggle sharing",
    rule: "Body must be exactly one property `shared` holding a boolean",
    checks: ["SHARE-BODY-STRICT"],
    note: "a rule for the caller; refusing other bodies is SHOULD",
  },
  { section: "Endpoints/Toggle sharing", rule: "Owner only", checks: ["AUTH-OWNER-ONLY-SHARE"] },
  { section: "Endpoints/Toggle sharing", rule: "Response body: not shown", none: NOT_SHOWN },
  { section: FORK, rule: "`at_turn` (default all turns)", checks: ["FORK-DEFAULT-ALL-TURNS"] },
  {
    section: FORK,
    rule: "`at_turn`: copies history up to this turn",
    checks: ["FORK-AT-TURN-CUTS", "STATE-FORK-AT-TURN"],
    note: "whether turns count from 0 or 1 is not shown (STATE-FORK-AT-TURN is INFO)",
  },
  {
    section: FORK,
    rule: "`at_turn`: clamped to the conversation's length",
    checks: ["FORK-AT-TURN-CLAMPED"],
  },
  {
    section: FORK,
    rule: "`conversation_id`: id for the child (auto-generated by default)",
    checks: ["FORK-CUSTOM-ID"],
  },
  { section: FORK, rule: "`conversation_id`: 409 if taken", checks: ["ERR-409-FORK-TAKEN"] },
  {
    section: FORK,
    rule: "`model` (inherited): recorded on the child as a default for its future turns",
    checks: ["FORK-MODEL-RECORDED", "FORK-MODEL-INHERITED"],
  },
  {
    section: FORK,
    rule: "`automation` (inherited): recorded on the child as a default for its future turns",
    checks: ["FORK-AUTOMATION-RECORDED"],
    note: "inheritance is judged on the model (FORK-MODEL-INHERITED)",
  },
  {
    section: FORK,
    rule: "Response: the fork result; the child is owned by the caller and private",
    checks: ["FORK-CUSTOM-ID", "STATE-FORK-CHILD"],
  },
  {
    section: "Endpoints/Delete a conversation",
    rule: "Owner only. Response `204 No Content`",
    checks: ["STATE-DELETE", "AUTH-OWNER-ONLY-DELETE"],
  },
  {
    section: "Endpoints/Invoke a deployed flow",
    rule: "`POST {flow_url}/apps/{app_id}`, `X-API-Key`, JSON `{input_vars: {…}}`",
    checks: ["FLOW-INVOKE"],
  },
  {
    section: "Endpoints/Invoke a deployed flow",
    rule: "Response body shape; routes to create, deploy or list flows: not shown",
    none: NOT_SHOWN,
  },

  // ---- Authentication
  {
    section: AUTH,
    rule: "1. Every request carries the header `X-Api-Key: <API_KEY>`",
    checks: ["AUTH-KEY-WORKS", "AUTH-401-MISSING", "AUTH-401-EVERY-ROUTE", "CONSIST-KEY-HEADER-CASE"],
  },
  {
    section: AUTH,
    rule: "1. The flow endpoint uses the same header, written `X-API-Key`",
    checks: ["FLOW-INVOKE", "FLOW-NO-KEY"],
    note: "without it, or with an unknown key, 401 as on every route (Authentication 4; FLOW-NO-KEY)",
  },
  {
    section: AUTH,
    rule: "2. A key is created in the web interface and belongs to the workspace selected at creation",
    none: WEB,
  },
  {
    section: AUTH,
    rule: "2. A key reaches only that workspace's agents; an agent in another workspace gives 404",
    checks: ["AUTH-404-FOREIGN-AGENT", "CONVID-OTHER-WORKSPACE-404"],
  },
  {
    section: AUTH,
    rule: "2. No header selects a workspace per request",
    none: "an absence: a header the API does not name cannot be probed",
  },
  {
    section: AUTH,
    rule: "3. Running a turn needs Admin, Builder or Operator",
    checks: ["SEND-200-STREAM", "AUTH-OPERATOR-SENDS"],
  },
  { section: AUTH, rule: "3. A Viewer key can read conversations", checks: ["AUTH-VIEWER-READS"] },
  {
    section: AUTH,
    rule: "3. A Viewer key gets 403 when sending a message",
    checks: ["AUTH-403-VIEWER-SEND"],
  },
  {
    section: AUTH,
    rule: "4. A missing or unrecognized key gives 401",
    checks: ["AUTH-401-MISSING", "AUTH-401-UNKNOWN", "AUTH-401-EVERY-ROUTE"],
  },
  {
    section: AUTH,
    rule: '4. A revoked key gives 401 with body `{"message": "API key has been revoked"}`',
    checks: ["AUTH-401-REVOKED"],
  },
  {
    section: AUTH,
    rule: "5. Only the conversation owner may toggle sharing or delete, with no admin override",
    checks: ["AUTH-OWNER-ONLY-SHARE", "AUTH-OWNER-ONLY-DELETE"],
  },
  {
    section: AUTH,
    rule: "6. A deployed-flow key comes from a generate-a-key link on the flow's API tab",
    none: WEB,
  },
  { section: AUTH, rule: "Permissions of each role for other operations: not shown", none: NOT_SHOWN },

  // ---- Events
  {
    section: EVENTS,
    rule: "Events are pushed only as the server-sent event stream of a turn",
    checks: ["SSE-CONTENT-TYPE"],
  },
  {
    section: EVENTS,
    rule: "The stream ends at `message_stop`; there is no `[DONE]` sentinel",
    checks: ["SSE-STOP-LAST", "SSE-AFTER-STOP", "SSE-DONE-SENTINEL"],
  },
  {
    section: EVENTS,
    rule: "Each event is a line `event: <name>` followed by a line `data: <JSON>`",
    checks: ["SSE-FRAME-LINES", "SSE-FRAME-UNTERMINATED", "SSE-DATA-JSON", "SSE-TYPE-MATCHES-EVENT"],
  },
  {
    section: EVENTS,
    rule: "Sequence of a turn: `message_start`, blocks, `message_delta`, `message_stop` (and no other events)",
    checks: [
      "SSE-FIRST-MESSAGE-START",
      "SSE-MESSAGE-START-ONCE",
      "SSE-UNKNOWN-EVENT",
      "SSE-EMPTY-TURN-GRAMMAR",
      "SSE-NO-PING",
    ],
    note: "ping frames are not in the table (SSE-NO-PING is INFO)",
  },
  {
    section: EVENTS,
    rule: "Each event's data has the table's shape (`message_start.message: {id, model, usage}`, …)",
    checks: ["SSE-EVENT-SCHEMA", "MEANING-MESSAGE-START"],
    note: "evident meaning: `message.id` names the turn's message, a different one per turn (explorer: every turn of the run)",
  },
  {
    section: EVENTS,
    rule: "`content_block_start` … with an empty text or thinking string",
    checks: ["SSE-START-EMPTY"],
  },
  {
    section: EVENTS,
    rule: "`message_delta`: `{type, delta: {stop_reason}, usage}`",
    checks: ["SSE-MESSAGE-DELTA"],
  },
  { section: EVENTS, rule: '`error`: `{error: {type: "api_error", message}}`', checks: ["SSE-ERROR-EVENT"] },
  {
    section: EVENTS,
    rule: "1. Block types `text`, `thinking` (followed by a `signature_delta`), and `tool_use`/`tool_result` only when `stream_tool_calls` is true",
    checks: ["SSE-BLOCK-TYPE", "SSE-THINKING-SIGNATURE", "SSE-TOOL-BLOCKS-GATED"],
  },
  {
    section: EVENTS,
    rule: "1. `tool_result` carries `tool_use_id`, `content`, `is_error`",
    checks: ["SEND-TOOL-BLOCKS"],
  },
  {
    section: EVENTS,
    rule: "2. Delta types: `text_delta`, `thinking_delta`, `signature_delta`, `input_json_delta`",
    checks: ["SSE-DELTA-TYPE", "SSE-TOOL-INPUT-JSON"],
  },
  {
    section: EVENTS,
    rule: "3. Blocks arrive whole: one `content_block_start`, one complete delta, one `content_block_stop`",
    checks: ["SSE-BLOCK-TRIPLE"],
  },
  { section: EVENTS, rule: "3. `index` is a running counter for the turn", checks: ["SSE-INDEX-RUNNING"] },
  {
    section: EVENTS,
    rule: "4. `message_delta.usage`: `input_tokens`, `output_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`, `total_cost_usd`",
    checks: ["SSE-USAGE-FIVE-FIELDS", "MEANING-USAGE-COUNTS"],
    note: "evident meaning: a turn with output counts output tokens and some input; `total_cost_usd` is dollars, within what the dearest list prices charge for the turn's tokens (not cents); the explorer judges it on every turn, resumed ones included",
  },
  {
    section: EVENTS,
    rule: "5. A failure after the stream opens arrives as an `error` event on a 200 response",
    checks: ["SSE-ERROR-EVENT"],
  },
  {
    section: EVENTS,
    rule: "5. … on a response already sent as 200: the status and headers go out while the turn runs",
    checks: ["SSE-HEADERS-BEFORE-END"],
  },
  {
    section: EVENTS,
    rule: "6. The stop reason seen is `end_turn`; others: not shown",
    checks: ["SSE-STOP-REASON", "SSE-STOP-REASON-TOOLS"],
    note: "INFO: other stop reasons are not shown; but `stream_tool_calls` changes only the blocks, so a turn with it ends as the deployment's turns without it do (MUST where those end `end_turn`)",
  },

  // ---- Errors
  {
    section: ERRORS,
    rule: "401: missing or unrecognized key",
    checks: ["AUTH-401-MISSING", "AUTH-401-UNKNOWN", "AUTH-401-EVERY-ROUTE"],
  },
  {
    section: ERRORS,
    rule: '401: revoked key; body `{"message": "API key has been revoked"}`',
    checks: ["AUTH-401-REVOKED"],
  },
  { section: ERRORS, rule: "403: Viewer-role key sends a message", checks: ["AUTH-403-VIEWER-SEND"] },
  {
    section: ERRORS,
    rule: "403: sending a turn into another member's conversation shared with the workspace",
    checks: ["CONVID-OTHERS-SHARED-403"],
  },
  { section: ERRORS, rule: "404: agent in another workspace", checks: ["AUTH-404-FOREIGN-AGENT"] },
  {
    section: ERRORS,
    rule: "404: conversation on a different agent or workspace (message `Conversation not found`)",
    checks: ["CONVID-OTHER-AGENT-404", "CONVID-OTHER-WORKSPACE-404", "ERR-404-OTHER-AGENT-ROUTES"],
  },
  {
    section: ERRORS,
    rule: "404: another user's unshared conversation",
    checks: ["CONVID-OTHERS-UNSHARED-404", "ERR-404-PRIVATE-ROUTES"],
  },
  {
    section: ERRORS,
    rule: "409: fork with a `conversation_id` that is already taken",
    checks: ["ERR-409-FORK-TAKEN"],
  },
  { section: ERRORS, rule: '501: `metadata.delivery` is `"async"`', checks: ["ERR-501-ASYNC"] },
  {
    section: ERRORS,
    rule: "200 with `error` event: failure after the stream opened",
    checks: ["SSE-ERROR-EVENT"],
  },
  {
    section: ERRORS,
    rule: "Silent: a message sent before `agent_session_id` is recorded resumes with no memory",
    checks: ["STATE-RACE-NO-MEMORY", "STATE-RACE-MEMORY-LOST"],
  },
  {
    section: ERRORS,
    rule: "Silent: malformed or excess attachments are dropped",
    checks: ["SEND-ATTACHMENT-MALFORMED-DROPPED", "LIMIT-ATTACHMENT-COUNT", "LIMIT-ATTACHMENT-SIZE"],
  },
  {
    section: ERRORS,
    rule: "Silent: an unknown `automation` name is ignored",
    checks: ["SEND-AUTOMATION-UNKNOWN-IGNORED"],
  },
  {
    section: "Errors/Client guidance",
    rule: "Poll the single-conversation fetch (0.25 s) until `agent_session_id` is non-null; bound the wait",
    checks: ["GUIDE-POLL-RESTORES-MEMORY"],
  },
  {
    section: "Errors/Client guidance",
    rule: "Retrying a conversation that returned nothing is the correct recovery",
    checks: ["GUIDE-RETRY-AFTER-EMPTY"],
  },
  { section: ERRORS, rule: "Error body shape for other statuses: not shown", none: NOT_SHOWN },

  // ---- Limits
  { section: LIMITS, rule: "Attachments per turn: 10 files", checks: ["LIMIT-ATTACHMENT-COUNT"] },
  { section: LIMITS, rule: "Attachment size: 10 MiB decoded, total", checks: ["LIMIT-ATTACHMENT-SIZE"] },
  {
    section: LIMITS,
    rule: "List conversations `limit`: 1 to 200, default 50",
    checks: ["LIMIT-LIST-RANGE", "LIMIT-LIST-DEFAULT-50", "LIMIT-LIST-OUT-OF-RANGE"],
    note: "what happens outside 1 to 200 is not shown (LIMIT-LIST-OUT-OF-RANGE is INFO)",
  },
  {
    section: LIMITS,
    rule: "`messages` array: non-empty; only the newest user text used",
    checks: ["LIMIT-MESSAGES-NONEMPTY", "SEND-NEWEST-USER-ONLY"],
  },
  {
    section: LIMITS,
    rule: "Rate limits: not shown",
    none: `${NOT_SHOWN} (429, 503 and 529 are retried, then the check is skipped)`,
  },
  { section: LIMITS, rule: "Turn time-out and concurrency limits: not shown", none: NOT_SHOWN },
  { section: LIMITS, rule: "Maximum request body size other than attachments: not shown", none: NOT_SHOWN },

  // ---- Versioning
  {
    section: VERSIONING,
    rule: "The messages and models paths contain the version segment `v1`",
    checks: ["SEND-200-STREAM", "MODELS-SHAPE"],
  },
  {
    section: VERSIONING,
    rule: "Conversation paths carry no version segment",
    checks: ["GET-SHAPE", "LIST-SHAPE-ORDER"],
  },
  {
    section: VERSIONING,
    rule: "Paths are the same in hosted and self-hosted deployments",
    none: ONE_DEPLOYMENT,
  },
  { section: VERSIONING, rule: "Version policy and deprecation: not shown", none: NOT_SHOWN },
];

/** What is wrong between the map and the catalogue: unknown ids, checks never named, malformed rows. */
export function coverageProblems(catalogue: CheckDef[], rules: SeedRule[] = seedRules): string[] {
  const known = new Set(catalogue.map((c) => c.id));
  const named = new Set<string>();
  const problems: string[] = [];
  for (const r of rules) {
    const hasChecks = (r.checks?.length ?? 0) > 0;
    if (hasChecks === (r.none !== undefined))
      problems.push(
        `"${r.rule}" (${r.section}) needs either checks or a reason for none, not both or neither`,
      );
    for (const id of r.checks ?? []) {
      named.add(id);
      if (!known.has(id)) problems.push(`"${r.rule}" (${r.section}) names ${id}, which the catalogue lacks`);
    }
  }
  for (const c of catalogue)
    if (!named.has(c.id)) problems.push(`${c.id} verifies no API rule of the coverage map`);
  return problems;
}

/** Ids the fields × routes table names that the catalogue lacks. */
export function fieldTableProblems(catalogue: CheckDef[]): string[] {
  const known = new Set(catalogue.map((c) => c.id));
  const named = [...ROUTE_SWEEP_CHECKS, ...Object.values(conversationFields).flatMap((f) => f.meaning)];
  return [...new Set(named)]
    .filter((id) => !known.has(id))
    .map((id) => `the fields × routes table names ${id}, which the catalogue lacks`);
}

/** The model's rules and the explorer's shape rules, each owned by a check. */
export const explorerRules: ModelRule[] = [...modelRules, ...shapeRules];

/** Rules of the model whose owning check the catalogue lacks, and rule ids used twice. */
export function modelRuleProblems(catalogue: CheckDef[], rules: ModelRule[] = explorerRules): string[] {
  const known = new Set(catalogue.map((c) => c.id));
  const seen = new Set<string>();
  const problems: string[] = [];
  for (const r of rules) {
    if (seen.has(r.id)) problems.push(`model rule ${r.id} is defined twice`);
    seen.add(r.id);
    if (!known.has(r.check)) problems.push(`model rule ${r.id} names ${r.check}, which the catalogue lacks`);
  }
  return problems;
}

function renderModelRules(byId: Map<string, CheckDef>): string[] {
  const lines = [
    "## The executable model (conformance/model/)",
    "",
    "The rules the explorer compares every answer with (`agent-api check` explores by default; `--explore <n>`,",
    "`--seed <s>`). A departure it finds is shrunk to a minimal sequence and fails the check that owns the rule.",
    "Where the API leaves a choice open, the model learns the deployment's first answer and reports a later",
    "departure from it as information, never as a failure.",
    "",
    `${explorerRules.length} rules.`,
    "",
    "| rule | API section | owned by | API |",
    "| --- | --- | --- | --- |",
  ];
  for (const r of explorerRules) {
    lines.push(
      `| \`${r.id}\` | ${cell(r.section)} | \`${r.check}\` ${byId.get(r.check)?.level ?? "?"} | ${cell(r.text)} |`,
    );
  }
  lines.push("");
  return lines;
}

const cell = (text: string) => text.replaceAll("|", "\\|").replaceAll("\n", " ");

/** Every route that returns a conversation's fields: the three reads carry the whole object. */
export const CONVERSATION_ROUTES = ["single fetch", "list", "transcript"] as const;

/** What checks each field of a conversation, beyond the route sweep that compares it across the routes. */
interface FieldCoverage {
  /** Other routes that show the field under another name (the fork result, a response header). */
  alsoOn: string[];
  /** Checks of the field's meaning (what it says, when it moves). */
  meaning: string[];
}

/** Checks that read one conversation through every route and fail on any field that disagrees. */
export const ROUTE_SWEEP_CHECKS = [
  "CONSIST-ROUTES-AGREE",
  "CONSIST-SHARED-MEMBER-VIEW",
  "CONSIST-FORK-READBACK",
];

/**
 * Field × route. Keyed by the spec's Conversation schema (the generated type), so a field added to the spec
 * fails the compiler here until someone says which checks judge it.
 */
export const conversationFields: Record<keyof components["schemas"]["Conversation"], FieldCoverage> = {
  id: {
    alsoOn: ["send-message `X-Conversation-Id`", "fork result `conversation_id`"],
    meaning: [
      "CONVID-UNKNOWN-VERBATIM",
      "CONVID-OMITTED-GENERATED",
      "CONSIST-ID-CHARACTERS",
      "CONSIST-ROUTED-SEND",
    ],
  },
  title: { alsoOn: [], meaning: ["GET-TITLE-FROM-PROMPT", "GET-TITLE-STABLE"] },
  channel: { alsoOn: [], meaning: ["LIST-CHANNEL-FILTER", "STATE-CREATED-PRIVATE"] },
  shared: {
    alsoOn: [],
    meaning: ["STATE-CREATED-PRIVATE", "STATE-SHARE-TRUE", "STATE-SHARE-FALSE", "CONSIST-SHARE-IDEMPOTENT"],
  },
  is_owner: { alsoOn: [], meaning: ["STATE-CREATED-PRIVATE", "STATE-SHARED-MEMBER-FORK"] },
  agent_session_id: {
    alsoOn: ["fork result `agent_session_id`"],
    meaning: ["STATE-SESSION-RECORDED", "STATE-SESSION-NULL-AT-CLOSE", "STATE-EMPTY-TURN-CLEARS"],
  },
  parent_conversation_id: {
    alsoOn: ["fork result `parent_conversation_id`"],
    meaning: ["STATE-FORK-CHILD", "CONSIST-FORK-READBACK"],
  },
  forked_at_turn_index: {
    alsoOn: ["fork result `forked_at_turn`"],
    meaning: ["STATE-FORK-CHILD", "CONSIST-FORK-READBACK"],
  },
  created_at: { alsoOn: [], meaning: ["LIST-TIMESTAMPS", "MEANING-TIMESTAMPS-MOVE", "LIST-SINCE-FILTER"] },
  updated_at: {
    alsoOn: [],
    meaning: ["LIST-TIMESTAMPS", "MEANING-TIMESTAMPS-MOVE", "MEANING-LIST-NEWEST-ACTIVITY"],
  },
  turn_count: { alsoOn: [], meaning: ["GET-TURN-COUNT"] },
};

function renderFieldRoutes(byId: Map<string, CheckDef>): string[] {
  const ids = (list: string[]) => list.map((id) => `\`${id}\` ${byId.get(id)?.level ?? "?"}`).join(", ");
  const lines = [
    "## Conversation fields × routes",
    "",
    `Each field of a conversation is returned by the ${CONVERSATION_ROUTES.join(", the ")}; ${ids(ROUTE_SWEEP_CHECKS)}`,
    "read one conversation through all of them and fail on any field that disagrees. The self-test breaks each",
    "field on each route in turn (`test/selftest/table-mutations.ts`).",
    "",
    "| field | also returned by | meaning checked by |",
    "| --- | --- | --- |",
  ];
  for (const [field, coverage] of Object.entries(conversationFields)) {
    lines.push(
      `| \`${field}\` | ${cell(coverage.alsoOn.join("; ") || "—")} | ${cell(ids(coverage.meaning))} |`,
    );
  }
  lines.push("");
  return lines;
}

/** COVERAGE.md: the map, section by section, the fields × routes, then each check with the rules it verifies. */
export function renderCoverage(catalogue: CheckDef[], rules: SeedRule[] = seedRules): string {
  const byId = new Map(catalogue.map((c) => [c.id, c]));
  const covered = rules.filter((r) => r.checks);
  const reasons = new Map<string, number>();
  for (const r of rules) if (r.none) reasons.set(r.none, (reasons.get(r.none) ?? 0) + 1);
  const lines = [
    "# Coverage of the API by the conformance suite",
    "",
    "<!-- Generated by `npm run coverage` from conformance/coverage.ts and the check catalogue; edit those, not this file. -->",
    "",
    "Every normative sentence or table row of the API (as the spec, `spec/`, states it), quoted short, with the",
    "checks that fail on a deployment breaking it, or why no check can. Levels: MUST (the API states it),",
    "SHOULD (client guidance), INFO (not shown; never fails a run). `agent-api check --list --coverage` prints",
    "this table.",
    "",
    `${rules.length} rules: ${covered.length} verified by checks, ${rules.length - covered.length} without a check.`,
    `${catalogue.length} checks, each verifying at least one rule.`,
    "",
  ];
  let section = "";
  rules.forEach((r, i) => {
    if (r.section !== section) {
      section = r.section;
      lines.push(`## ${section}`, "", "| # | API | verified by |", "| --- | --- | --- |");
    }
    const by = r.checks
      ? r.checks.map((id) => `\`${id}\` ${byId.get(id)?.level ?? "?"}`).join(", ")
      : `— *${r.none}*`;
    const note = r.note ? ` (${r.note})` : "";
    lines.push(`| ${i + 1} | ${cell(r.rule)} | ${cell(by + note)} |`);
    if (rules[i + 1]?.section !== section) lines.push("");
  });
  lines.push(...renderFieldRoutes(byId));
  lines.push(...renderModelRules(byId));
  lines.push("## Checks → rules", "", "| check | level | API section | rules |", "| --- | --- | --- | --- |");
  for (const c of catalogue) {
    const numbers = rules.flatMap((r, i) => (r.checks?.includes(c.id) ? [String(i + 1)] : []));
    lines.push(`| \`${c.id}\` | ${c.level} | ${cell(c.section)} | ${numbers.join(", ") || "—"} |`);
  }
  lines.push("");
  return lines.join("\n");
}
