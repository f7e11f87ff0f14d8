/**
 * `agent-api check --ui`: a local page over the same library as the command (`runConformance`), nothing
 * implemented twice. The page posts the form, the run's verdicts are pushed to it as server-sent events as
 * each check finishes, and finished runs are kept (history.ts) to compare.
 *
 * It listens on loopback by default and guards what a page on another site, or another local process, could
 * do to it: a request must name this server in its Host header (no DNS rebinding), and every request that
 * starts work carries the page's token. The token is in no response: the command prints (and a person opens)
 * the page's address with the token in its fragment, which a browser never sends, and the page keeps it for
 * its tab. A local process that fetches the page gets the page without it, so it cannot start a run (which
 * would send the command's keys to a base URL of its choosing) nor re-run one.
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { catalogue } from "../catalogue.ts";
import { seedRules } from "../coverage.ts";
import type { ExpectedFailure } from "../expected-failures.ts";
import type { ExploreOptions } from "../explorer/explore.ts";
import { type ConnectionOptions, reachability } from "../http.ts";
import { type ConformanceResults, runConformance } from "../index.ts";
import {
  inputFlag,
  type RunSettings,
  resolveExplore,
  resolveInputs,
  resolveRunSettings,
  UsageError,
} from "../inputs.ts";
import { htmlReport, resultHtml } from "../reports/html.ts";
import { jsonReport } from "../reports/json.ts";
import { junitReport } from "../reports/junit.ts";
import { costText } from "../run-cost.ts";
import { selectChecks } from "../runner.ts";
import type { CheckResult, Level, SuiteInputs } from "../types.ts";
import { compareRuns } from "./compare.ts";
import { FORM_FIELDS, formValues, publicDefaults } from "./form.ts";
import { RunHistory, runIdFor } from "./history.ts";
import { uiPage } from "./page.ts";

/**
 * What a run will check, per level: the page's level bars fill against these, so a bar is full only once
 * every check of its level has its verdict.
 */
function plannedChecks(checks: ReadonlyArray<{ level: Level }>): {
  total: number;
  levels: Record<Level, number>;
} {
  const levels: Record<Level, number> = { MUST: 0, SHOULD: 0, INFO: 0 };
  for (const check of checks) levels[check.level] += 1;
  return { total: checks.length, levels };
}

export interface UiOptions {
  /** Default 127.0.0.1: the page holds keys; listening elsewhere is the operator's explicit choice. */
  host?: string;
  /** Default 0: any free port. */
  port?: number;
  /** Folder of the kept runs. */
  reportsDir: string;
  /** The command's own flag and environment values (`--base-url` → value), prefilled on the page. */
  defaults?: Record<string, string>;
  /** `--ca` and `--http2` of the command, for every run the page starts. */
  connection?: ConnectionOptions;
  /** `--expected-failures` of the command, for every run the page starts. */
  expectedFailures?: ExpectedFailure[];
}

export interface UiServer {
  /** The page's address with its token in the fragment (`#token=…`): what the command prints. */
  url: string;
  close(): Promise<void>;
}

/** A posted form is a few kilobytes; anything larger is refused before it is read whole. */
const MAX_FORM_BYTES = 64 * 1024;

interface LiveRun {
  id: string;
  /** Kept in memory for re-runs; never written, never sent to the page. */
  inputs: SuiteInputs;
  settings: RunSettings;
  only?: string[];
  level?: Level;
  /** The explorer's budget and seed for this run (--explore, --seed). */
  explore: ExploreOptions;
  startedAt: string;
  results: CheckResult[];
  report?: ConformanceResults;
  error?: string;
  subscribers: Set<ServerResponse>;
}

/** The API sentences each check verifies, from the coverage map. */
const RULES_BY_CHECK = new Map<string, string[]>();
for (const rule of seedRules)
  for (const id of rule.checks ?? [])
    RULES_BY_CHECK.set(id, [...(RULES_BY_CHECK.get(id) ?? []), `${rule.section}: ${rule.rule}`]);

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
  res.end(JSON.stringify(body));
}

