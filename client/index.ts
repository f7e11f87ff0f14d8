/**
 * Typed client of the Agent Conversation API: openapi-fetch over the generated types for the JSON routes,
 * a typed SSE turn stream for send-message, and the API's wait-for-session guidance.
 */
import createClient from "openapi-fetch";
import type { components, operations, paths } from "../generated/api-types.ts";
import { AgentApiError, StreamProtocolError } from "./errors.ts";
import { readTurnEvents, type TurnEvent } from "./turn-stream.ts";

export { AgentApiError, StreamErrorEventError, StreamProtocolError } from "./errors.ts";
export {
  collectText,
  readTurnEvents,
  type StreamEvent,
  streamEventNames,
  type TurnEvent,
} from "./turn-stream.ts";

export type Schemas = components["schemas"];
export type Conversation = Schemas["Conversation"];
export type SendMessageRequest = Schemas["SendMessageRequest"];
export type RoutedSendMessageRequest = SendMessageRequest & { model: string };
export type ListConversationsQuery = NonNullable<operations["listConversations"]["parameters"]["query"]>;

export interface AgentClientOptions {
  /** The service base address (`{base_url}`), e.g. `http://localhost:3001`. */
  baseUrl: string;
  /** Sent as `X-Api-Key`. */
  apiKey: string;
  /** The agent name used in agent-scoped paths. */
  agent: string;
  /** A fetch to use instead of the global one (e.g. undici's, or one that adds headers). */
  fetch?: (input: Request) => Promise<Response>;
}

export interface RequestOptions {
  signal?: AbortSignal;
}

/** One running turn: its conversation id and its events, in order. Iterate it once. */
export interface TurnStream extends AsyncIterable<TurnEvent> {
  /** The conversation id, from the `X-Conversation-Id` response header (percent-decoded). */
  conversationId: string;
  /** The HTTP response whose body is being read (status 200, `text/event-stream`). */
  response: Response;
}

export interface WaitForSessionOptions {
  /** Poll interval; the API's example is 0.25 s. */
  intervalMs?: number;
  /** Upper bound of the wait; the turn may legitimately have no session, so this must be bounded. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface WaitForSessionResult {
  /** The recorded session id, or null when the wait ended first. */
  agentSessionId: string | null;
  timedOut: boolean;
}

export interface InvokeFlowOptions {
  /** The deployed-flow server (`{flow_url}`). */
  flowUrl: string;
  appId: string;
  inputVars: Record<string, string>;
  /** Flow key sent as `X-API-Key`; defaults to the client's key. */
  apiKey?: string;
  signal?: AbortSignal;
}

interface FetchResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

function unwrap<T>(operation: string, result: FetchResult<T>): T {
  if (!result.response.ok) throw new AgentApiError(result.response.status, result.error, operation);
  return result.data as T;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });

/**
 * The id carried by X-Conversation-Id: percent-decoded, since an id that is not plain printable ASCII travels
 * percent-encoded (spec, the header's description). A value that is not valid percent-encoding (a server
 * that sends ids verbatim) is taken as it is.
 */
export function decodeConversationId(header: string | null): string | null {
  if (header === null) return null;
  try {
    return decodeURIComponent(header);
  } catch {
    return header;
  }
}

