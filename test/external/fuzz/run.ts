/** One fuzz run: set-up, the seeded requests, the checks after, the report. */

import fc from "fast-check";
import { SpecValidator } from "../../../conformance/spec-validator.ts";
import { classOf } from "./findings.ts";
import { bodyRun, fuzzString, headRun, nastyString, plainWord } from "./hostile-values.ts";
import { coverageTags, describeRequest, excerpt, judge } from "./judge.ts";
import { snapshot, turn, waitForSession } from "./protected-data.ts";
import { planArb, type Setup } from "./requests.ts";
import type { GenContext } from "./schema-values.ts";
import { SpecModel } from "./spec-model.ts";
import { headSize, type Sent, Transport } from "./transport.ts";
import type { Finding, FuzzAgents, FuzzOptions, FuzzReport } from "./types.ts";

export const KINDS: Finding["kind"][] = [
  "5xx",
  "no-response",
  "hang",
  "undocumented-status",
  "spec-violation",
  "accepted-invalid",
  "crash",
];

export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const spec = SpecModel.load();
  const validator = await SpecValidator.load();
  const concurrency = options.concurrency ?? 8;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const probeEvery = options.probeEvery ?? 200;
  const agents: FuzzAgents = {
    main: options.agents?.main ?? "demo-agent",
    storage: options.agents?.storage ?? "notes-agent",
    repo: options.agents?.repo ?? "acme-widgets",
    foreign: options.agents?.foreign ?? "other-agent",
  };
  const prefix = options.routingPrefix ?? "agent-api";
  const transport = new Transport(concurrency);
  const tag = `${options.seed}-${Date.now().toString(36)}`;

  // Data that must survive the run unchanged.
  const k = options.keys;
  const protectedData = [
    {
      agent: agents.main,
      id: `fz-prot-private-${tag}`,
      key: k.member,
      prompts: ["Remember this code word: fz-alpha. Reply with just OK.", "Say hello."],
    },
    {
      agent: agents.main,
      id: `fz-prot-shared-${tag}`,
      key: k.member,
      prompts: ["Think step by step before answering. Name a colour."],
    },
    ...(agents.storage
      ? [{ agent: agents.storage, id: `fz-prot-notes-${tag}`, key: k.member, prompts: ["Say hello."] }]
      : []),
    ...(k.foreign && agents.foreign
      ? [{ agent: agents.foreign, id: `fz-prot-foreign-${tag}`, key: k.foreign, prompts: ["Say hello."] }]
      : []),
  ];
  for (const p of protectedData) {
    for (const prompt of p.prompts) {
      await turn(transport, options, p.agent, p.key, p.id, prompt);
      await waitForSession(transport, options, p.agent, p.key, p.id);
    }
  }
  const shared = protectedData[1];
  const share = await transport.send(
    options.baseUrl,
    "POST",
    `/api/agents/${shared.agent}/conversations/${shared.id}`,
    { "X-Api-Key": shared.key, "content-type": "application/json" },
    Buffer.from('{"shared":true}'),
    30_000,
  );
  if (share.status !== 200) throw new Error(`set-up share gave ${share.status}`);
  const before = await snapshot(transport, options, protectedData);

  const setup: Setup = {
    protectedIds: protectedData.map((p) => p.id),
    poolIds: Array.from({ length: 8 }, (_, i) => `fz-pool-${tag}-${i}`),
    models: ["demo-large", "demo-small"],
  };
  const agentNames = [agents.main, agents.storage, agents.repo, agents.foreign].filter(
    (a): a is string => !!a,
  );
  const idArb = fc.oneof(
    { arbitrary: fc.constantFrom(...setup.poolIds), weight: 10 },
    { arbitrary: fc.constantFrom(...setup.protectedIds), weight: 5 },
    { arbitrary: plainWord.map((w) => `fz-${w}`), weight: 2 },
    {
      arbitrary: fc.oneof(
        nastyString,
        fc.constant("a".repeat(257)),
        fc.constant(" x"),
        fc.constant("x\u0000y"),
      ),
      weight: 2,
    },
    { arbitrary: headRun, weight: 1 },
  );
  const ctx: GenContext = {
    spec,
    hints: {
      "path:agent": fc.oneof(
        { arbitrary: fc.constant(agents.main), weight: 10 },
        { arbitrary: fc.constantFrom(...agentNames), weight: 4 },
        { arbitrary: plainWord, weight: 1 },
        { arbitrary: headRun, weight: 1 },
      ),
      "path:id": idArb,
      "path:app_id": fc.oneof(
        { arbitrary: fc.constant(options.flowId ?? "demo-flow"), weight: 8 },
        { arbitrary: plainWord, weight: 1 },
      ),
      conversation_id: idArb,
      model: fc.oneof(
        fc.constantFrom(...setup.models),
        fc.constantFrom(
          ...agentNames.map((a) => `${prefix}--${a}`),
          ...agentNames,
          `${prefix}--`,
          "--",
          `${prefix}--../x`,
        ),
        // Long runs around the routing prefix's separator.
        bodyRun.chain((run) => fc.constantFrom(run, `${prefix}--${run}`, `${run}--${agents.main}`)),
      ),
      automation: fc.constantFrom("nightly-summary", "no-such-automation"),
      delivery: fc.constantFrom("sync", "sync", "sync", "async"),
      // Cheap prompts: echoed by the scripted engine (no tool phrases).
      content: fc.oneof(
        fuzzString,
        fc.array(fc.record({ type: fc.constantFrom("text", "image", ""), text: fuzzString }), {
          maxLength: 3,
        }),
      ),
      role: fc.constantFrom("user", "user", "assistant"),
      name: fc.oneof(
        { arbitrary: bodyRun, weight: 1 },
        {
          arbitrary: fc.constantFrom(
            "a.txt",
            "../../etc/passwd",
            "",
            ".",
            "..",
            "a/b",
            "a\u0000b",
            "x".repeat(1000),
            "😀.txt",
            "CON",
            ".uploads",
          ),
          weight: 4,
        },
      ),
      mediaType: fc.oneof(fc.constantFrom("text/plain", "", "a/b"), bodyRun),
      dataBase64: fc.constantFrom(
        "aGVsbG8=",
        "",
        "not base64!",
        "data:text/plain;base64,aGk=",
        "=",
        "aGVsbG8",
      ),
      input_vars: fc.record({ [options.flowInput ?? "topic"]: fc.oneof(fuzzString, bodyRun) }),
    },
  };

  const total = options.numRuns;
  const plans = fc.constantFrom(...spec.operations).chain((op) => planArb(op, ctx, options, setup));
  const report: FuzzReport = {
    seed: options.seed,
    requests: 0,
    ms: 0,
    requestsPerSecond: 0,
    statusHistogram: {},
    operations: Object.fromEntries(
      spec.operations.map((op) => [op.id, { requests: 0, statuses: {}, invalidSent: 0 }]),
    ),
    findings: [],
    counts: Object.fromEntries(KINDS.map((kind) => [kind, 0])) as FuzzReport["counts"],
    integrity: [],
    probes: { ok: 0, made: 0 },
    coverage: {},
    classes: {},
  };
  const add = (finding: Finding) => {
    report.counts[finding.kind]++;
    const key = classOf(finding);
    const known = report.classes[key];
    if (known) known.count++;
    else report.classes[key] = { count: 1, example: finding };
    // Keep a bounded sample of each kind; the counts say how many there were.
    if (report.findings.filter((f) => f.kind === finding.kind).length < 25) report.findings.push(finding);
  };

  let crashed = false;
  const probe = async (index: number) => {
    report.probes.made++;
    try {
      const sent = await transport.send(
        options.baseUrl,
        "GET",
        `/api/agents/${agents.main}/v1/models`,
        { "X-Api-Key": k.admin },
        undefined,
        10_000,
      );
      if (sent.status === 200) report.probes.ok++;
      else throw new Error(`status ${sent.status}`);
    } catch (error) {
      crashed = true;
      add({
        kind: "crash",
        operation: "listModels",
        index,
        message: `liveness probe failed: ${error instanceof Error ? error.message : String(error)}`,
        request: {
          method: "GET",
          path: `/api/agents/${agents.main}/v1/models`,
          headers: {},
          body: "",
          bodyBytes: 0,
        },
      });
    }
  };

  const started = performance.now();
  const CHUNK = 100;
  let done = 0;
  for (let chunkStart = 0; chunkStart < total && !crashed; chunkStart += CHUNK) {
    const size = Math.min(CHUNK, total - chunkStart);
    // One sample per chunk with a derived seed: the same seed gives the same requests, without holding
    // every (possibly megabyte-sized) request of a long run in memory at once.
    const batch = fc.sample(plans, {
      seed: (options.seed + Math.imul(chunkStart / CHUNK, 0x9e3779b1)) | 0,
      numRuns: size,
    });
    let next = 0;
    const worker = async () => {
      while (next < batch.length && !crashed) {
        const position = next++;
        const index = chunkStart + position;
        const plan = batch[position];
        const origin = plan.op.server === "flow" ? (options.flowUrl ?? options.baseUrl) : options.baseUrl;
        const stats = report.operations[plan.op.id];
        stats.requests++;
        if (plan.specInvalid) stats.invalidSent++;
        for (const tag of coverageTags(plan, setup)) report.coverage[tag] = (report.coverage[tag] ?? 0) + 1;
        report.requests++;
        let sent: Sent;
        try {
          sent = await transport.send(origin, plan.method, plan.path, plan.headers, plan.body, timeoutMs);
        } catch (error) {
          const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
          if ((error as { code?: string }).code === "UND_ERR_INVALID_ARG") {
            // The HTTP client refused to send it (not a request the server ever saw).
            report.statusHistogram["client-refused"] = (report.statusHistogram["client-refused"] ?? 0) + 1;
            report.requests--;
            stats.requests--;
            continue;
          }
          const code = (error as { code?: string }).code ?? "";
          if (
            headSize(plan.path, plan.headers) > 16_384 &&
            /ECONNRESET|EPIPE|UND_ERR_SOCKET|other side closed/.test(`${code} ${message}`)
          ) {
            // The server refused an oversized request head (431) and closed the socket while the client
            // was still writing it: the refusal is correct, the client just could not read it.
            report.statusHistogram["closed:oversized-head"] =
              (report.statusHistogram["closed:oversized-head"] ?? 0) + 1;
            stats.statuses["closed:oversized-head"] = (stats.statuses["closed:oversized-head"] ?? 0) + 1;
            continue;
          }
          const timedOut = /timeout/i.test(message);
          const key = timedOut ? "hang" : "no-response";
          report.statusHistogram[key] = (report.statusHistogram[key] ?? 0) + 1;
          stats.statuses[key] = (stats.statuses[key] ?? 0) + 1;
          add({
            kind: timedOut ? "hang" : "no-response",
            operation: plan.op.id,
            index,
            message,
            request: describeRequest(plan),
          });
          await probe(index);
          continue;
        }
        const statusKey = String(sent.status);
        report.statusHistogram[statusKey] = (report.statusHistogram[statusKey] ?? 0) + 1;
        stats.statuses[statusKey] = (stats.statuses[statusKey] ?? 0) + 1;
        for (const finding of judge(plan, index, sent, validator)) add(finding);
        done++;
        options.onProgress?.(done, total);
        if (done % probeEvery === 0) await probe(index);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }
  report.ms = Math.round(performance.now() - started);
  report.requestsPerSecond = Math.round((report.requests / report.ms) * 1000);
  await probe(total);

  if (!crashed) {
    const after = await snapshot(transport, options, protectedData);
    for (let i = 0; i < before.length; i++) {
      if (before[i] !== after[i])
        report.integrity.push(
          `changed: ${excerpt(before[i], 400)}\n   now: ${excerpt(after[i] ?? "(missing)", 400)}`,
        );
    }
  } else {
    report.integrity.push("not compared: the server stopped answering");
  }
  await transport.close();
  return report;
}
