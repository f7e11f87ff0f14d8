/**
 * Whether this machine can run the tools' sandbox (bubblewrap), asked once per test run by vitest.config.ts:
 * tests tagged `sandbox` are skipped where it cannot, and the closing reporter says so in one line.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { probeBwrap, resolveExecutable } from "../reference-server/sandbox/isolation.ts";

/** Why the sandbox tests cannot run here, with what to install; null when bubblewrap works. */
export async function sandboxUnavailable(): Promise<string | null> {
  const bwrap = resolveExecutable("bwrap");
  // resolveExecutable returns the bare name when no directory of PATH holds it.
  if (!bwrap.includes("/")) {
    return "bubblewrap is not installed (the bwrap command is not on PATH): apt-get install bubblewrap";
  }
  const dir = await mkdtemp(join(tmpdir(), "sandbox-probe-"));
  try {
    await chmod(dir, 0o711);
    if (await probeBwrap(bwrap, dir)) return null;
    return `bubblewrap (${bwrap}) cannot create a sandbox here: it needs unprivileged user namespaces, or root (apt-get install bubblewrap on a host that allows them)`;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The variable through which the reporter learns the probe's answer (set by vitest.config.ts). */
export const SANDBOX_ENV = "AGENT_API_TEST_SANDBOX_UNAVAILABLE";
