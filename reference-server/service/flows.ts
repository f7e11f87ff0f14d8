/**
 * Deployed flows: `POST {flow_url}/apps/{app_id}` runs the flow's steps in order, each one agent turn
 * whose prompt is a template over the input variables (`{{name}}`) and the previous step's output
 * (`{{previous}}`). The response body is "not shown" by the API; ours is {app_id, run_id, output, steps}.
 */
import { randomUUID } from "node:crypto";
import type { FlowConfig } from "../config/types.ts";
import { badRequest, flowStepFailed, notFound, unauthorized } from "../errors/catalogue.ts";
import type { TurnService } from "./turns.ts";
import type { ServiceDeps } from "./types.ts";

export interface FlowStepResult {
  name: string;
  agent: string;
  conversation_id: string;
  output: string;
}

export interface FlowRunResult {
  app_id: string;
  run_id: string;
  output: string;
  steps: FlowStepResult[];
}

export function renderTemplate(template: string, vars: Record<string, string>): string {
  return template.replace(/\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g, (whole, name: string) =>
    Object.hasOwn(vars, name) ? vars[name] : whole,
  );
}

/** Whether a key is one of a flow's keys; with `flowId` undefined, of any deployed flow. */
export type FlowKeyCheck = (flowId: string | undefined, key: string) => boolean;

export class FlowService {
  readonly #deps: ServiceDeps;
  readonly #turns: TurnService;
  readonly #isFlowKey: FlowKeyCheck;

  constructor(deps: ServiceDeps, turns: TurnService, isFlowKey: FlowKeyCheck) {
    this.#deps = deps;
    this.#turns = turns;
    this.#isFlowKey = isFlowKey;
  }

  /**
   * The key is checked before the flow is looked up (and before the body is read): a key of this flow
   * runs it; a key of another flow gets 404 for a known and an unknown app id alike; any other key, or
   * none, gets 401 whether or not the app id exists. No answer and no timing tells a caller without the
   * flow's key whether its app id exists (config/keys.ts compares as long for an unknown id).
   */
  authorize(appId: string, key: string | undefined): FlowConfig {
    if (!key) throw unauthorized();
    if (this.#isFlowKey(appId, key)) return this.#flow(appId);
    throw this.#isFlowKey(undefined, key) ? notFound("Flow not found") : unauthorized();
  }

  #flow(appId: string): FlowConfig {
    const flow = this.#deps.config.flows.find((f) => f.id === appId);
    if (!flow) throw notFound("Flow not found");
    return flow;
  }

  /** Runs the flow; the caller has been through `authorize`. */
  async invoke(appId: string, inputVars: Record<string, string>): Promise<FlowRunResult> {
    const flow = this.#flow(appId);
    const missing = flow.inputs.filter((name) => typeof inputVars[name] !== "string");
    if (missing.length > 0) throw badRequest(`input_vars is missing ${missing.join(", ")}`);
    const workspace = this.#deps.config.workspaces.find((w) => w.id === flow.workspaceId);
    const member = workspace?.members.find((m) => m.id === flow.runAsMemberId);
    const caller = {
      workspaceId: flow.workspaceId,
      memberId: flow.runAsMemberId,
      memberName: member?.name ?? flow.runAsMemberId,
      role: "Operator" as const,
      admissionKey: `flow:${flow.id}`,
    };
    const runId = `run_${randomUUID()}`;
    const steps: FlowStepResult[] = [];
    let previous = "";
    for (const step of flow.steps) {
      const prompt = renderTemplate(step.prompt, { ...inputVars, previous });
      const turn = await this.#turns.prepare({
        caller,
        agent: step.agent,
        body: { messages: [{ role: "user", content: prompt }] },
        routed: false,
        // A flow's steps are its own business: readable by id (steps[].conversation_id), not listed.
        hidden: true,
      });
      const texts: string[] = [];
      for await (const event of turn.events(new AbortController().signal)) {
        if (event.type === "content_block_delta" && event.delta.type === "text_delta")
          texts.push(event.delta.text);
        if (event.type === "turn_failed") {
          throw flowStepFailed(`Flow step ${step.name} failed: ${event.failure.message}`);
        }
      }
      previous = texts.join("\n\n");
      steps.push({
        name: step.name,
        agent: step.agent,
        conversation_id: turn.conversationId,
        output: previous,
      });
    }
    return { app_id: flow.id, run_id: runId, output: previous, steps };
  }
}
