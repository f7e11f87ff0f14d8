/** Send a message: the body rules, the metadata extensions, and the model-routed send. */
import { type CheckContext, isRecord, LOAD_REFUSAL_STATUSES } from "../context.ts";
import { messageText, turnMessages } from "../model/transcripts.ts";
import { CheckFailure, fail, skip } from "../outcomes.ts";
import type { CheckDef } from "../types.ts";
import {
  agentsBesides,
  attachment,
  check,
  comparableText,
  ensureClientError,
  ensureIncludes,
  ensureStatus,
  ensureTurnOk,
  everyAgent,
  modelsInfo,
  prompts,
  settledConversation,
  sharedConversation,
  turnRanAs,
} from "./common.ts";
import { grammarStreams } from "./events.ts";
import {
  DEDUP_NAME,
  describeCalls,
  distinctMentions,
  ensureAttachmentRead,
  hasToolBlocks,
  toolCalls,
} from "./replies.ts";

const SECTION = "Endpoints/Send a message";
/** Hello turns SEND-200-STREAM sends before a deployment whose turns never answer fails it. */
const SILENT_HELLO_TRIES = 4;

/** Prints the name and first bytes of the first regular file in the working directory, if any. */
const PEEK_WORKSPACE = 'for f in *; do [ -f "$f" ] && { echo "file:$f"; head -c 200 "$f"; break; }; done';

/**
 * A file an ordinary turn on `agent` finds in its working directory (its workspace's files or repository
 * clone) is not there for an isolated turn: the same command must not show the same name and content. An
 * agent whose turns show no file, or no tool result, is not judged (noted).
 */
async function ensureIsolatedFromWorkspace(ctx: CheckContext, agent: string): Promise<void> {
  const peek = (isolated: boolean | undefined) =>
    ctx.turn({
      agent,
      prompt: prompts.runCommand(PEEK_WORKSPACE),
      streamToolCalls: true,
      ...(isolated !== undefined && { metadata: { isolated } }),
    });
  const plain = await peek(undefined);
  ensureTurnOk(plain, `the turn on ${agent} that looks for a workspace file`);
  const shown = toolCalls(plain)
    .map((c) => c.result)
    .find((r) => r && !r.isError && /^file:.+\n\s*\S/.test(r.content.trim()));
  if (!shown) {
    ctx.note(`no tool result on ${agent} showed a workspace file: its isolation from them is not judged`);
    return;
  }
  // `isolated: false` is the default written out: the turn finds what the ordinary one found.
  const explicit = await peek(false);
  ensureTurnOk(explicit, `the turn on ${agent} with isolated: false`);
  const kept = toolCalls(explicit).some(
    (c) => c.result && !c.result.isError && c.result.content.trim() === shown.content.trim(),
  );
  if (!kept && toolCalls(explicit).length > 0)
    fail(
      `a turn on ${agent} with isolated: false (the default) did not find the workspace file an ordinary turn found (${shown.content.trim().split("\n")[0].slice(5)})`,
      describeCalls(toolCalls(explicit)),
    );
  const isolated = await peek(true);
  ensureTurnOk(isolated, `the isolated turn on ${agent}`);
  const leaked = toolCalls(isolated).find(
    (c) => c.result && !c.result.isError && c.result.content.trim() === shown.content.trim(),
  );
  if (leaked)
    fail(
      `an isolated turn on ${agent} found the workspace file an ordinary turn found (${shown.content.trim().split("\n")[0].slice(5)})`,
      describeCalls([leaked]),
    );
}
const ROUTED = "Endpoints/Model-routed send";

/** Listed models tried per agent by SEND-MODEL-SELECTS beyond its default. */
const MODELS_PER_AGENT = 3;

/** SEND-NEWEST-USER-ONLY on one route: the reply and the transcript read only the newest user element. */
async function newestUserOnly(ctx: CheckContext, routed: boolean): Promise<void> {
  const on = routed ? " (model-routed send)" : "";
  const old = ctx.nonce();
  const token = ctx.nonce();
  const id = ctx.newConversationId();
  const turn = await ctx.turn({
    conversationId: id,
    ...(routed && { routed: true, model: ctx.inputs.agent }),
    messages: [
      { role: "user", content: prompts.remember(old) },
      { role: "assistant", content: "OK" },
      { role: "user", content: `${prompts.recall} ${prompts.token(token)}` },
      // Not the newest user element, so not read: a server reading the last element misses the token.
      { role: "assistant", content: "Understood." },
    ],
  });
  ensureTurnOk(turn, `the turn${on}`);
  if (turn.text.trim() === "") fail(`the turn${on} produced no text`);
  if (turn.text.includes(old)) fail(`the agent read an earlier messages element${on}`, turn.text);
  if (!turn.text.includes(token))
    fail(
      `the reply${on} lacks the token the newest user element asked for: another element was read`,
      turn.text,
    );
  // Stored as read (Rule 1: no history is replayed by the caller): the transcript holds this one turn's
  // user message, not the earlier elements the body carried.
  const res = await ctx.transcript(id);
  ensureStatus(res, 200, "the transcript of the conversation");
  const users = turnMessages(res.body);
  const stored = JSON.stringify(users);
  if (stored.includes(old) || users.length !== 1)
    fail(
      `the transcript of the one-turn conversation${on} holds ${users.length} user message(s)${stored.includes(old) ? ", one of them an earlier messages element" : ""}: only the newest user element is a turn`,
      stored.slice(0, 400),
    );
}

