/**
 * A minimal sequence as a shell script anyone can replay: one curl line per request, keys read from the same
 * AGENT_API_* variables the suite reads (never printed), ids the deployment generated captured into shell
 * variables and used by the later lines.
 */
import { ACTOR_KEY_ENV, type SentRequest, UNKNOWN_KEY } from "./requests.ts";

/** `'text'` for the shell, single quotes inside escaped. */
function quote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

export interface ScriptOptions {
  baseUrl: string;
  seed: number;
  /** Comment lines for the top of the script (what broke, where). */
  header: string[];
}

/** `text` as one shell word: the base URL and captured ids as variables, the rest single-quoted. */
function shellWord(text: string, tokens: Array<[string, string]>): string {
  let out = "";
  let rest = text;
  while (rest.length > 0) {
    let best: { at: number; token: string; name: string } | undefined;
    for (const [token, name] of tokens) {
      const at = rest.indexOf(token);
      if (at >= 0 && (!best || at < best.at)) best = { at, token, name };
    }
    if (!best) {
      out += quote(rest);
      break;
    }
    if (best.at > 0) out += quote(rest.slice(0, best.at));
    out += `"$${best.name}"`;
    rest = rest.slice(best.at + best.token.length);
  }
  return out || "''";
}

export function replayScript(requests: SentRequest[], options: ScriptOptions): string {
  const tokens: Array<[string, string]> = [[options.baseUrl, "AGENT_API_BASE_URL"]];
  const lines = [
    "#!/bin/sh",
    // A header line quotes the deployment's answer: every line of it stays a comment.
    ...options.header.flatMap((h) => h.split(/\r?\n|\r/).map((line) => `# ${line}`)),
    "# Replay: set the AGENT_API_* variables (the env file agent-api serve --env-file writes), then run this script.",
    `# Seed ${options.seed}: agent-api check --seed ${options.seed} draws the same sequences again.`,
    `: "\${AGENT_API_BASE_URL:?set AGENT_API_BASE_URL}"`,
  ];
  requests.forEach((req, i) => {
    const parts = [`curl -sS -X ${req.method}`, shellWord(req.url, tokens)];
    const env = ACTOR_KEY_ENV[req.actor];
    if (env) parts.push(`-H "X-Api-Key: $${env}"`);
    else if (req.actor === "unknown") parts.push(`-H ${quote(`X-Api-Key: ${UNKNOWN_KEY}`)}`);
    if (req.json !== undefined) {
      parts.push("-H 'content-type: application/json'");
      parts.push(`--data-raw ${shellWord(JSON.stringify(req.json), tokens)}`);
    }
    const name = `cid${tokens.length}`;
    if (req.captures?.from === "header") {
      lines.push(
        `${name}=$(${parts.join(" ")} -o /dev/null -D - | tr -d '\\r' | grep -i '^x-conversation-id:' | cut -d' ' -f2)`,
      );
      lines.push(`echo "step ${i + 1}: X-Conversation-Id $${name}"`);
      tokens.push([req.captures.id, name]);
    } else if (req.captures?.from === "fork-result") {
      lines.push(`${name}=$(${parts.join(" ")} | sed -n 's/.*"conversation_id" *: *"\\([^"]*\\)".*/\\1/p')`);
      lines.push(`echo "step ${i + 1}: child $${name}"`);
      tokens.push([req.captures.id, name]);
    } else {
      lines.push(`echo "step ${i + 1}:"; ${parts.join(" ")} -w '\\nHTTP %{http_code}\\n'`);
    }
  });
  return `${lines.join("\n")}\n`;
}