function sseFrame(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > MAX_FORM_BYTES) throw new UsageError(`the form is larger than ${MAX_FORM_BYTES} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_FORM_BYTES) throw new UsageError(`the form is larger than ${MAX_FORM_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  try {
    const value = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error();
    return value;
  } catch {
    throw new UsageError("the form is not a JSON object");
  }
}

/** The result as the page shows it: the report's own fragment, with the rule it verifies. */
function resultEvent(result: CheckResult) {
  return {
    id: result.id,
    level: result.level,
    section: result.section,
    outcome: result.outcome,
    html: resultHtml(result),
    rules: RULES_BY_CHECK.get(result.id) ?? [],
  };
}

export async function startConformanceUi(options: UiOptions): Promise<UiServer> {
  const token = randomBytes(16).toString("hex");
  const isToken = (presented: string | string[] | undefined) =>
    typeof presented === "string" &&
    presented.length === token.length &&
    timingSafeEqual(Buffer.from(presented), Buffer.from(token));
  const defaults = options.defaults ?? {};
  const history = new RunHistory(options.reportsDir);
  const runs = new Map<string, LiveRun>();
  let allowedHosts = new Set<string>();

  const publish = (run: LiveRun, event: string, data: unknown) => {
    const frame = sseFrame(event, data);
    for (const sub of run.subscribers) sub.write(frame);
  };

  const finishedEvent = (run: LiveRun) => ({
    verdict: run.report ? (run.report.passed ? "pass" : "fail") : "error",
    error: run.error,
    ms: run.report?.ms,
    warnings: run.report?.warnings ?? [],
    cost: run.report?.cost ? costText(run.report.cost) : undefined,
  });

  const start = (
    inputs: SuiteInputs,
    settings: LiveRun["settings"],
    only: string[] | undefined,
    level: Level | undefined,
    explore: ExploreOptions,
  ): LiveRun => {
    const startedAt = new Date().toISOString();
    const run: LiveRun = {
      id: runIdFor(startedAt, randomBytes(4).toString("hex")),
      inputs,
      settings,
      only,
      level,
      explore,
      startedAt,
      results: [],
      subscribers: new Set(),
    };
    runs.set(run.id, run);
    void (async () => {
      try {
        const unreachable = await reachability(inputs.baseUrl, settings.timeoutMs, options.connection);
        if (unreachable) throw new Error(`cannot reach ${inputs.baseUrl}: ${unreachable}`);
        run.report = await runConformance({
          inputs,
          only,
          level,
          concurrency: settings.concurrency,
          requestTimeoutMs: settings.timeoutMs,
          maxTurns: settings.maxTurns,
          connection: options.connection,
          expectedFailures: options.expectedFailures,
          inputLabel: inputFlag,
          explore: run.explore,
          onResult: (result) => {
            run.results.push(result);
            publish(run, "result", resultEvent(result));
          },
        });
        // The explorer runs after the checks: a check it found failing is shown again, with its sequence.
        for (const result of run.report.results.filter((r) => r.sequences)) {
          run.results = [...run.results.filter((r) => r.id !== result.id), result];
          publish(run, "result", resultEvent(result));
        }
        await history.save(run.id, run.report);
      } catch (error) {
        run.error = error instanceof Error ? error.message : String(error);
      }
      publish(run, "done", finishedEvent(run));
      for (const sub of run.subscribers) sub.end();
      run.subscribers.clear();
    })();
    return run;
  };

  const selection = (body: Record<string, unknown>) => {
    const onlyText = typeof body["--only"] === "string" ? body["--only"].trim() : "";
    const only = onlyText === "" ? undefined : onlyText.split(",");
    const level = (["MUST", "SHOULD", "INFO"] as const).find((l) => l === body["--level"]);
    if (only && selectChecks(catalogue, only, level).length === 0)
      throw new UsageError(`--only ${onlyText} matches no check`);
    return { only, level };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://ui.invalid");
    if (!allowedHosts.has(req.headers.host ?? "")) {
      sendJson(res, 421, { message: "this page answers on its own address only" });
      return;
    }
    const path = url.pathname;
    if (req.method === "POST" && !isToken(req.headers["x-ui-token"])) {
      sendJson(res, 403, {
        message: "missing or wrong page token: open the page at the address agent-api check --ui printed",
      });
      return;
    }
    if (req.method === "GET" && path === "/") {
      res.writeHead(200, {
        "content-type": "text/html; charset=utf-8",
        "cache-control": "no-store",
        // Everything is inline: no script, style or font comes from anywhere else.
        "content-security-policy":
          "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:",
      });
      res.end(uiPage({ fields: FORM_FIELDS, defaults: publicDefaults(defaults) }));
      return;
    }
    if (req.method === "GET" && path === "/api/catalogue") {
      sendJson(
        res,
        200,
        catalogue.map((c) => ({
          id: c.id,
          level: c.level,
          section: c.section,
          title: c.title,
          rules: RULES_BY_CHECK.get(c.id) ?? [],
        })),
      );
      return;
    }
    if (req.method === "POST" && path === "/api/runs") {
      const body = await readJson(req);
      const values = formValues(body, defaults);
      const inputs = resolveInputs(values, {});
      const settings = resolveRunSettings(values, {});
      const { only, level } = selection(body);
      const run = start(inputs, settings, only, level, resolveExplore(values, {}, only !== undefined));
      sendJson(res, 202, { id: run.id });
      return;
    }
    if (req.method === "GET" && path === "/api/runs") {
      const live = [...runs.values()]
        .filter((r) => !r.report && !r.error)
        .map((r) => ({ id: r.id, baseUrl: r.inputs.baseUrl, agent: r.inputs.agent, running: true }));
      sendJson(res, 200, { running: live, kept: await history.list() });
      return;
    }
    if (req.method === "GET" && path === "/api/compare") {
      const [from, to] = [url.searchParams.get("from") ?? "", url.searchParams.get("to") ?? ""];
      if (from === to) {
        sendJson(res, 400, { message: "a comparison needs two different runs" });
        return;
      }
      const [a, b] = await Promise.all([history.read(from), history.read(to)]);
      if (!a || !b) {
        sendJson(res, 404, { message: "no kept run with that id" });
        return;
      }
      sendJson(res, 200, compareRuns(a.results, b.results));
      return;
    }
    const match = /^\/api\/runs\/([A-Za-z0-9_.-]{1,80})(\/[a-z.-]{1,20})?$/.exec(path);
    if (!match) {
      sendJson(res, 404, { message: `no such page: ${path}` });
      return;
    }
    const [, id, tail = ""] = match;
    const live = runs.get(id);
    if (req.method === "GET" && tail === "/events") {
      if (!live) {
        sendJson(res, 404, { message: "no run with that id in this process" });
        return;
      }
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache, no-transform",
        "x-accel-buffering": "no",
      });
      res.write(
        sseFrame("run", {
          id: live.id,
          baseUrl: live.inputs.baseUrl,
          agent: live.inputs.agent,
          startedAt: live.startedAt,
          ...plannedChecks(selectChecks(catalogue, live.only, live.level)),
        }),
      );
      for (const result of live.results) res.write(sseFrame("result", resultEvent(result)));
      if (live.report || live.error) {
        res.end(sseFrame("done", finishedEvent(live)));
        return;
      }
      live.subscribers.add(res);
      res.on("close", () => live.subscribers.delete(res));
      return;
    }
    if (req.method === "POST" && tail === "/rerun") {
      if (!live) {
        sendJson(res, 409, {
          message:
            "this run's keys are not in this process any more (they are never written): run it again from the form",
        });
        return;
      }
      const body = await readJson(req);
      const { only } = selection(body);
      // A re-run of chosen checks judges those checks: no exploration unless the whole run is re-run.
      const rerun = start(live.inputs, live.settings, only ?? live.only, live.level, {
        ...live.explore,
        runs: only ? 0 : live.explore.runs,
      });
      sendJson(res, 202, { id: rerun.id });
      return;
    }
    const downloads: Record<string, [string, (r: ConformanceResults) => string, string]> = {
      "/report.json": ["application/json", jsonReport, "json"],
      "/report.xml": ["application/xml", junitReport, "xml"],
      "/report.html": ["text/html; charset=utf-8", htmlReport, "html"],
    };
    const download = downloads[tail];
    if (req.method === "GET" && download) {
      const report = live?.report ?? (await history.read(id));
      if (!report) {
        sendJson(res, 404, { message: "no finished run with that id" });
        return;
      }
      const [type, render, ext] = download;
      res.writeHead(200, {
        "content-type": type,
        "content-disposition": `attachment; filename="agent-api-${id}.${ext}"`,
      });
      res.end(render(report as ConformanceResults));
      return;
    }
    sendJson(res, 404, { message: `no such page: ${path}` });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (error instanceof UsageError) sendJson(res, 400, { message: error.message });
      else sendJson(res, 500, { message: error instanceof Error ? error.message : String(error) });
    });
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const shown = host.includes(":") ? `[${host}]` : host;
  allowedHosts = new Set([`${shown}:${port}`, `localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]);
  return {
    url: `http://${shown}:${port}/#token=${token}`,
    close: async () => {
      for (const run of runs.values()) for (const sub of run.subscribers) sub.end();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