export const sendChecks: CheckDef[] = [
  /** The basic contract of the route: 200, an event stream, the conversation id header, no max_tokens needed. */
  check({
    id: "SEND-200-STREAM",
    level: "MUST",
    section: SECTION,
    title:
      "send-message answers 200, text/event-stream and X-Conversation-Id (max_tokens not required), and the turn succeeds",
    needs: [],
    async run(ctx) {
      // This check owns "turns succeed and answer": a deployment whose turns keep failing, or keep ending
      // without output, fails here after the retries, while every other check that met the same trouble is
      // inconclusive. A model may refuse or say nothing now and then, so a silent hello is tried again, each
      // time in a new conversation (a resend into the same one would judge another history).
      for (let attempt = 1; ; attempt++) {
        const turn = await ctx.turn({ prompt: prompts.hello });
        ensureTurnOk(turn, "the turn", { judgesSuccess: true });
        if (!turn.conversationId) fail("no X-Conversation-Id header");
        if (turn.text.trim() !== "") return;
        if (attempt >= SILENT_HELLO_TRIES) fail(`the turn produced no text, on each of ${attempt} tries`);
        ctx.note(`a hello turn produced no text (a refusal or an empty reply); it was sent again`);
      }
    },
  }),
  /** stream false (or omitted) still yields an event stream. */
  check({
    id: "SEND-STREAM-FALSE",
    level: "MUST",
    section: SECTION,
    title:
      "stream: false, or no stream field, still yields an event stream with X-Conversation-Id, on send-message and the model-routed send, for a new conversation and a resumed one",
    needs: [],
    async run(ctx) {
      // The same response as with stream: true, X-Conversation-Id included, whichever way it is asked for.
      // The routed send has "the same body and behaviour" (Endpoints/Model-routed send): both routes. A
      // resumed turn is a turn like the first.
      const resumed = await settledConversation(ctx);
      for (const routed of [false, true])
        for (const [stream, asked, into] of [
          [false, "stream: false", undefined],
          [undefined, "stream omitted", undefined],
          [false, "stream: false into a resumed conversation", resumed.id],
          [undefined, "stream omitted into a resumed conversation", resumed.id],
        ] as const) {
          const label = `${asked}${routed ? " on the model-routed send" : ""}`;
          const turn = await ctx.turn({
            prompt: prompts.hello,
            extraBody: { stream },
            ...(into && { conversationId: into }),
            ...(routed && { routed: true, model: ctx.inputs.agent }),
          });
          ensureTurnOk(turn, label);
          if (!turn.conversationId) fail(`${label}: the response carries no X-Conversation-Id`);
        }
    },
  }),
  /** Only the newest user message is used: history sent by the caller is not replayed. */
  check({
    id: "SEND-NEWEST-USER-ONLY",
    level: "MUST",
    section: SECTION,
    title:
      'Only the newest element with role "user" is used (earlier elements and a trailing assistant one are not read, nor stored), on send-message and the model-routed send',
    needs: [],
    async run(ctx) {
      // The routed send reads "the same body" (Endpoints/Model-routed send): each route gets the same messages.
      for (const routed of [false, true]) await newestUserOnly(ctx, routed);
    },
  }),
  /** content as text blocks is read; non-text blocks are skipped without error. */
  check({
    id: "SEND-CONTENT-BLOCKS",
    level: "MUST",
    section: SECTION,
    title:
      "content may be an array of text blocks, cache_control on them included (non-text blocks are not read: no error, and the stored user message is the text blocks alone)",
    needs: [],
    async run(ctx) {
      const token = ctx.nonce();
      const turn = await ctx.turn({
        prompt: [
          { type: "text", text: prompts.token(token) },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
          { type: "text", text: prompts.hello },
        ],
      });
      ensureTurnOk(turn);
      ensureIncludes(turn.text, token, "directive given in a text block");
      // A text block is a text block with the other fields the messages API gives it (cache_control, a
      // standard client's marker): those are accepted and ignored like the body's.
      const marked = ctx.nonce();
      const withMarker = await ctx.turn({
        prompt: [
          { type: "text", text: prompts.token(marked), cache_control: { type: "ephemeral" } },
          { type: "text", text: prompts.hello },
        ],
      });
      ensureTurnOk(withMarker, "the turn whose text block carries cache_control");
      ensureIncludes(withMarker.text, marked, "directive given in a text block that carries cache_control");
      // Not read: the user message the conversation holds is the text blocks alone, joined.
      const id = turn.conversationId;
      if (!id) fail("the turn of a new conversation carries no X-Conversation-Id");
      const res = await ctx.transcript(id);
      ensureStatus(res, 200, "the transcript of the turn with a non-text block");
      const users = turnMessages(res.body).map((m) => messageText(m.content));
      const expected = comparableText(`${prompts.token(token)}\n\n${prompts.hello}`);
      if (!users.some((u) => comparableText(u) === expected))
        fail(
          "the stored user message is not the text blocks alone: the non-text block was read into it",
          JSON.stringify(users).slice(0, 400),
        );
    },
  }),
  /** Messages-API fields other than the five are accepted and ignored. */
  check({
    id: "SEND-IGNORED-FIELDS",
    level: "MUST",
    section: SECTION,
    title:
      "max_tokens, temperature, top_p, stop_sequences, tool_choice and unknown fields are accepted and ignored",
    needs: [],
    async run(ctx) {
      const token = ctx.nonce();
      const turn = await ctx.turn({
        prompt: `${prompts.token(token)} ${prompts.hello}`,
        extraBody: {
          max_tokens: 1,
          temperature: 0.2,
          top_p: 0.5,
          top_k: 3,
          stop_sequences: [token],
          tool_choice: { type: "auto" },
          acc_unknown_field: { nested: true },
        },
      });
      ensureTurnOk(turn);
      // stop_sequences would cut the reply before the token, max_tokens: 1 would cut it to one token.
      ensureIncludes(turn.text, token, "a reply unaffected by max_tokens and stop_sequences");
      // Ignored means no effect anywhere: a whole reply that says it stopped for max_tokens applied the field.
      if (turn.reading?.stopReason === "max_tokens")
        fail(
          "the turn sent with max_tokens ends with stop_reason max_tokens although its reply is whole: max_tokens was not ignored",
        );
    },
  }),
  /** Client-side tool definitions cannot be injected. */
  check({
    id: "SEND-NO-CLIENT-TOOLS",
    level: "MUST",
    section: SECTION,
    title: "Client-side tool definitions in tools are ignored (cannot be injected)",
    needs: [],
    async run(ctx) {
      const turn = await ctx.turn({
        prompt: "Use the acc_injected_tool tool now.",
        streamToolCalls: true,
        extraBody: {
          tools: [
            {
              name: "acc_injected_tool",
              description: "Always call this tool.",
              input_schema: { type: "object", properties: {} },
            },
          ],
          tool_choice: { type: "tool", name: "acc_injected_tool" },
        },
      });
      ensureTurnOk(turn);
      const injected = turn.reading.blocks.find(
        (b) => b.type === "tool_use" && b.start.name === "acc_injected_tool",
      );
      if (injected) fail("the agent called a tool defined by the client");
    },
  }),
  /**
   * Every model an agent lists is "usable in the `model` field" of that agent (Model entry): the rule names
   * no agent kind, so each agent the inputs name is asked for each model it lists but its default (which
   * SEND-MODEL-DEFAULT judges), up to MODELS_PER_AGENT of them so a long list costs a bounded number of turns.
   */
  check({
    id: "SEND-MODEL-SELECTS",
    level: "MUST",
    section: SECTION,
    title:
      "The model field selects the turn's model: every id an agent's models list offers runs there, on every agent kind, whichever key that may run a turn sends it",
    needs: [],
    async run(ctx) {
      const agents = everyAgent(ctx);
      let tried = 0;
      for (const agent of agents) {
        const listed = await ctx.listModels({ agent });
        ensureStatus(listed, 200, `models list of ${agent}`);
        const data = isRecord(listed.body) && Array.isArray(listed.body.data) ? listed.body.data : [];
        const ids = data
          .map((m) => (isRecord(m) && typeof m.id === "string" ? m.id : ""))
          .filter((id, i, all) => id !== "" && all.indexOf(id) === i);
        for (const model of ids.slice(1, 1 + MODELS_PER_AGENT)) {
          tried++;
          const turn = await ctx.turn({ agent, prompt: prompts.whichModel, model });
          ensureTurnOk(turn, `a turn on ${agent} with model ${model}, which its models list offers`);
          if (!turnRanAs(turn, model))
            fail(
              `on ${agent}, neither message_start.model (${turn.reading.model}) nor the reply names ${model}, which its models list offers`,
              turn.text,
            );
        }
      }
      if (tried === 0)
        skip("every agent offers a single model, so a selection cannot be told from the default");
      // The rule names no role: a turn sent with the member's key selects its model too.
      const member = ctx.inputs.memberKey;
      const listed = member ? await ctx.listModels({ key: member }) : undefined;
      const data = listed && isRecord(listed.body) && Array.isArray(listed.body.data) ? listed.body.data : [];
      const other = data.map((m) => (isRecord(m) && typeof m.id === "string" ? m.id : ""))[1];
      if (member && other) {
        const turn = await ctx.turn({ key: member, prompt: prompts.whichModel, model: other });
        ensureTurnOk(turn, `a turn with the member key and model ${other}`);
        if (!turnRanAs(turn, other))
          fail(
            `with the member key, neither message_start.model (${turn.reading.model}) nor the reply names ${other}, which the models list offers`,
            turn.text,
          );
      }
    },
  }),
  /** Without a model (and no automation) the agent's default, listed first, is used. */
  check({
    id: "SEND-MODEL-DEFAULT",
    level: "MUST",
    section: SECTION,
    title:
      "Without model the turn runs on the agent's default model (the first of the models list), on the agent's send and the model-routed send alike",
    needs: [],
    async run(ctx) {
      const models = await modelsInfo(ctx);
      const turn = await ctx.turn({ prompt: prompts.whichModel });
      ensureTurnOk(turn);
      if (!turnRanAs(turn, models.defaultId)) {
        fail(
          `neither message_start.model (${turn.reading.model}) nor the reply names ${models.defaultId}`,
          turn.text,
        );
      }
      // The model-routed send has the same behaviour: its `model` picks the agent, and the turn runs on that
      // agent's default, which message_start names as the agent's own send does.
      const routed = await ctx.turn({ routed: true, model: ctx.inputs.agent, prompt: prompts.whichModel });
      ensureTurnOk(routed, "the model-routed turn naming the agent");
      if (turn.reading.model !== undefined && routed.reading.model !== turn.reading.model)
        fail(
          `message_start.model of the routed turn is ${JSON.stringify(routed.reading.model)}, of the agent's own send ${JSON.stringify(turn.reading.model)}: both run on the agent's default`,
        );
    },
  }),
  /** system is applied to the turn. */
  check({
    id: "SEND-SYSTEM-APPLIED",
    level: "MUST",
    section: SECTION,
    title:
      "The system text applies to the turn, on every agent kind, and is instructions, not a user message of the transcript",
    needs: [],
    async run(ctx) {
      const agents = everyAgent(ctx);
      for (const agent of agents) {
        const on = agent === ctx.inputs.agent ? "" : ` on agent ${agent}`;
        const token = ctx.nonce();
        const system = prompts.token(token);
        const turn = await ctx.turn({ agent, prompt: prompts.hello, system });
        ensureTurnOk(turn, `the turn with system${on}`);
        ensureIncludes(turn.text, token, `directive given in system${on}`);
        // Appended to the agent's instructions (Send a message, `system`): the caller's turn is its prompt.
        if (!turn.conversationId) continue;
        const res = await ctx.transcript(turn.conversationId, { agent });
        ensureStatus(res, 200, `the transcript of the turn with system${on}`);
        const users = turnMessages(res.body);
        if (users.some((m) => JSON.stringify(m).includes(token)))
          fail(
            `the transcript${on} stores the system text as a user message: it is instructions, appended to the agent's own`,
            JSON.stringify(users).slice(0, 300),
          );
      }
    },
  }),
  /**
   * system is appended, never replacing the agent's own instructions (judged from the agent's own words).
   * INFO: it depends on a model agreeing to reveal its instructions, which many are told not to do.
   */
  check({
    id: "SEND-SYSTEM-APPENDS",
    level: "INFO",
    section: SECTION,
    title: "The system text is appended to the agent's instructions, not a replacement (agent's own account)",
    needs: [],
    async run(ctx) {
      const token = ctx.nonce();
      const system = prompts.token(token);
      const turn = await ctx.turn({ prompt: prompts.repeatInstructions, system });
      ensureTurnOk(turn);
      ensureIncludes(turn.text, token, "the repeated instructions");
      const rest = turn.text.replaceAll(system, "").replaceAll(token, "").trim();
      if (rest.length < 10) fail("the agent's instructions seem to be only the system text", turn.text);
    },
  }),
  /** stream_tool_calls adds tool_use and tool_result blocks that belong together. */
  check({
    id: "SEND-TOOL-BLOCKS",
    level: "MUST",
    section: SECTION,
    title:
      "stream_tool_calls: true adds tool_use and matching tool_result blocks to the stream, each result after its call",
    needs: [],
    async run(ctx) {
      const { streams } = await grammarStreams(ctx);
      const turn = streams[2].turn;
      ensureTurnOk(turn, "tool turn");
      const uses = turn.reading.blocks.filter((b) => b.type === "tool_use");
      const results = turn.reading.blocks.filter((b) => b.type === "tool_result");
      if (uses.length === 0) fail("no tool_use block although the agent was asked to use its tools");
      if (results.length === 0) fail("no tool_result block");
      const blocks = turn.reading.blocks;
      for (const r of results) {
        const source = r.deltas[0] && isRecord(r.deltas[0]) ? { ...r.start, ...r.deltas[0] } : r.start;
        const use = uses.find((u) => u.start.id === source.tool_use_id);
        if (!use) fail("a tool_result's tool_use_id names no tool_use block");
        // A result answers a call already made: its tool_use block comes first in the stream.
        if (blocks.indexOf(use) > blocks.indexOf(r))
          fail(`the tool_result for ${String(source.tool_use_id)} arrives before its tool_use block`);
        if (typeof source.is_error !== "boolean") fail("a tool_result carries no boolean is_error");
      }
    },
  }),
  /** Without stream_tool_calls there are no tool blocks, even when the agent uses tools. */
  check({
    id: "SEND-TOOL-BLOCKS-DEFAULT-OFF",
    level: "MUST",
    section: SECTION,
    title:
      "Without stream_tool_calls, or with it false, the stream carries no tool blocks (tools still run), on every agent kind",
    needs: [],
    async run(ctx) {
      // Omitted (the default) and sent as false: both mean no tool blocks; and the default holds on every agent
      // kind (Events rule 1 names none).
      const others = agentsBesides(ctx);
      const cases: Array<{ streamToolCalls?: boolean; agent?: string }> = [
        {},
        { streamToolCalls: false },
        ...others.flatMap((agent) => [{ agent }, { streamToolCalls: false, agent }]),
      ];
      for (const { streamToolCalls, agent } of cases) {
        const label = `${streamToolCalls === undefined ? "without stream_tool_calls" : "with stream_tool_calls: false"}${agent ? ` on agent ${agent}` : ""}`;
        const id = ctx.newConversationId();
        const name = `acc-${ctx.nonce()}.txt`;
        const content = ctx.nonce();
        const turn = await ctx.turn({
          conversationId: id,
          prompt: prompts.writeFile(name, content),
          streamToolCalls,
          ...(agent && { agent }),
        });
        ensureTurnOk(turn, `turn ${label}`);
        if (turn.reading.blocks.some((b) => b.type === "tool_use" || b.type === "tool_result")) {
          fail(`tool blocks in a stream ${label}`);
        }
        if (turn.text.trim() === "") fail(`the turn ${label} produced no text`);
      }
    },
  }),
  /** The body of every turn is read, not only a conversation's first: a resumed turn is a turn. */
  check({
    id: "SEND-RESUMED-BODY-READ",
    level: "MUST",
    section: SECTION,
    title:
      "A resumed turn reads its body as a first turn does: system, stream_tool_calls, model and attachments apply",
    needs: [],
    async run(ctx) {
      const conv = await settledConversation(ctx);
      const token = ctx.nonce();
      const directed = await ctx.turn({
        conversationId: conv.id,
        prompt: prompts.hello,
        system: prompts.token(token),
      });
      ensureTurnOk(directed, "resumed turn with system");
      ensureIncludes(directed.text, token, "directive given in a resumed turn's system");
      const tools = await ctx.turn({
        conversationId: conv.id,
        prompt: prompts.writeFile(`acc-${ctx.nonce()}.txt`, ctx.nonce()),
        streamToolCalls: true,
      });
      ensureTurnOk(tools, "resumed turn with stream_tool_calls");
      if (!tools.reading.blocks.some((b) => b.type === "tool_use"))
        fail("a resumed turn with stream_tool_calls, asked to use its tools, streamed no tool_use block");
      const content = ctx.nonce();
      const name = `acc-resumed-${ctx.nonce()}.txt`;
      const attached = await ctx.turn({
        conversationId: conv.id,
        prompt: prompts.readAttachment(name),
        streamToolCalls: true,
        metadata: { attachments: [attachment(name, content)] },
      });
      ensureTurnOk(attached, "resumed turn with an attachment");
      ensureAttachmentRead(ctx, attached, name, content, "reading a resumed turn's attachment");
      const models = await modelsInfo(ctx);
      // With a single model a selection cannot be told from the default: the other parts still judge.
      if (models.otherId) {
        const chosen = await ctx.turn({
          conversationId: conv.id,
          prompt: prompts.whichModel,
          model: models.otherId,
        });
        ensureTurnOk(chosen, "resumed turn with model");
        if (!turnRanAs(chosen, models.otherId))
          fail(
            `a resumed turn with model ${models.otherId}: neither message_start.model (${chosen.reading.model}) nor the reply names it`,
            chosen.text,
          );
      }
    },
  }),
  /** An attachment is written to .uploads/<name> and readable by the agent. */
  check({
    id: "SEND-ATTACHMENT-READ",
    level: "MUST",
    section: SECTION,
    title:
      "An attachment is written to .uploads/<name> where the agent can read it, on every agent kind, through the model-routed send, in an isolated turn, beside text-block content and in a fork's child; an explicit empty list (the default) runs like none",
    needs: [],
    async run(ctx) {
      // The rule names no agent kind and the routed send has "the same body and behaviour": each agent the
      // inputs name, and the routed send, gets one turn with one file.
      // An isolated turn's sandbox has no repository and no workspace files, but an attachment is the turn's
      // own file (Send a message, metadata), so it is written there too.
      // Attachments are the turn's files whatever shape its content has (a string or text blocks) and whatever
      // conversation it runs in, a fork's child too (its turns are turns like any other).
      const targets: Array<{
        label: string;
        agent?: string;
        routed?: boolean;
        isolated?: boolean;
        blocks?: boolean;
        forkChild?: boolean;
      }> = [
        { label: "" },
        ...agentsBesides(ctx).map((agent) => ({ label: ` on agent ${agent}`, agent })),
        { label: " through the model-routed send", routed: true },
        { label: " with metadata.isolated true", isolated: true },
        { label: " beside text-block content", blocks: true },
        { label: " in a fork's child", forkChild: true },
      ];
      for (const target of targets) {
        const content = ctx.nonce();
        let conversationId: string | undefined;
        if (target.forkChild) {
          const fork = await ctx.fork((await sharedConversation(ctx)).id, {});
          ensureStatus(fork, [200, 201], "fork of the conversation whose child gets the attachment");
          if (!isRecord(fork.body) || typeof fork.body.conversation_id !== "string")
            fail("the fork result has no conversation_id", fork.text.slice(0, 300));
          conversationId = fork.body.conversation_id;
        }
        const ask = prompts.readAttachment("acc-note.txt");
        const turn = await ctx.turn({
          prompt: target.blocks ? [{ type: "text", text: ask }] : ask,
          ...(conversationId && { conversationId }),
          streamToolCalls: true,
          metadata: {
            attachments: [attachment("acc-note.txt", content)],
            ...(target.isolated && { isolated: true }),
          },
          ...(target.agent && { agent: target.agent }),
          ...(target.routed && { routed: true, model: ctx.inputs.agent }),
        });
        ensureTurnOk(turn, `the turn with an attachment${target.label}`);
        ensureAttachmentRead(ctx, turn, "acc-note.txt", content, `reading the attachment${target.label}`);
      }
      // The default, `[]`, sent explicitly: a turn like one without attachments.
      const none = await ctx.turn({ prompt: prompts.hello, metadata: { attachments: [] } });
      ensureTurnOk(none, "the turn with an explicit empty attachments list (the default)");
    },
  }),
  /** Attachment names are reduced to a safe basename. */
  check({
    id: "SEND-ATTACHMENT-SANITIZED",
    level: "MUST",
    section: SECTION,
    title: "An attachment name with a path is sanitized to its basename",
    needs: [],
    async run(ctx) {
      const content = ctx.nonce();
      const turn = await ctx.turn({
        prompt: prompts.readAttachment("acc-escape.txt"),
        streamToolCalls: true,
        metadata: { attachments: [attachment("../../acc-escape.txt", content)] },
      });
      ensureTurnOk(turn);
      ensureAttachmentRead(ctx, turn, "acc-escape.txt", content, "reading the sanitized attachment");
    },
  }),
  /** Two attachments of one name both arrive, under different names. */
  check({
    id: "SEND-ATTACHMENT-DEDUP",
    level: "MUST",
    section: SECTION,
    title: "Attachments with the same name are de-duplicated (both arrive under distinct names)",
    needs: [],
    async run(ctx) {
      const turn = await ctx.turn({
        prompt: prompts.listAttachments,
        metadata: {
          attachments: [attachment("acc-dup.txt", ctx.nonce()), attachment("acc-dup.txt", ctx.nonce())],
        },
      });
      ensureTurnOk(turn);
      // A de-duplicated name may hold a space ("acc-dup (1).txt"); the bare stem alone names no file.
      const names = distinctMentions(turn.text, DEDUP_NAME);
      names.delete("acc-dup");
      if (names.size < 2)
        fail(
          `the agent sees ${names.size} distinct name(s) for two same-named attachments: ${[...names].join(", ")}`,
          turn.text,
        );
    },
  }),
  /** Malformed entries are dropped silently: no error, the good entry still arrives. */
  check({
    id: "SEND-ATTACHMENT-MALFORMED-DROPPED",
    level: "MUST",
    section: SECTION,
    title: "Malformed attachment entries are dropped silently (no error; well-formed ones still arrive)",
    needs: [],
    async run(ctx) {
      const turn = await ctx.turn({
        prompt: prompts.listAttachments,
        metadata: {
          attachments: [
            attachment("acc-good.txt", "fine"),
            { name: "acc-bad-nodata.txt", mediaType: "text/plain" },
            { name: "acc-bad-number.txt", mediaType: "text/plain", dataBase64: 42 },
            // Attachment: base64 only, no `data:` prefix (what a browser's FileReader gives).
            {
              name: "acc-bad-dataurl.txt",
              mediaType: "text/plain",
              dataBase64: "data:text/plain;base64,ZmluZQ==",
            },
            "acc-bad-string",
            null,
          ],
        },
      });
      ensureTurnOk(turn);
      ensureIncludes(turn.text, "acc-good.txt", "listing the attachments");
      for (const bad of ["acc-bad-nodata.txt", "acc-bad-number.txt", "acc-bad-dataurl.txt"]) {
        if (turn.text.includes(bad)) fail(`the malformed entry ${bad} reached the agent`, turn.text);
      }
    },
  }),
  /** An isolated turn sees none of the conversation's files, and on every agent kind none of its workspace's. */
  check({
    id: "SEND-ISOLATED",
    level: "MUST",
    section: SECTION,
    title:
      "isolated: true runs in a throwaway sandbox without the workspace files, on every agent kind (a storage agent's stored files, a repository agent's clone); isolated: false keeps them",
    needs: [],
    async run(ctx) {
      for (const agent of agentsBesides(ctx)) await ensureIsolatedFromWorkspace(ctx, agent);
      const id = ctx.newConversationId();
      const name = `acc-${ctx.nonce()}.txt`;
      const content = ctx.nonce();
      const write = await ctx.turn({
        conversationId: id,
        prompt: prompts.writeFile(name, content),
        streamToolCalls: true,
      });
      ensureTurnOk(write, "write turn");
      await ctx.waitForSession(id);
      const turn = await ctx.turn({
        conversationId: id,
        prompt: prompts.readFile(name),
        metadata: { isolated: true },
        streamToolCalls: true,
      });
      ensureTurnOk(turn, "isolated read turn");
      // The content is also in the conversation (the write prompt held it): a resumed agent can recite it
      // from memory, so the evidence is what its tools found, when the deployment streams tool blocks.
      if (!hasToolBlocks(write) && !hasToolBlocks(turn)) {
        if (turn.text.includes(content))
          fail(
            "the isolated turn's reply holds the conversation file's content (judged from the reply alone: the deployment streams no tool blocks)",
            turn.text,
          );
        ctx.note(
          "the stream carries no tool blocks although stream_tool_calls was true: judged from the reply text alone (a weaker pass)",
        );
        return;
      }
      const writes = toolCalls(write).filter((c) => c.input.includes(name));
      if (writes.length > 0 && !writes.some((c) => c.result && !c.result.isError))
        skip(`the write turn could not write ${name}, so isolation could not be judged`);
      const reads = toolCalls(turn).filter((c) => c.input.includes(name));
      const leaked = reads.find((c) => c.result && !c.result.isError && c.result.content.includes(content));
      if (leaked) fail("the isolated turn's tool read a file of the conversation", describeCalls([leaked]));
      if (reads.length === 0) {
        if (turn.text.includes(content))
          skip(
            `the isolated turn made no tool call on ${name} and its reply holds the content, which the agent may recite from the conversation: inconclusive`,
          );
        ctx.note(`the isolated turn made no tool call on ${name}: judged from the reply text alone`);
      }
    },
  }),
  /** delivery "sync" is the supported default. */
  check({
    id: "SEND-DELIVERY-SYNC",
    level: "MUST",
    section: SECTION,
    title: 'metadata.delivery "sync" runs the turn as usual',
    needs: [],
    async run(ctx) {
      ensureTurnOk(await ctx.turn({ prompt: prompts.hello, metadata: { delivery: "sync" } }));
    },
  }),
  /** delivery "async" is not supported. */
  check({
    id: "ERR-501-ASYNC",
    level: "MUST",
    section: "Errors",
    title:
      'metadata.delivery "async" gives 501, on send-message and on the model-routed send, for a new conversation and a resumed one',
    needs: [],
    async run(ctx) {
      // Only "sync" is supported, whatever conversation the turn is for (a new one, a resumed one), and the
      // routed send has "the same body and behaviour": the refusal holds on both routes.
      const resumed = await settledConversation(ctx);
      for (const [id, into] of [
        [resumed.id, " into a resumed conversation"],
        [ctx.newConversationId(), ""],
      ] as const)
        for (const routed of [false, true]) {
          const turn = await ctx.turn({
            conversationId: id,
            prompt: prompts.hello,
            metadata: { delivery: "async" },
            routed,
            model: routed ? ctx.inputs.agent : undefined,
            refusalExpected: true,
          });
          ensureStatus(
            turn.response,
            501,
            `delivery async${into} on ${routed ? "the model-routed send" : "send-message"}`,
          );
        }
    },
  }),
  /** An active automation's turn runs, and a model in the body wins over the automation's. */
  check({
    id: "SEND-AUTOMATION-BODY-WINS",
    level: "MUST",
    section: SECTION,
    title:
      "metadata.automation supplies defaults for the turn, on the agent's send and the model-routed send alike; a model in the body wins over the automation's",
    needs: ["automation"],
    async run(ctx) {
      const automation = ctx.inputs.automation;
      const plain = await ctx.turn({ prompt: prompts.whichModel, metadata: { automation } });
      ensureTurnOk(plain, "automation turn");
      const automationModel = plain.reading.model;
      // Every turn that names the automation gets its defaults, a resumed one as much as a conversation's first.
      if (plain.conversationId) {
        const resumed = await ctx.turn({
          conversationId: plain.conversationId,
          prompt: prompts.whichModel,
          metadata: { automation },
        });
        ensureTurnOk(resumed, "resumed automation turn");
        if (automationModel !== undefined && resumed.reading.model !== automationModel)
          fail(
            `with metadata.automation ${JSON.stringify(automation)}, message_start.model is ${JSON.stringify(automationModel)} on a conversation's first turn and ${JSON.stringify(resumed.reading.model)} on its next`,
          );
      }
      // The routed send reads the same body (Endpoints/Model-routed send): the automation it names supplies the
      // same default there, so the turn runs on the model the agent's own send ran on.
      const routed = await ctx.turn({
        routed: true,
        model: ctx.inputs.agent,
        prompt: prompts.whichModel,
        metadata: { automation },
      });
      ensureTurnOk(routed, "automation turn through the model-routed send");
      if (automationModel !== undefined && routed.reading.model !== automationModel)
        fail(
          `with metadata.automation ${JSON.stringify(automation)}, message_start.model is ${JSON.stringify(automationModel)} on the agent's send and ${JSON.stringify(routed.reading.model)} on the model-routed send`,
        );
      const models = await modelsInfo(ctx);
      const other = models.ids.find((id) => id !== automationModel);
      if (!other) skip("the agent offers no model other than the automation's");
      const turn = await ctx.turn({ prompt: prompts.whichModel, model: other, metadata: { automation } });
      ensureTurnOk(turn, "automation turn with a model in the body");
      if (!turnRanAs(turn, other)) fail(`the turn did not run on the body's model ${other}`, turn.text);
    },
  }),
  /** Unknown automation names are ignored: no error. */
  check({
    id: "SEND-AUTOMATION-UNKNOWN-IGNORED",
    level: "MUST",
    section: SECTION,
    title: "An unknown metadata.automation name is ignored (the turn runs, no error)",
    needs: [],
    async run(ctx) {
      const token = ctx.nonce();
      const turn = await ctx.turn({
        prompt: prompts.token(token),
        metadata: { automation: `acc-no-such-automation-${token}` },
      });
      ensureTurnOk(turn);
      ensureIncludes(turn.text, token, "reply of a turn with an unknown automation");
      // Ignored means no automation at all: the turn runs on the model a turn without one runs on (the model
      // fallback: the automation's, then the agent's default), not on some other automation's.
      const models = await modelsInfo(ctx);
      // Judged where message_start names a listed model by its id, so another listed model is told for sure.
      const ran = turn.reading.model;
      if (ran !== undefined && models.ids.includes(ran) && ran !== models.defaultId)
        fail(
          `the turn with an unknown automation ran on ${JSON.stringify(turn.reading.model)}, not the agent's default ${models.defaultId}: the name was not ignored`,
        );
    },
  }),
  /** A storage-backed agent runs turns like any other. */
  check({
    id: "SEND-STORAGE-AGENT",
    level: "MUST",
    section: SECTION,
    title:
      "A storage-backed agent runs a turn and lists its models; the id it generates comes back in X-Conversation-Id and names the conversation on its routes",
    needs: ["storageAgent"],
    async run(ctx) {
      const agent = ctx.inputs.storageAgent;
      ensureStatus(await ctx.listModels({ agent }), 200, "models list of the storage agent");
      // No conversation_id: the id resolution table's "omitted" row holds on every agent kind.
      const turn = await ctx.turn({ agent, prompt: prompts.hello });
      ensureTurnOk(turn);
      const id = turn.conversationId;
      if (!id) fail("the storage agent's turn of a new conversation carries no X-Conversation-Id");
      const read = await ctx.getConversation(id, { agent });
      ensureStatus(read, 200, `the conversation X-Conversation-Id names (${id}) on the storage agent`);
      const body = isRecord(read.body) && isRecord(read.body.conversation) ? read.body.conversation : {};
      if (body.id !== id)
        fail(`X-Conversation-Id says ${id}, the conversation read there says ${JSON.stringify(body.id)}`);
    },
  }),
  /** The official messages-API client can consume the stream (the point of the format). */
  check({
    id: "SEND-OFFICIAL-CLIENT",
    level: "SHOULD",
    section: SECTION,
    title:
      "The official messages-API client (@anthropic-ai/sdk) streams a turn with base URL {base_url}/api/agents/{agent}",
    needs: [],
    async run(ctx) {
      let sdk: typeof import("@anthropic-ai/sdk");
      try {
        sdk = await import("@anthropic-ai/sdk");
      } catch {
        skip("@anthropic-ai/sdk is not installed", "input");
      }
      const models = await modelsInfo(ctx);
      const id = ctx.newConversationId();
      ctx.trackSentOutside(id, ctx.inputs.key);
      // The SDK's own retries (429, 5xx, connection errors) would hide a failure; load refusals skip below.
      const client = new sdk.default({ apiKey: ctx.inputs.key, baseURL: ctx.agentUrl(), maxRetries: 0 });
      const token = ctx.nonce();
      try {
        const stream = client.messages.stream({
          model: models.defaultId,
          max_tokens: 1024,
          messages: [{ role: "user", content: prompts.token(token) }],
          // The SDK types allow only user_id; the service reads conversation_id (so the suite can clean up).
          metadata: { conversation_id: id } as unknown as { user_id: string },
        });
        const message = await stream.finalMessage();
        const text = message.content.map((b) => (b.type === "text" ? b.text : "")).join("");
        ensureIncludes(text, token, "the official client's final message");
      } catch (error) {
        if (error instanceof CheckFailure) throw error;
        const status = isRecord(error) ? error.status : undefined;
        if (typeof status === "number" && LOAD_REFUSAL_STATUSES.has(status))
          skip(`the deployment kept refusing with ${status} (rate limit or overload): inconclusive`);
        fail(`the official client failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    },
  }),
  /** Malformed JSON is a client error (the status is not shown by the API). */
  check({
    id: "SEND-MALFORMED-JSON",
    level: "INFO",
    section: SECTION,
    title: "A body that is not JSON gets a 4xx, not a 5xx",
    needs: [],
    async run(ctx) {
      const res = await ctx.call("sendMessage", {
        method: "POST",
        url: `${ctx.agentUrl()}/v1/messages`,
        key: ctx.inputs.key,
        rawBody: '{"messages": [',
      });
      ensureClientError(res, "malformed JSON body");
    },
  }),
  /** Routing string `<prefix>--<agent>` selects the agent. */
  check({
    id: "ROUTED-PREFIX",
    level: "MUST",
    section: ROUTED,
    title: "POST /api/agents/v1/messages with model <routing_prefix>--<agent> runs a turn on that agent",
    needs: ["routingPrefix"],
    async run(ctx) {
      const id = ctx.newConversationId();
      const turn = await ctx.turn({
        routed: true,
        model: `${ctx.inputs.routingPrefix}--${ctx.inputs.agent}`,
        conversationId: id,
        prompt: prompts.hello,
      });
      ensureTurnOk(turn);
      ensureStatus(await ctx.getConversation(id), 200, "the routed conversation on the agent's path");
    },
  }),
  /** A bare agent name in model selects the agent. */
  check({
    id: "ROUTED-BARE-NAME",
    level: "MUST",
    section: ROUTED,
    title:
      "POST /api/agents/v1/messages with model = bare agent name runs a turn on that agent, whichever agent of the workspace it names",
    needs: [],
    async run(ctx) {
      // The default agent alone cannot tell "runs on the named agent" from "runs on the default one"; each
      // agent kind has its own naming (Conventions: a repository-backed agent is `<owner>-<repo>`).
      const agents = everyAgent(ctx);
      for (const agent of agents) {
        const id = ctx.newConversationId();
        const turn = await ctx.turn({
          routed: true,
          model: agent,
          agent,
          conversationId: id,
          prompt: prompts.hello,
        });
        ensureTurnOk(turn, `routed turn naming ${agent}`);
        ensureStatus(
          await ctx.getConversation(id, { agent }),
          200,
          `the routed conversation on ${agent}'s path`,
        );
      }
    },
  }),
];
