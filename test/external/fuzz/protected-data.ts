/** The data created before fuzzing and read again afterwards: what must not change. */

import type { Transport } from "./transport.ts";
import type { FuzzOptions } from "./types.ts";

/** Reads what must not change: each protected conversation and its transcript, as its owner sees them. */
export async function snapshot(
  transport: Transport,
  options: FuzzOptions,
  protectedData: { agent: string; id: string; key: string }[],
): Promise<string[]> {
  const out: string[] = [];
  for (const p of protectedData) {
    for (const suffix of ["", "/messages", "/last-compaction"]) {
      const sent = await transport.send(
        options.baseUrl,
        "GET",
        `/api/agents/${p.agent}/conversations/${encodeURIComponent(p.id)}${suffix}`,
        { "X-Api-Key": p.key },
        undefined,
        30_000,
      );
      out.push(`${p.id}${suffix} ${sent.status} ${sent.bytes.toString("utf8")}`);
    }
  }
  return out;
}

export async function turn(
  transport: Transport,
  options: FuzzOptions,
  agent: string,
  key: string,
  id: string,
  prompt: string,
): Promise<void> {
  const sent = await transport.send(
    options.baseUrl,
    "POST",
    `/api/agents/${agent}/v1/messages`,
    { "X-Api-Key": key, "content-type": "application/json" },
    Buffer.from(
      JSON.stringify({ messages: [{ role: "user", content: prompt }], metadata: { conversation_id: id } }),
    ),
    60_000,
  );
  if (sent.status !== 200)
    throw new Error(`set-up turn on ${agent}/${id} gave ${sent.status}: ${sent.bytes.toString("utf8")}`);
}

export async function waitForSession(
  transport: Transport,
  options: FuzzOptions,
  agent: string,
  key: string,
  id: string,
): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const sent = await transport.send(
      options.baseUrl,
      "GET",
      `/api/agents/${agent}/conversations/${encodeURIComponent(id)}`,
      { "X-Api-Key": key },
      undefined,
      10_000,
    );
    const body = JSON.parse(sent.bytes.toString("utf8")) as {
      conversation?: { agent_session_id?: string | null };
    };
    if (body.conversation?.agent_session_id) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`agent_session_id of ${id} was not recorded within 15 s`);
}
