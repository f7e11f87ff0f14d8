/**
 * What the explorer sends for each operation, and the record of it a replay script is made from: which
 * key (by role, never its value), which URL, which body.
 */
import type { Actor, AgentKind } from "../model/state.ts";
import type { SuiteInputs } from "../records.ts";
import type { ContentShape } from "./operations.ts";

export interface SentRequest {
  method: "GET" | "POST" | "DELETE";
  url: string;
  actor: Actor;
  json?: unknown;
  /** The conversation id this request made the deployment generate, captured by the script. */
  captures?: { id: string; from: "header" | "fork-result" };
}

/** The environment variable the suite reads each key from (the replay script names keys by it). */
export const ACTOR_KEY_ENV: Record<Actor, string | null> = {
  owner: "AGENT_API_KEY",
  member: "AGENT_API_MEMBER_KEY",
  viewer: "AGENT_API_VIEWER_KEY",
  revoked: "AGENT_API_REVOKED_KEY",
  foreign: "AGENT_API_FOREIGN_KEY",
  flow: "AGENT_API_FLOW_KEY",
  none: null,
  unknown: null,
};

/** A key no deployment issued: recognisable as the suite's, never a real one. */
export const UNKNOWN_KEY = "acc-explorer-unknown-key";

export function keyOf(actor: Actor, inputs: SuiteInputs): string | null {
  switch (actor) {
    case "owner":
      return inputs.key;
    case "member":
      return inputs.memberKey ?? null;
    case "viewer":
      return inputs.viewerKey ?? null;
    case "revoked":
      return inputs.revokedKey ?? null;
    case "foreign":
      return inputs.foreignKey ?? null;
    case "flow":
      return inputs.flowKey ?? null;
    case "unknown":
      return UNKNOWN_KEY;
    case "none":
      return null;
  }
}

export function agentName(kind: AgentKind, inputs: SuiteInputs, runId: string): string {
  switch (kind) {
    case "main":
      return inputs.agent;
    case "storage":
      return inputs.storageAgent ?? inputs.agent;
    case "repo":
      return inputs.repoAgent ?? inputs.agent;
    case "foreign":
      return inputs.foreignAgent ?? `acc-${runId}-no-such-agent`;
    case "unknown":
      return `acc-${runId}-no-such-agent`;
  }
}

/** A one-pixel PNG: a non-text block the API says is not read. */
const PIXEL_PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

/** The older user element's text ("earlier-messages"), before the nonce: only the newest user element is read. */
export const EARLIER_TEXT = "An earlier question to ignore";

/** The `messages` array of each content shape, and the user text the transcript must then hold. */
export function messagesOf(
  shape: ContentShape,
  nonce: string,
  ask = "Say OK.",
): { messages: unknown[]; stored: string } {
  const ref = `(ref ${nonce})`;
  switch (shape) {
    case "string":
      return { messages: [{ role: "user", content: `${ask} ${ref}` }], stored: `${ask} ${ref}` };
    case "blocks":
      return {
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: ask },
              { type: "text", text: ref },
            ],
          },
        ],
        stored: `${ask}\n\n${ref}`,
      };
    case "blocks-cache-control":
      // A prompt-caching marker is part of a text block in the messages API: the text is read as without it.
      return {
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: ask, cache_control: { type: "ephemeral" } },
              { type: "text", text: ref },
            ],
          },
        ],
        stored: `${ask}\n\n${ref}`,
      };
    case "blocks-with-image":
      return {
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: ask },
              { type: "image", source: { type: "base64", media_type: "image/png", data: PIXEL_PNG } },
              { type: "text", text: ref },
            ],
          },
        ],
        stored: `${ask}\n\n${ref}`,
      };
    case "assistant-last":
      // The newest user element is read even when an assistant element follows it (a prefill).
      return {
        messages: [
          { role: "user", content: `${ask} ${ref}` },
          { role: "assistant", content: "Sure." },
        ],
        stored: `${ask} ${ref}`,
      };
    case "earlier-messages":
      return {
        messages: [
          { role: "user", content: `${EARLIER_TEXT} ${nonce}` },
          { role: "assistant", content: "An earlier answer." },
          { role: "user", content: `${ask} ${ref}` },
        ],
        stored: `${ask} ${ref}`,
      };
  }
}
