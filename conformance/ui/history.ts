/**
 * Runs over time: each finished run is kept as its JSON report (the `--json` format, keys masked by the
 * runner) in one folder, newest last by name; the page lists them and compares two. Nothing secret is
 * written: the report holds masked exchanges and no inputs but the base URL and agent.
 */
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { jsonReport } from "../reports/json.ts";
import type { CheckResult, RunReport } from "../types.ts";

/** Runs kept; older files are removed when a new run is saved. */
export const KEPT_RUNS = 50;

const RUN_FILE = /^run-[0-9TZ:.-]+-[a-f0-9]{8}\.json$/;

export interface SavedRun {
  id: string;
  baseUrl: string;
  agent: string;
  startedAt: string;
  ms: number;
  counts: { passed: number; failed: number; skipped: number; mustFailed: number };
}

/** A run id that sorts by start time and is safe as a file name. */
export function runIdFor(startedAt: string, suffix: string): string {
  return `run-${startedAt.replaceAll(":", "-")}-${suffix}`;
}

export class RunHistory {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  async save(id: string, report: RunReport): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await writeFile(join(this.dir, `${id}.json`), jsonReport(report));
    const files = await this.#files();
    for (const old of files.slice(0, Math.max(0, files.length - KEPT_RUNS)))
      await rm(join(this.dir, old), { force: true });
  }

  /** The kept runs, oldest first. */
  async list(): Promise<SavedRun[]> {
    const runs: SavedRun[] = [];
    for (const file of await this.#files()) {
      const report = await this.read(file.slice(0, -".json".length));
      if (!report) continue;
      const count = (o: string) => report.results.filter((r) => r.outcome === o).length;
      runs.push({
        id: file.slice(0, -".json".length),
        baseUrl: report.baseUrl,
        agent: report.agent,
        startedAt: report.startedAt,
        ms: report.ms,
        counts: {
          passed: count("pass"),
          failed: count("fail"),
          skipped: count("skip"),
          mustFailed: report.results.filter((r) => r.outcome === "fail" && r.level === "MUST").length,
        },
      });
    }
    return runs;
  }

  /** One kept run's report; undefined for an id that is not a kept run (or not a run file at all). */
  async read(id: string): Promise<(RunReport & { results: CheckResult[] }) | undefined> {
    if (!RUN_FILE.test(`${id}.json`)) return undefined;
    try {
      return JSON.parse(await readFile(join(this.dir, `${id}.json`), "utf8"));
    } catch {
      return undefined;
    }
  }

  async #files(): Promise<string[]> {
    try {
      return (await readdir(this.dir)).filter((f) => RUN_FILE.test(f)).sort();
    } catch {
      return [];
    }
  }
}
