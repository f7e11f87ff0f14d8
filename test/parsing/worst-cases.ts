/**
 * The worst input of every parser that reads text a caller, a turn or a deployment controls, each at the
 * largest size the API admits: the request body limit for body fields, the 16 KiB request head for headers
 * and query strings. Each case builds its input, then runs the parser; only the run is timed.
 *
 *   node test/parsing/worst-cases.ts <case name>   prints {"ms": N} when the parser returned
 *
 * The shapes are those that made backtracking patterns quadratic: a long run of one character class that
 * fails just before the end, and a phrase repeated along one line whose value never closes.
 */
import type Anthropic from "@anthropic-ai/sdk";
import { SseFrameReader } from "../../client/sse.ts";
import { DEDUP_NAME, distinctMentions, normaliseName } from "../../conformance/checks/replies.ts";
import { presentedKey } from "../../reference-server/http/auth.ts";
import { RequestValidator } from "../../reference-server/http/validate.ts";
import { acceptAttachments, sanitizeAttachmentName } from "../../reference-server/sandbox/attachments.ts";
import { wordsInSummary } from "../../reference-server/scripted-model/memory.ts";
import {
  parseDirectives,
  rememberedWordsIn,
  requiredTokens,
} from "../../reference-server/scripted-model/phrases.ts";
import { ATTACHMENTS_NOTE } from "../../reference-server/scripted-model/prompt-parts.ts";
import { scriptedAnswer } from "../../reference-server/scripted-model/scripted-model.ts";
import { renderTemplate } from "../../reference-server/service/flows.ts";
import { checkConversationId, titleFrom } from "../../reference-server/service/prompt.ts";

/** The request body limit (reference-server/http/request-limits.ts), less room for the JSON around one field. */
const BODY = 32 * 1024 * 1024 - 4096;
/** Node's request-head limit: what a header or a query string can be at most. */
const HEAD = 16 * 1024;

/** `unit` repeated to about `size` characters. */
function fill(unit: string, size: number = BODY): string {
  return unit.repeat(Math.floor(size / unit.length));
}

interface WorstCase {
  /** Builds the input (untimed) and returns the parse to time. */
  prepare(): () => unknown;
}

