import type { Reporter, TestModule } from "vitest/node";
import { SANDBOX_ENV } from "./sandbox-probe.ts";

/**
 * Prints the plain "N passed, N failed, N skipped" line CI reads, since vitest's own summary has another
 * shape; and, where bubblewrap does not work, one line saying how many `sandbox` tests that skipped and what
 * to install, instead of a reason per test.
 */
export default class ClosingLineReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    let sandboxSkipped = 0;
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") failed++;
        else {
          skipped++;
          if (test.tags.includes("sandbox")) sandboxSkipped++;
        }
      }
    }
    const unavailable = process.env[SANDBOX_ENV];
    if (unavailable && sandboxSkipped > 0) {
      process.stdout.write(
        `\n${sandboxSkipped} tests that need the tools' sandbox skipped: ${unavailable}\n`,
      );
    }
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
