/**
 * Every parser of caller-, turn- or deployment-controlled text finishes its worst input at the largest size
 * the API admits (test/parsing/worst-cases.ts) within a deadline: a correctness bound, not a speed target.
 * Linear work at 32 MiB takes well under a few seconds even on a loaded machine; the patterns these parsers
 * replaced took hours to days there (quadratic: one 100,000-character attachment name alone took 8 s). Each
 * case runs in its own child process, killed at the deadline, so a regression fails instead of hanging.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { SOURCE_CONDITION_FLAG } from "../../scripts/source-condition.ts";
import { WORST_CASES } from "./worst-cases.ts";

const SCRIPT = fileURLToPath(new URL("./worst-cases.ts", import.meta.url));
/** Orders of magnitude above the linear cost (tens to hundreds of ms idle), far below the old one. */
const DEADLINE_MS = 60_000;

interface Outcome {
  /** The parse's own time, as the child measured it; undefined when it did not finish. */
  ms?: number;
  wallMs: number;
  timedOut: boolean;
  output: string;
}

function runCase(name: string): Promise<Outcome> {
  const started = Date.now();
  return new Promise((resolve) => {
    // 4 GiB of heap: a 32 MiB input and its copies must not fail for memory on a loaded machine.
    const child = spawn(
      process.execPath,
      ["--max-old-space-size=4096", SOURCE_CONDITION_FLAG, SCRIPT, name],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, DEADLINE_MS);
    child.on("close", () => {
      clearTimeout(timer);
      const line = output.split("\n").find((l) => l.startsWith('{"ms":'));
      resolve({
        ms: line ? (JSON.parse(line) as { ms: number }).ms : undefined,
        wallMs: Date.now() - started,
        timedOut,
        output: output.slice(0, 2000),
      });
    });
  });
}

// Two at a time: one per core; the cases are CPU-bound.
describe.concurrent("worst-case inputs finish in linear time at the largest admitted size", {
  timeout: 5 * DEADLINE_MS,
}, () => {
  for (const name of Object.keys(WORST_CASES)) {
    it(name, async () => {
      const outcome = await runCase(name);
      expect(outcome.timedOut, `still running after ${DEADLINE_MS} ms: killed`).toBe(false);
      expect(outcome.ms, outcome.output).toBeTypeOf("number");
      process.stdout.write(
        `  ${String(outcome.ms).padStart(6)} ms parse, ${outcome.wallMs} ms wall: ${name}\n`,
      );
    });
  }
});