export const WORST_CASES: Record<string, WorstCase> = {
  "attachment name: a run of spaces before the last character": {
    prepare: () => {
      const name = `a${fill(" ")}b`;
      return () => sanitizeAttachmentName(name);
    },
  },
  "attachment name: a path, then runs of dots and spaces around one character": {
    prepare: () => {
      const quarter = BODY / 4;
      const name = `${fill("/", quarter)}${fill(". ", quarter)}x${fill(" .", quarter)}`;
      return () => sanitizeAttachmentName(name);
    },
  },
  "attachment entry: name, media type and base64 sharing the body": {
    prepare: () => {
      const third = Math.floor(BODY / 3);
      const entry = {
        name: `a${fill(" ", third)}b`,
        mediaType: fill("/", third),
        dataBase64: `${fill("A", third)}!`,
      };
      return () => acceptAttachments([entry]).map((a) => sanitizeAttachmentName(a.name));
    },
  },
  "phrase: read the file named, an unclosed curly quote, repeated on one line": {
    prepare: () => {
      const prompt = fill("read the file named “");
      return () => parseDirectives(prompt);
    },
  },
  "phrase: create a file named, an unclosed single curly quote, repeated on one line": {
    prepare: () => {
      const prompt = fill("create a file named ‘");
      return () => parseDirectives(prompt);
    },
  },
  "phrase: create a file named with a quoted path, content never closes": {
    prepare: () => {
      const prompt = fill("create a file named “a” containing “");
      return () => parseDirectives(prompt);
    },
  },
  "phrase: read the attached file named, an unclosed quote, repeated": {
    prepare: () => {
      const prompt = fill("read the attached file named ‘");
      return () => parseDirectives(prompt);
    },
  },
  "phrase: a bare value ending in a run of punctuation": {
    prepare: () => {
      const prompt = `read the file named a${fill("!")}x`;
      return () => parseDirectives(prompt);
    },
  },
  "phrase: run the shell command, then a run of spaces and tabs": {
    prepare: () => {
      const prompt = `run the shell command${fill(" \t")}`;
      return () => parseDirectives(prompt);
    },
  },
  "phrase: code words and tokens over runs of their gap and word classes": {
    prepare: () => {
      const words = `remember this code word ${fill("-")}`;
      const tokens = fill("always include the token :");
      return () => [rememberedWordsIn(words), requiredTokens([tokens, words])];
    },
  },
  "summary: a run of code words never closed by a period": {
    prepare: () => {
      const summary = `Code words remembered: ${fill("a, ")}`;
      return () => wordsInSummary(summary);
    },
  },
  "scripted model: an attachment note and a listing of millions of lines": {
    prepare: () => {
      const half = Math.floor(BODY / 2);
      const request = {
        model: "scripted",
        max_tokens: 1024,
        tools: [{ name: "list_files", input_schema: { type: "object" as const } }],
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "List the attached files." },
              { type: "text", text: `${ATTACHMENTS_NOTE} ${fill("a, ", half)}` },
            ],
          },
          {
            role: "assistant",
            content: [{ type: "tool_use", id: "toolu_1", name: "list_files", input: { path: ".uploads" } }],
          },
          {
            role: "user",
            content: [{ type: "tool_result", tool_use_id: "toolu_1", content: fill("b\n", half) }],
          },
        ],
      } as Anthropic.Messages.MessageCreateParamsStreaming;
      return () => scriptedAnswer(request);
    },
  },
  "conversation title: millions of blank lines before the first word": {
    prepare: () => {
      const prompt = `${fill(" \n")}title`;
      return () => titleFrom(prompt);
    },
  },
  "conversation id: far over its length limit": {
    prepare: () => {
      const id = fill("é");
      return () => {
        try {
          checkConversationId(id, "conversation_id");
        } catch {
          // Refused, as it must be: the point is how long refusing took.
        }
      };
    },
  },
  "request validation: every string field of a send-message body": {
    prepare: () => {
      const validator = new RequestValidator();
      const run = `${fill("a", BODY / 4)}\u0001`;
      const body = {
        messages: [{ role: "user", content: run }],
        model: run,
        conversation_id: run,
        system: run,
      };
      return () => {
        for (const operation of ["sendMessage", "sendRoutedMessage"])
          try {
            validator.body(operation, body);
          } catch {
            // A 400 is the expected answer; only its cost is measured.
          }
      };
    },
  },
  "headers and query: X-Api-Key, Bearer and since at the head limit": {
    prepare: () => {
      const validator = new RequestValidator();
      const spaces = fill(" ", HEAD);
      const since = `${fill("1", HEAD)}Z`;
      return () => [
        presentedKey({ authorization: `Bearer ${spaces}x${spaces}y` }),
        presentedKey({ "x-api-key": spaces }),
        Date.parse(since),
        (() => {
          try {
            return validator.query("listConversations", {
              since,
              channel_id: spaces,
              limit: fill("9", HEAD),
            });
          } catch {
            return null;
          }
        })(),
      ];
    },
  },
  "flow template: an unclosed placeholder repeated": {
    prepare: () => {
      const template = fill("{{ a ");
      return () => renderTemplate(template, { a: "x" });
    },
  },
  "SSE reader: one line of the body limit arriving in 1 KiB chunks": {
    prepare: () => {
      const chunk = fill("d", 1024);
      const count = Math.floor(BODY / chunk.length);
      return () => {
        const reader = new SseFrameReader();
        reader.push("data: ");
        for (let i = 0; i < count; i++) reader.push(chunk);
        return reader.push("\n\n").length;
      };
    },
  },
  "suite: a reply word ending in closing parentheses and punctuation": {
    prepare: () => {
      const parens = `a${fill(")")}`;
      const dots = `a${fill(".")}x`;
      const quotes = `a${fill("”")}x`;
      return () => [normaliseName(parens), normaliseName(dots), normaliseName(quotes)];
    },
  },
  "suite: the de-duplicated-name pattern over one long word": {
    prepare: () => {
      const reply = fill("-");
      return () => distinctMentions(reply, DEDUP_NAME);
    },
  },
};

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const name = process.argv[2] ?? "";
  const worst = WORST_CASES[name];
  if (!worst) {
    process.stderr.write(`unknown case: ${name}\n`);
    process.exit(2);
  }
  const parse = worst.prepare();
  const started = performance.now();
  parse();
  process.stdout.write(`${JSON.stringify({ ms: Math.round(performance.now() - started) })}\n`);
}
