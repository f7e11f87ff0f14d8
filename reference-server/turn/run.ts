/**
 * A turn's run: the sandbox prepared, the engine's events turned into the API's stream events as each
 * block completes, the sandbox finished, the turn committed, the lock released. Any failure becomes one
 * coded TurnFailed item (failure.ts): the SSE `error` event on the wire, the code in the log and the
 * transcript.
 */
import { randomUUID } from "node:crypto";
import type { AgentEvent, TurnOutcome, TurnUsage } from "../engine/types.ts";
import { TurnLeaseLostError } from "../store/types.ts";
import { commitTurn } from "./commit.ts";
import type { TurnContext } from "./context.ts";
import { blockEvents, messageEnd, messageStart, type TurnStreamItem, usageFor } from "./events.ts";
import { failureOf, fixedFailure, storeFailureOf, type TurnFailure } from "./failure.ts";
import { loadHistory } from "./history.ts";
import { TurnInterrupted, TurnSignal } from "./interruption.ts";
import { LazySandbox } from "./lazy-sandbox.ts";
import type { TurnPlan } from "./plan.ts";

export async function* runTurn(
  context: TurnContext,
  plan: TurnPlan,
  clientSignal: AbortSignal,
): AsyncGenerator<TurnStreamItem, void, void> {
  const { record, metadata } = plan;
  const { store, options } = context;
  const interrupt = new AbortController();
  context.running.set(record.id, interrupt);
  // Another instance took the lease (this one could not renew it in time): the turn stops now and says why,
  // rather than running on beside the other instance's turn until its commit is refused.
  const lost = plan.release.lost;
  const onLeaseLost = () => interrupt.abort(new TurnInterrupted(storeFailureOf(new TurnLeaseLostError())));
  if (lost?.aborted) onLeaseLost();
  else lost?.addEventListener("abort", onLeaseLost, { once: true });
  const cut = new TurnSignal(clientSignal, interrupt.signal, options.turnTimeoutMs, context.liveTimers);
  const { signal } = cut;
  // A newer turn supersedes a recording still pending from an earlier one.
  await context.sessions.cancel(record.id);
  const resumedSessionId = record.agentSessionId;
  const session = resumedSessionId ? await store.getSession(resumedSessionId) : undefined;
  const history = loadHistory(session?.context);
  const modelConfig = plan.agent.models.find((m) => m.id === plan.model);
  const streamToolCalls = metadata.stream_tool_calls === true;
  const agentEvents: AgentEvent[] = [];
  const readOnly = metadata.read_only !== false;
  const isolated = metadata.isolated === true;
  const sandbox = new LazySandbox(
    () =>
      context.sandbox.acquire({
        conversationId: record.id,
        generation: record.generation,
        agent: {
          workspaceId: plan.agent.workspaceId,
          name: plan.agent.name,
          kind: plan.agent.kind,
          secrets: plan.agent.secrets,
          repoUrl: plan.agent.repoUrl,
          filesDir: plan.agent.filesDir,
        },
        isolated,
        readOnly,
        attachments: metadata.attachments,
        // Files are saved to a shared store only while this turn still holds the conversation's lease.
        fence: plan.release.fence,
      }),
    // Ends a running tool with the turn (disconnect, time-out, delete), whatever the engine passes.
    signal,
  );
  let outcome: TurnOutcome | undefined;
  let failure: TurnFailure | undefined;
  let pushedCommit: string | null = null;
  // message_start waits for the upstream's first message_start, so it carries the input usage (only
  // keep-alive comments go before it); message_delta carries the turn's sums. Without it, it goes first.
  let started = false;
  const start = (usage?: TurnUsage) => {
    started = true;
    return messageStart(`msg_${randomUUID().replaceAll("-", "")}`, plan.model, usage);
  };
  try {
    // Attachments are written before the turn starts: the agent is told which files arrived.
    const hasAttachments = Array.isArray(metadata.attachments) && metadata.attachments.length > 0;
    const attachments = hasAttachments ? (await sandbox.ready()).attachments : [];
    const run = context.engine.runTurn({
      prompt: plan.prompt,
      instructions: plan.agent.instructions,
      system: plan.system,
      model: plan.model,
      upstreamModel: modelConfig?.upstream ?? plan.model,
      history: history.messages,
      historyTokens: history.tokens,
      attachments,
      environment: { agentKind: plan.agent.kind, isolated, readOnly },
      // Offered even where no sandbox can be built: each call is then refused with what failed and the fix,
      // which the model relays and a client streaming tool calls sees, rather than a bare "no tools".
      tools: sandbox.tools,
      compactionBudgetTokens: options.compactionBudgetTokens,
      thinkingBudgetTokens: modelConfig?.thinkingBudgetTokens ?? plan.agent.thinkingBudgetTokens,
      maxTokens: modelConfig?.maxTokens,
      signal,
    });
    let index = 0;
    // Quiet stretches (the upstream working, a tool running) are covered by the SSE writer's keep-alives.
    for (;;) {
      const step = await run.next();
      if (step.done) {
        outcome = step.value;
        break;
      }
      if (step.value.kind === "input_usage") {
        if (!started) yield start(step.value.usage);
        continue;
      }
      if (!started) yield start();
      agentEvents.push(step.value);
      const events = blockEvents(step.value, index, streamToolCalls);
      if (events.length > 0) index++;
      yield* events;
    }
    // A turn cut short is a failure whatever the engine returned: it must not move the session.
    if (signal.aborted) failure = cut.why();
  } catch (error) {
    failure = signal.aborted ? cut.why() : failureOf(error);
  }
  try {
    // Always awaited before the lock is released: it ends whatever process of the turn still runs.
    const finished = await sandbox.finish(failure === undefined ? "completed" : "failed");
    pushedCommit = finished?.pushedCommit ?? null;
  } catch (error) {
    failure ??= failureOf(error);
  }
  try {
    await commitTurn(context, plan, { agentEvents, outcome, resumedSessionId, failure, pushedCommit });
  } catch (error) {
    failure ??= storeFailureOf(error);
  } finally {
    cut.dispose();
    lost?.removeEventListener("abort", onLeaseLost);
    if (context.running.get(record.id) === interrupt) context.running.delete(record.id);
    plan.release();
  }
  if (!started) yield start();
  if (failure !== undefined || outcome === undefined) {
    yield { type: "turn_failed", failure: failure ?? fixedFailure("AGENT_API_TURN_NO_OUTCOME") };
    return;
  }
  const price = modelConfig?.price;
  yield* messageEnd(usageFor(outcome.usage, price), outcome.stopReason);
}
