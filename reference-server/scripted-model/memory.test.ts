/**
 * The scripted model reads what a turn needs of the history, not all of it (issue 13): a turn that recalls
 * nothing reads no earlier message, and a recall reads back only to the newest remembered word. Counted
 * through a Proxy over the request's messages, not timed.
 */
import type Anthropic from "@anthropic-ai/sdk";
import { describe, expect, it } from "vitest";
import { lastRememberedWord, rememberedCodeWords } from "./memory.ts";
import { SUMMARY_MARKER } from "./prompt-parts.ts";
import { scriptedAnswer } from "./scripted-model.ts";

type MessageParam = Anthropic.Messages.MessageParam;

const user = (text: string): MessageParam => ({ role: "user", content: [{ type: "text", text }] });
const assistant = (text: string): MessageParam => ({ role: "assistant", content: [{ type: "text", text }] });

/** 2 × turns messages; the first user message remembers `first`, the one at `at` remembers `later`. */
function history(turns: number, at?: number): MessageParam[] {
  const messages: MessageParam[] = [];
  for (let turn = 0; turn < turns; turn++) {
    const text =
      turn === 0
        ? "Remember this code word: first. Reply with just OK."
        : turn === at
          ? "Remember this code word: later. Reply with just OK."
          : `Say hello, number ${turn}.`;
    messages.push(user(text), assistant("OK"));
  }
  return messages;
}

/** The messages with every element read counted. */
function counted(messages: MessageParam[]): { messages: MessageParam[]; reads: Set<number> } {
  const reads = new Set<number>();
  const proxy = new Proxy(messages, {
    get(target, key, receiver) {
      if (typeof key === "string" && /^\d+$/.test(key)) reads.add(Number(key));
      return Reflect.get(target, key, receiver);
    },
  });
  return { messages: proxy, reads };
}

/** The transport hands the model the body's size, which it measured before parsing (not through the proxy). */
function answer(messages: MessageParam[], bodyChars = 1000): string {
  const result = scriptedAnswer({ model: "m", max_tokens: 100, messages }, {}, bodyChars);
  return result.message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("");
}

describe("the scripted model's memory", () => {
  it("a turn that recalls nothing reads only its own end of a 1,400-message history", () => {
    const { messages, reads } = counted([...history(700), user("Say hello in one short sentence.")]);
    expect(answer(messages)).toContain("Say hello");
    expect(reads.size).toBeLessThanOrEqual(4);
  });

  it("a recall reads back to the newest remembered word and no further", () => {
    const { messages, reads } = counted([
      ...history(700, 650),
      user("What code word did I ask you to remember? Reply with just the word."),
    ]);
    expect(answer(messages)).toBe("later");
    // The first two: the imitated prompt cache asks whether the model answered before (it stops at one).
    const earlier = [...reads].filter((i) => i > 1);
    expect(Math.min(...earlier)).toBeGreaterThanOrEqual(1300);
    expect(reads.size).toBeLessThanOrEqual(110);
  });

  it("remembers what the whole history says: the newest word, a summary's words, this prompt's own", () => {
    expect(lastRememberedWord(history(300))).toBe("first");
    expect(lastRememberedWord(history(300, 200))).toBe("later");
    expect(
      lastRememberedWord([user(`${SUMMARY_MARKER}\nCode words remembered: a, b.`), assistant("OK")]),
    ).toBe("b");
    expect(lastRememberedWord(history(5))).toBe(rememberedCodeWords(history(5)).at(-1));
    expect(
      answer([
        ...history(3),
        user("Remember this code word: now. Then: what code word did I ask you to remember?"),
      ]),
    ).toContain("now");
  });
});

describe("the scripted model's usage", () => {
  it("is the same whether it measures the history itself or is given the body's size", () => {
    const params = {
      model: "m",
      max_tokens: 100,
      stream: true,
      system: "Be brief. ✓ ünïcode",
      messages: [...history(40), user("Say hello — in one “short” sentence.")],
    };
    const measured = scriptedAnswer(params).message.usage;
    const given = scriptedAnswer(params, {}, JSON.stringify(params).length).message.usage;
    expect(given).toEqual(measured);
  });
});
