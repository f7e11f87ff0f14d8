/**
 * The suite is itself tested (DESIGN §4): a fault proxy in front of ONE reference demo breaks one rule of the
 * API at a time. Unbroken, the whole suite must pass through it; with each mutation, a run of the checks it
 * declares must fail at least one of them. (Only those decide the verdict, so only those run here;
 * `npm run mutation-score -- --area-only` runs each mutation's whole area and shows what else catches it.)
 * A mutation marked `knownGap` is a reported gap of the suite: it must still go uncaught, so the day the
 * suite catches it this test says to remove the marker.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { catalogue } from "../../conformance/catalogue.ts";
import { SpecValidator } from "../../conformance/spec-validator.ts";
import type { RunReport } from "../../conformance/types.ts";
import type { DemoServer } from "../../reference-server/demo/index.ts";
import { startDemoServer } from "../../reference-server/demo/index.ts";
import { judgedAsDeployment, type MutationOutcome, runMutation, runThroughProxy } from "./harness.ts";
import { AREA_CHECKS, type Area, checksFor, inNpmTest, mutations } from "./mutations.ts";
import { startFaultProxy } from "./proxy.ts";

/** Mutation runs at once (each a proxy and a suite run against the one server). */
const PARALLEL = 12;

let demo: DemoServer;
let validator: SpecValidator;
/** The unbroken run, started in beforeAll and awaited by its test, so the mutations run beside it. */
let baseline: Promise<RunReport>;

/** A counting semaphore: the concurrent tests below take a slot each. */
function limiter(size: number) {
  let free = size;
  const waiting: Array<() => void> = [];
  return async <T>(work: () => Promise<T>): Promise<T> => {
    if (free === 0) await new Promise<void>((resolve) => waiting.push(resolve));
    else free--;
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else free++;
    }
  };
}
const slot = limiter(PARALLEL);

beforeAll(async () => {
  // 1 s: long enough that a busy 2-core CI machine still sends the race check's follow-up inside the delay.
  // The suite asks for tools: they run unisolated where bubblewrap does not work (the sandbox has its own tests).
  demo = await startDemoServer(1000, { unsafeNoIsolation: true });
  validator = await SpecValidator.load();
  baseline = runThroughProxy(demo, null, { validator });
  // Awaited by its test; until then a rejection is that test's failure, not an unhandled one.
  baseline.catch(() => undefined);
}, 60_000);

afterAll(async () => {
  await demo?.close();
});

describe("the mutation catalogue", () => {
  it("names only checks of the catalogue, and every area", () => {
    const ids = new Set(catalogue.map((c) => c.id));
    const unknown = mutations.flatMap((m) =>
      m.breaks.filter((id) => !ids.has(id)).map((id) => `${m.name}: ${id}`),
    );
    expect(unknown).toEqual([]);
    // An outside round's rows name no check (they are judged as a deployment is); every other row names some.
    for (const m of mutations) expect(m.breaks.length > 0 || m.outsideRound !== undefined, m.name).toBe(true);
    const areas = new Set(mutations.map((m) => m.area));
    expect([...areas].sort()).toEqual((Object.keys(AREA_CHECKS) as Area[]).sort());
    expect(mutations.length).toBeGreaterThanOrEqual(30);
  });
});

/** What a failed expectation shows: the declared checks' outcomes and reasons. */
function explain(outcome: MutationOutcome): string {
  if (judgedAsDeployment(outcome.mutation))
    return `${outcome.mutation.name} — ${outcome.mutation.description}\n  MUST failures counted: ${outcome.caughtBy.join(", ") || "none"}\n  failed: ${outcome.failed.join(", ") || "none"}`;
  const declared = outcome.report.results
    .filter((r) => outcome.mutation.breaks.includes(r.id))
    .map((r) => `${r.id}: ${r.outcome}${r.reason ? ` (${r.reason})` : ""}`);
  return `${outcome.mutation.name} — ${outcome.mutation.description}\n  ${declared.join("\n  ")}\n  failed: ${outcome.failed.join(", ") || "none"}`;
}

/** Hand-written mutations, and the sample of the table and outside round 4 rows (all: `npm run mutation-score:catalogue`). */
const selected = mutations.filter(inNpmTest);

describe.concurrent("each mutation is caught by the suite", () => {
  for (const mutation of selected) {
    it(mutation.knownGap ? `${mutation.name} (known gap of the suite)` : mutation.name, async () => {
      // A mutation judged on the repository pushes to the demo's one repository as the agent: during the
      // unbroken run's read-only turn that push would look like the turn's own. It waits for that run.
      // A row judged as a deployment names no checks: its area's checks run for it here (the whole suite in
      // `npm run mutation-score:catalogue`).
      const only = judgedAsDeployment(mutation)
        ? checksFor(mutation)
        : [...mutation.breaks, ...(mutation.needs ?? [])];
      if (only.some((id) => id.startsWith("REPO-"))) await baseline.catch(() => undefined);
      const outcome = await slot(() => runMutation(demo, mutation, { validator, only }));
      // An outside row's verdict says something only when its fault met the traffic it breaks.
      if (mutation.outsideRound !== undefined)
        expect(outcome.fired, `${mutation.name}: its fault never applied in this run`).toBeGreaterThan(0);
      if (mutation.knownGap) {
        expect(
          outcome.caught,
          `the suite now catches ${mutation.name}: remove its knownGap\n${explain(outcome)}`,
        ).toBe(false);
      } else {
        expect(outcome.caught, explain(outcome)).toBe(true);
      }
    }, 90_000);
  }
});

// After the mutations in file order, so they start at once and run beside the unbroken run.
describe("the fault proxy", () => {
  it("forwards faithfully when unbroken: the whole suite passes through it", async () => {
    const { results, warnings } = await baseline;
    const failures = results
      .filter((r) => r.level === "MUST" && r.outcome === "fail")
      .map((r) => `${r.id}: ${r.reason}`);
    expect(failures).toEqual([]);
    // The race check may skip when the session was recorded before the follow-up went out.
    const skips = results
      .filter(
        (r) =>
          r.level === "MUST" &&
          r.outcome === "skip" &&
          !["STATE-RACE-NO-MEMORY", "STATE-RACE-MEMORY-LOST"].includes(r.id) &&
          // Opt-in (--idle-seconds): a turn quiet for a minute or more.
          r.id !== "SSE-IDLE-SURVIVES",
      )
      .map((r) => `${r.id}: ${r.reason}`);
    expect(skips).toEqual([]);
    expect(warnings).toEqual([]);
  }, 120_000);

  it("answers byte for byte what the server answers", async () => {
    const proxy = await startFaultProxy({ target: demo.url, mutation: null });
    try {
      const path = "/api/agents/demo-agent/v1/models";
      const init = { headers: { "x-api-key": demo.envVars.AGENT_API_KEY } };
      const [direct, proxied] = await Promise.all([
        fetch(`${demo.url}${path}`, init),
        fetch(`${proxy.url}${path}`, init),
      ]);
      expect(proxied.status).toBe(direct.status);
      expect(proxied.headers.get("content-type")).toBe(direct.headers.get("content-type"));
      expect(await proxied.text()).toBe(await direct.text());
    } finally {
      await proxy.close();
    }
  });

  it("refuses an unknown mutation name", async () => {
    await expect(startFaultProxy({ target: demo.url, mutation: "no-such-mutation" })).rejects.toThrow(
      /unknown mutation/,
    );
  });
});
