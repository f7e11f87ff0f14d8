/**
 * A server whose tools cannot be isolated, as in a container run without the flags bubblewrap needs: a real
 * `agent-api serve` child whose PATH holds a bwrap that fails the way Docker's masked /proc makes it fail.
 * The server says what failed and the fix at start and on every refused tool, and `agent-api check` against
 * it names that one cause before its check list (its JSON report on standard output, alone).
 */
import { chmod, mkdir, mkdtemp, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SOURCE_CONDITION_FLAG } from "../../scripts/source-condition.ts";
import { runToEnd } from "../../test/child-process.ts";
import { resolveExecutable } from "../sandbox/isolation.ts";
import {
  ADMIN_KEY,
  PHRASES,
  removeDir,
  type ServeCommand,
  sendTurn,
  startServeCommand,
  toolResults,
} from "./sandbox-server.ts";

const CLI = new URL("../../conformance/cli/agent-api.ts", import.meta.url).pathname;
/** What bubblewrap 0.8 prints where the container masks paths of /proc (Docker without systempaths=unconfined). */
const BWRAP_PROC_REFUSAL = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted";

let dir: string;
let server: ServeCommand;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "isolation-refused-"));
  const bin = path.join(dir, "bin");
  await mkdir(bin);
  await writeFile(path.join(bin, "bwrap"), `#!/bin/sh\necho "${BWRAP_PROC_REFUSAL}" >&2\nexit 1\n`);
  await chmod(path.join(bin, "bwrap"), 0o755);
  await symlink(resolveExecutable("git"), path.join(bin, "git"));
  server = await startServeCommand(
    [
      process.execPath,
      SOURCE_CONDITION_FLAG,
      CLI,
      "serve",
      "--demo",
      "--port",
      "0",
      "--data",
      path.join(dir, "data"),
    ],
    { PATH: bin },
  );
});
afterAll(async () => {
  await server?.stop();
  await removeDir(dir);
});

describe("a server whose bubblewrap cannot mount /proc", () => {
  it("says at start what failed and the flags that fix it", () => {
    const out = server.stdout();
    expect(out).toContain("Tool isolation: unavailable");
    expect(out).toMatch(/Warning: tools refused: bubblewrap could not mount \/proc \("Can't mount proc/);
    expect(out).toContain("--security-opt systempaths=unconfined");
    expect(out).toContain("docker/seccomp.json");
  });

  it("refuses every tool call with the same words, which a client streaming tool calls sees", async () => {
    const reply = await sendTurn(server.url, "demo-agent", PHRASES.run("echo hi"), {
      conversation_id: "refused",
      stream_tool_calls: true,
    });
    const results = toolResults(reply);
    expect(results).toHaveLength(1);
    expect(results[0].is_error).toBe(true);
    expect(results[0].content).toContain(
      "tool execution refused: no isolation available: bubblewrap could not mount /proc",
    );
    expect(results[0].content).toContain("--security-opt systempaths=unconfined");
  });

  it("is named first by `check`, whose JSON report alone goes to standard output", async () => {
    const { code, stdout, stderr } = await runToEnd(process.execPath, [
      SOURCE_CONDITION_FLAG,
      CLI,
      "check",
      "--base-url",
      server.url,
      "--agent",
      "demo-agent",
      "--key",
      ADMIN_KEY,
      "--only",
      "SEND-TOOL-BLOCKS,STATE-RESUME-KEEPS-FILES,SEND-ATTACHMENT-READ,SEND-NO-CLIENT-TOOLS",
      "--no-color",
      "--json",
      "-",
    ]);
    expect(code).toBe(1);
    const report = JSON.parse(stdout) as {
      findings: string[];
      results: Array<{ id: string; outcome: string }>;
    };
    expect(report.findings).toHaveLength(1);
    expect(report.findings[0]).toMatch(/^every tool call of this run failed the same way/);
    expect(report.findings[0]).toContain("bubblewrap could not mount /proc");
    expect(report.results.find((r) => r.id === "STATE-RESUME-KEEPS-FILES")?.outcome).toBe("fail");
    // The console report went to standard error, the cause before the counts and the verdict.
    const finding = stderr.indexOf("deployment: every tool call of this run failed the same way");
    expect(finding).toBeGreaterThan(0);
    expect(finding).toBeLessThan(stderr.indexOf(" checks in "));
    expect(stderr).toContain("verdict: FAIL");
  }, 120_000);
});