/** Creates a client bound to one service, key and agent. */
export function createAgentClient(options: AgentClientOptions) {
  const { agent } = options;
  const http = createClient<paths>({
    baseUrl: options.baseUrl.replace(/(?<!\/)\/+$/, ""),
    headers: { "X-Api-Key": options.apiKey },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  const conversationPath = (id: string) => ({ params: { path: { agent, id } } });

  async function openTurn(operation: string, result: FetchResult<ReadableStream<Uint8Array> | null>) {
    const body = unwrap(operation, result);
    const conversationId = decodeConversationId(result.response.headers.get("X-Conversation-Id"));
    if (!body || !conversationId) {
      await body?.cancel().catch(() => {});
      throw new StreamProtocolError(
        `${operation}: 200 response without ${body ? "X-Conversation-Id" : "a body"}`,
      );
    }
    const turn: TurnStream = {
      conversationId,
      response: result.response,
      [Symbol.asyncIterator]: () => readTurnEvents(body),
    };
    return turn;
  }

  const client = {
    /** The underlying openapi-fetch client, for calls this wrapper does not cover. */
    http,

    /** Runs one agent turn (`POST /api/agents/{agent}/v1/messages`); resolves once the 200 headers arrived. */
    async sendMessage(body: SendMessageRequest, opts: RequestOptions = {}): Promise<TurnStream> {
      const result = await http.POST("/api/agents/{agent}/v1/messages", {
        params: { path: { agent } },
        body,
        parseAs: "stream",
        signal: opts.signal,
      });
      return openTurn("sendMessage", result);
    },

    /** Runs a turn on the agent named by `body.model` (`POST /api/agents/v1/messages`). */
    async sendRoutedMessage(body: RoutedSendMessageRequest, opts: RequestOptions = {}): Promise<TurnStream> {
      const result = await http.POST("/api/agents/v1/messages", {
        body,
        parseAs: "stream",
        signal: opts.signal,
      });
      return openTurn("sendRoutedMessage", result);
    },

    /** Lists the agent's models, default first. */
    async listModels(opts: RequestOptions = {}): Promise<Schemas["ModelList"]> {
      const result = await http.GET("/api/agents/{agent}/v1/models", {
        params: { path: { agent } },
        signal: opts.signal,
      });
      return unwrap("listModels", result);
    },

    /** Lists conversations visible to the caller, newest activity first. */
    async listConversations(
      query: ListConversationsQuery = {},
      opts: RequestOptions = {},
    ): Promise<Schemas["ConversationList"]> {
      const result = await http.GET("/api/agents/{agent}/conversations", {
        params: { path: { agent }, query },
        signal: opts.signal,
      });
      return unwrap("listConversations", result);
    },

    /** Fetches one conversation (`{conversation}`). */
    async getConversation(id: string, opts: RequestOptions = {}): Promise<Schemas["ConversationEnvelope"]> {
      const result = await http.GET("/api/agents/{agent}/conversations/{id}", {
        ...conversationPath(id),
        signal: opts.signal,
      });
      return unwrap("getConversation", result);
    },

    /** Fetches a conversation's transcript. */
    async getTranscript(id: string, opts: RequestOptions = {}): Promise<Schemas["Transcript"]> {
      const result = await http.GET("/api/agents/{agent}/conversations/{id}/messages", {
        ...conversationPath(id),
        signal: opts.signal,
      });
      return unwrap("getTranscript", result);
    },

    /** Fetches whether the conversation's context was last compacted, with the summary. */
    async getLastCompaction(id: string, opts: RequestOptions = {}): Promise<Schemas["CompactionInfo"]> {
      const result = await http.GET("/api/agents/{agent}/conversations/{id}/last-compaction", {
        ...conversationPath(id),
        signal: opts.signal,
      });
      return unwrap("getLastCompaction", result);
    },

    /** Shares the conversation with the workspace (true) or makes it private (false); owner only. */
    async setSharing(
      id: string,
      shared: boolean,
      opts: RequestOptions = {},
    ): Promise<Schemas["ShareResult"]> {
      const result = await http.POST("/api/agents/{agent}/conversations/{id}", {
        ...conversationPath(id),
        body: { shared },
        signal: opts.signal,
      });
      return unwrap("setConversationSharing", result);
    },

    /** Forks a readable conversation into a private child owned by the caller. */
    async fork(
      id: string,
      body: Schemas["ForkRequest"] = {},
      opts: RequestOptions = {},
    ): Promise<Schemas["ForkResult"]> {
      const result = await http.POST("/api/agents/{agent}/conversations/{id}/fork", {
        ...conversationPath(id),
        body,
        signal: opts.signal,
      });
      return unwrap("forkConversation", result);
    },

    /** Deletes a conversation; owner only. */
    async deleteConversation(id: string, opts: RequestOptions = {}): Promise<void> {
      const result = await http.DELETE("/api/agents/{agent}/conversations/{id}", {
        ...conversationPath(id),
        signal: opts.signal,
      });
      unwrap("deleteConversation", result);
    },

    /** Invokes a deployed flow at `{flow_url}/apps/{app_id}` with `X-API-Key`. */
    async invokeFlow(flow: InvokeFlowOptions): Promise<Schemas["FlowInvokeResult"]> {
      const result = await http.POST("/apps/{app_id}", {
        baseUrl: flow.flowUrl.replace(/(?<!\/)\/+$/, ""),
        params: { path: { app_id: flow.appId } },
        headers: { "X-API-Key": flow.apiKey ?? options.apiKey },
        body: { input_vars: flow.inputVars },
        signal: flow.signal,
      });
      return unwrap("invokeFlow", result);
    },

    /**
     * Polls the conversation until `agent_session_id` is non-null (the API's client guidance before
     * resuming a conversation just run). Never throws on timeout: resolves `{timedOut: true}` so the caller
     * proceeds, since a turn with no output legitimately has no session.
     */
    async waitForSession(
      conversationId: string,
      wait: WaitForSessionOptions = {},
    ): Promise<WaitForSessionResult> {
      const intervalMs = wait.intervalMs ?? 250;
      const deadline = Date.now() + (wait.timeoutMs ?? 10_000);
      while (true) {
        const { conversation } = await client.getConversation(conversationId, { signal: wait.signal });
        if (conversation.agent_session_id)
          return { agentSessionId: conversation.agent_session_id, timedOut: false };
        const remaining = deadline - Date.now();
        if (remaining <= 0) return { agentSessionId: null, timedOut: true };
        await sleep(Math.min(intervalMs, remaining), wait.signal);
      }
    },
  };
  return client;
}

/** The client returned by createAgentClient. */
export type AgentClient = ReturnType<typeof createAgentClient>;
