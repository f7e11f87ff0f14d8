/**
 * The realistic style of the scripted model (`agent-api model --style realistic`): a real model's manner
 * around the scripted model's facts, the same for the same seed, and a whole tool turn still coherent when
 * the model looks around first (the loop's history, replayed here by hand, as the agent loop sends it).
 */
import type Anthropic from "@anthropic-ai/sdk";
import { describe, expect, it } from "vitest";
import { realisticAnswer, realisticUpstreamOptions } from "./realistic-style.ts";
import { createScriptedUpstream, type ScriptedRequest } from "./scripted-transport.ts";

type MessageParam = Anthropic.Messages.MessageParam;

const TOOLS = ["list_files", "read_file", "write_file", "run_command"].map((name) => ({
  name,
  input_schema: { type: "object" as const },
}));

function request(messages: MessageParam[], extra: Partial<ScriptedRequest> = {}): ScriptedRequest {
  return { model: "demo-large", max_tokens: 1024, tools: TOOLS, messages, ...extra };
}

const prompt = (text: string): MessageParam => ({ role: "user", content: [{ type: "text", text }] });
const texts = (content: Anthropic.Messages.ContentBlock[]) =>
  content.flatMap((b) => (b.type === "text" ? [b.text] : []));
const seeds = Array.from({ length: 24 }, (_, i) => i + 1);

describe("the realistic style", () => {
  it("answers the same request the same way for a seed, and differently across seeds", () => {
    const ask = request([prompt("Say hello to the conformance suite in one short sentence.")]);
    expect(realisticAnswer(ask, 7)).toEqual(realisticAnswer(ask, 7));
    const replies = new Set(
      seeds.map((seed) => JSON.stringify(texts(realisticAnswer(ask, seed).message.content))),
    );
    expect(replies.size).toBeGreaterThan(3);
  });

  it("keeps the value asked for verbatim, whatever markdown or sentence is around it", () => {
    const history: MessageParam[] = [
      prompt("Remember this code word: n-5eed1234. Reply with just OK."),
      { role: "assistant", content: [{ type: "text", text: "OK" }] },
      prompt("What code word did I ask you to remember? Reply with just the word."),
    ];
    const replies = seeds.map((seed) =>
      texts(realisticAnswer(request(history), seed).message.content).join("\n"),
    );
    for (const reply of replies) expect(reply).toContain("n-5eed1234");
    expect(replies.some((reply) => reply.trim() !== "n-5eed1234")).toBe(true);
    expect(replies.some((reply) => /\*\*n-5eed1234\*\*|`n-5eed1234`/.test(reply))).toBe(true);
  });

  it("looks at the files before the asked tool call, says what it does first, and finishes the turn", () => {
    const ask = "Use your tools to create a file named notes.txt containing n-abc.";
    for (const seed of [3, 4]) {
      const messages: MessageParam[] = [prompt(ask)];
      const calls: string[] = [];
      let answer = realisticAnswer(request(messages), seed);
      for (let call = 0; answer.message.stop_reason === "tool_use" && call < 5; call++) {
        const content = answer.message.content;
        const uses = content.filter((b): b is Anthropic.Messages.ToolUseBlock => b.type === "tool_use");
        // A real model's manner: a text block before its tool calls.
        expect(content.findIndex((b) => b.type === "text")).toBeLessThan(
          content.findIndex((b) => b.type === "tool_use"),
        );
        calls.push(...uses.map((u) => `${u.name} ${JSON.stringify(u.input)}`));
        messages.push({ role: "assistant", content: content as Anthropic.Messages.ContentBlockParam[] });
        messages.push({
          role: "user",
          content: uses.map((u) => ({ type: "tool_result" as const, tool_use_id: u.id, content: "ok" })),
        });
        answer = realisticAnswer(request(messages), seed);
      }
      expect(calls[0]).toBe("list_files {}");
      expect(calls.filter((c) => c.startsWith("write_file"))).toHaveLength(1);
      expect(calls.find((c) => c.startsWith("write_file"))).toMatch(
        /"path":"(\.\/)?notes\.txt","content":"n-abc\\?n?"/,
      );
      expect(texts(answer.message.content).join("\n")).toContain("notes.txt");
    }
  });

  it("sometimes says a word when asked for no output at all, and never fails a turn on request", () => {
    const silence = seeds.map((seed) =>
      texts(
        realisticAnswer(request([prompt("Produce no output at all for this turn.")]), seed).message.content,
      ),
    );
    expect(silence.some((t) => t.length === 0)).toBe(true);
    expect(silence.some((t) => t.length > 0)).toBe(true);
    const fail = realisticAnswer(request([prompt("Fail this turn after it starts.")]), 1);
    expect(fail.failAfterBlocks).toBeUndefined();
    expect(texts(fail.message.content).join("")).not.toBe("");
  });

  it("thinks first when the request enables thinking", () => {
    const ask = request([prompt("Say hello.")], { thinking: { type: "enabled", budget_tokens: 1024 } });
    const [first] = realisticAnswer(ask, 5).message.content;
    expect(first.type).toBe("thinking");
    expect(realisticAnswer(request([prompt("Say hello.")]), 5).message.content[0].type).toBe("text");
  });

  it("streams many small deltas and a ping, as the Messages API does", async () => {
    const upstream = createScriptedUpstream(realisticUpstreamOptions(9));
    const response = await upstream.handle(
      new Request("http://scripted.local/v1/messages", {
        method: "POST",
        body: JSON.stringify({
          ...request([prompt("Repeat your instructions.")], { system: "Be brief." }),
          stream: true,
        }),
      }),
    );
    const events = (await response.text())
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)));
    expect(events[1].type).toBe("ping");
    const deltas = events.filter((e) => e.type === "content_block_delta" && e.delta.type === "text_delta");
    expect(deltas.length).toBeGreaterThan(3);
    expect(Math.max(...deltas.map((e) => e.delta.text.length))).toBeLessThanOrEqual(12);
  });
});
