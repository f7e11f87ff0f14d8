import type { Reporter, TestModule } from "vitest/node";
import { SANDBOX_ENV } from "./sandbox-probe.ts";

/**
 * Prints the plain "N passed, N failed, N skipped" line CI reads, since vitest's own summary has another
 * shape; and, where bubblewrap does not work, one line saying how many `sandbox` tests that skipped and what
 * to install, instead of a reason per test.
 */
export default class ClosingLineReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown> = []): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    let sandboxSkipped = 0;
    // A file that fails before its tests run (an import that does not resolve) has no test to count: without
    // this, the line read "0 failed" over a run that failed.
    let filesNotRun = 0;
    for (const mod of testModules) {
      let failedHere = 0;
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") failedHere++;
        else {
          skipped++;
          if (test.tags.includes("sandbox")) sandboxSkipped++;
        }
      }
      failed += failedHere;
      if (mod.state() === "failed" && failedHere === 0) filesNotRun++;
    }
    const unavailable = process.env[SANDBOX_ENV];
    if (unavailable && sandboxSkipped > 0) {
      process.stdout.write(
        `\n${sandboxSkipped} tests that need the tools' sandbox skipped: ${unavailable}\n`,
      );
    }
    const notRun = filesNotRun > 0 ? `, ${filesNotRun} test files failed before their tests ran` : "";
    const outside = unhandledErrors.length > 0 ? `, ${unhandledErrors.length} errors outside any test` : "";
    process.stdout.write(
      `\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped${notRun}${outside}\n`,
    );
  }
}
