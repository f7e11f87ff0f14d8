/**
 * A host where the server finds no cgroup it can write, as in a Docker container that is not privileged
 * (/sys/fs/cgroup read-only): `agent-api serve` in a mount namespace whose /sys/fs/cgroup is an empty tmpfs.
 * The server must say so at start, and the rlimits it falls back to must still stop a memory eater and a fork
 * bomb: in this case nothing else does.
 */
import { spawnSync } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SANDBOX_ENV } from "../../scripts/sandbox-probe.ts";
import {
  onlyToolResult,
  PHRASES,
  removeDir,
  type ServeCommand,
  sendTurn,
  startServeCommand,
} from "../test/sandbox-server.ts";

const BIN = fileURLToPath(new URL("../../bin/agent-api", import.meta.url));
/** A new mount namespace needs root; `unshare` is util-linux, beside bubblewrap on every such host. */
const unavailable =
  process.getuid?.() !== 0
    ? "the test mounts a tmpfs over /sys/fs/cgroup, which needs root"
    : spawnSync("unshare", ["--version"]).status !== 0
      ? "unshare (util-linux) is not installed"
      : null;

// Where bubblewrap does not work, these tests skip with every other sandbox test, said once by the reporter.
if (unavailable && !process.env[SANDBOX_ENV])
  console.warn(`no-cgroup fallback tests skipped: ${unavailable}`);

let served: ServeCommand | undefined;
let dataDir: string;
let url: string;
let stdout = "";

beforeAll(async () => {
  if (unavailable || process.env[SANDBOX_ENV]) return;
  dataDir = await mkdtemp(join(tmpdir(), "agent-api-nocg-"));
  // The mount is private to the namespace: the host and every other test keep their cgroups.
  served = await startServeCommand([
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    'mount -t tmpfs none /sys/fs/cgroup && exec "$0" "$@"',
    BIN,
    "serve",
    "--port",
    "0",
    "--data",
    dataDir,
    "--sandbox-memory",
    "64M",
    "--sandbox-pids",
    "64",
  ]);
  url = served.url;
  stdout = served.stdout();
}, 60_000);

afterAll(async () => {
  await served?.stop();
  if (dataDir) await removeDir(dataDir);
});

describe.skipIf(unavailable !== null)("a server that finds no writable cgroup", { tags: ["sandbox"] }, () => {
  it("says so at start, with the reason, and which limits still hold", () => {
    expect(stdout).toContain("tool limits (cgroups): none");
    expect(stdout).toMatch(/Warning: no cgroups for tool limits \(cgroup v2 is not mounted; .*\)/);
    expect(stdout).toContain("processes and memory per command are bounded by rlimits only, CPU");
  });

  it("still stops a command past its memory limit (RLIMIT_AS), before its time-out", async () => {
    // 128 MiB in one string against a 64 MiB limit: bounded, so a server without the limit is not harmed.
    const reply = await sendTurn(
      url,
      "demo-agent",
      PHRASES.run(`perl -e '$x = "a" x (128 * 1024 * 1024); print "allocated\\n"'`),
      { stream_tool_calls: true },
    );
    const result = onlyToolResult(reply);
    expect(result.is_error).toBe(true);
    expect(result.content).not.toContain("allocated");
    expect(result.content).not.toContain("timed out");
  });

  it("still stops forking at the process limit (RLIMIT_NPROC), and the next command runs", async () => {
    // Forks until the kernel refuses (each child sleeps a moment), then says how many it got.
    const forks = await sendTurn(
      url,
      "demo-agent",
      PHRASES.run(
        `perl -e 'my $n = 0; while (defined(my $p = fork())) { if ($p == 0) { sleep 2; exit } last if ++$n >= 500 } print "$n\\n"'`,
      ),
      { stream_tool_calls: true, conversation_id: "nocg-forks" },
    );
    const started = Number(onlyToolResult(forks).content.trim());
    expect(started).toBeGreaterThan(0);
    expect(started).toBeLessThan(64);
    const after = await sendTurn(url, "demo-agent", PHRASES.run("echo alive"), {
      stream_tool_calls: true,
      conversation_id: "nocg-forks",
    });
    expect(onlyToolResult(after)).toMatchObject({ content: "alive\n", is_error: false });
  });
});
