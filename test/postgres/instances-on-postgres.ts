/**
 * `npm run test:postgres` (second part): several `agent-api serve --demo --store postgres://…` instances,
 * each with its own port and data directory, behind a real nginx that spreads requests with no stickiness.
 *
 * 1. The conformance suite through nginx. The conversation's working files and the demo repository live in
 *    each instance's data directory (not yet in the shared store), so the checks that read back files an
 *    earlier turn wrote, or a push, fail when the turns land on different instances; every other check must
 *    pass.
 * 2. The turn lock is the store's: a turn on one instance waits for the turn running on another.
 * 2b. A delete on one instance ends the turn running on another (LISTEN/NOTIFY), instead of waiting for it.
 * 3. SIGKILL one instance mid-turn: its client sees the stream cut; the lock frees within the lease; the next
 *    turn, on another instance, starts, and the transcript keeps the killed turn's acknowledged user message.
 * 4. A pending agent_session_id recording of an instance killed right after its turn is recorded by another.
 * 5. SIGTERM during a turn (a rolling restart's step): the turn finishes before the instance exits.
 * Each of 2 and 3 fails with a lock in process memory, 4 with recordings in process memory.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePort, nginxAvailable, startNginx } from "../../conformance/testing/nginx.ts";
import { startPostgresCluster } from "../../scripts/postgres-cluster.ts";
import { check, loggedTurnFailure, parseEnvFile, type ServeProcess, serve, stop } from "./processes.ts";

const LEASE_MS = 2_000;
const SESSION_DELAY_MS = 500;
const KEY = "demo-admin-key";
const AGENT = "demo-agent";

/** Checks that need a conversation's files (or the demo repository) on whichever instance serves the turn. */
const NEEDS_SHARED_FILES = [
  "STATE-RESUME-KEEPS-FILES",
  "REPO-READ-ONLY-FALSE-PUSHES",
  "REPO-ATTACHMENTS-NOT-COMMITTED",
];

interface TurnResult {
  status: number;
  /** Milliseconds from the request to its response headers (the lock wait is before them). */
  headersMs: number;
  text: string;
  /** The stream ended with message_stop. */
  completed: boolean;
}

/** Sends a turn and reads its stream to the end (or until the connection is cut). */
async function sendTurn(
  baseUrl: string,
  conversationId: string,
  prompt: string,
  onFirstEvent?: () => void,
): Promise<TurnResult> {
  const started = performance.now();
  const response = await fetch(`${baseUrl}/api/agents/${AGENT}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": KEY },
    body: JSON.stringify({
      messages: [{ role: "user", content: prompt }],
      metadata: { conversation_id: conversationId },
    }),
  });
  const headersMs = performance.now() - started;
  let text = "";
  try {
    const decoder = new TextDecoder();
    for await (const chunk of response.body ?? []) {
      text += decoder.decode(chunk as Uint8Array, { stream: true });
      if (onFirstEvent && text.includes("event: message_start")) {
        onFirstEvent();
        onFirstEvent = undefined;
      }
    }
  } catch {
    // The connection was cut (the instance died): what arrived is the result.
  }
  return { status: response.status, headersMs, text, completed: text.includes("event: message_stop") };
}

async function transcript(
  baseUrl: string,
  conversationId: string,
): Promise<{
  messages: Array<{ role: string; content: Array<{ text: string }> }>;
  events: Array<{ type: string; code?: string }>;
}> {
  const response = await fetch(
    `${baseUrl}/api/agents/${AGENT}/conversations/${encodeURIComponent(conversationId)}/messages`,
    { headers: { "x-api-key": KEY } },
  );
  if (response.status !== 200) throw new Error(`transcript: ${response.status} ${await response.text()}`);
  return response.json() as never;
}

const failures: string[] = [];
function expect(condition: boolean, what: string): void {
  process.stdout.write(`${condition ? "ok  " : "FAIL"} ${what}\n`);
  if (!condition) failures.push(what);
}

async function main(): Promise<number> {
  if (!nginxAvailable()) {
    process.stdout.write("skipped: nginx is not installed (apt-get install nginx)\n");
    return 0;
  }
  const dir = mkdtempSync(join(tmpdir(), "agent-api-instances-"));
  // The sandbox users pass through it on their way to their working directories.
  chmodSync(dir, 0o711);
  const cluster = await startPostgresCluster();
  const instances: ServeProcess[] = [];
  let nginx: Awaited<ReturnType<typeof startNginx>> | undefined;
  try {
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query("CREATE DATABASE agent_api");
    await admin.end();
    const store = cluster.url.replace(/\/postgres$/, "/agent_api");
    const ports = [await freePort(), await freePort()];
    // Started at once: one migrates and seeds the demo, the other finds it done.
    instances.push(
      ...(await Promise.all(
        ports.map((port, i) =>
          serve([
            "--demo",
            "--store",
            store,
            "--port",
            String(port),
            "--data",
            join(dir, `instance-${i}`),
            "--write-env-file",
            join(dir, `instance-${i}.env`),
            "--turn-lease-ms",
            String(LEASE_MS),
            "--session-delay-ms",
            String(SESSION_DELAY_MS),
            "--log-level",
            "warn",
          ]),
        ),
      )),
    );
    const direct = ports.map((port) => `http://127.0.0.1:${port}`);
    const balancerPort = await freePort();
    // The config the README documents: round robin, no stickiness, SSE passed through unbuffered.
    nginx = await startNginx(
      join(dir, "nginx"),
      balancerPort,
      `upstream agent_api { ${ports.map((port) => `server 127.0.0.1:${port};`).join(" ")} }
  server {
    listen 127.0.0.1:${balancerPort};
    client_max_body_size 50m;
    location / {
      proxy_pass http://agent_api;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 600s;
    }
  }`,
    );
    const balancer = `http://127.0.0.1:${balancerPort}`;

    // 1. The conformance suite through the balancer.
    const vars = {
      ...parseEnvFile(join(dir, "instance-0.env")),
      AGENT_API_BASE_URL: balancer,
      AGENT_API_FLOW_URL: balancer,
    };
    // Those checks pass when the turns happen to land on one instance, so they are neither counted as
    // passes nor listed as expected failures: any other failure fails the run.
    const report = join(dir, "report.json");
    await check(vars, ["--json", report]);
    const results = (
      JSON.parse(readFileSync(report, "utf8")) as { results: Array<{ id: string; outcome: string }> }
    ).results;
    const failed = results.filter((r) => r.outcome === "fail").map((r) => r.id);
    const unexplained = failed.filter((id) => !NEEDS_SHARED_FILES.includes(id));
    expect(
      results.length > 100 && unexplained.length === 0,
      `the conformance suite through nginx over ${ports.length} instances: ${results.length} checks, failed: ${failed.join(", ") || "none"}${unexplained.length > 0 ? "" : " (only checks that need files shared across instances)"}`,
    );

    // 2. One turn at a time per conversation, across instances.
    const slow = "Run the shell command: sleep 3";
    const shared = `lock-${Date.now()}`;
    const first = sendTurn(direct[0], shared, slow);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const second = await sendTurn(direct[1], shared, "Say hello.");
    const firstDone = await first;
    expect(firstDone.completed && second.completed, "both turns complete");
    expect(
      second.headersMs > 2_000,
      `a turn on instance 1 waits for the turn running on instance 0 (waited ${Math.round(second.headersMs)} ms)`,
    );

    // 2b. A delete on one instance ends the turn running on another (rather than waiting for it).
    const doomed = `delete-${Date.now()}`;
    let deleteMs = 0;
    let deleteStatus = 0;
    let deleted: Promise<void> = Promise.resolve();
    const interrupted = await sendTurn(direct[0], doomed, "Run the shell command: sleep 8", () => {
      const started = performance.now();
      deleted = fetch(`${direct[1]}/api/agents/${AGENT}/conversations/${doomed}`, {
        method: "DELETE",
        headers: { "x-api-key": KEY },
      }).then((response) => {
        deleteStatus = response.status;
        deleteMs = performance.now() - started;
      });
    });
    await deleted;
    expect(
      deleteStatus === 204 && deleteMs < 5_000,
      `a delete on instance 1 ends the 8 s turn running on instance 0 (204 in ${Math.round(deleteMs)} ms)`,
    );
    expect(
      !interrupted.completed &&
        interrupted.text.includes("event: error") &&
        (await loggedTurnFailure(instances[0], doomed)) === "AGENT_API_CONVERSATION_DELETED",
      "that turn's stream ends with an error event saying the conversation was deleted",
    );

    // 3. SIGKILL mid-turn.
    const victim = `fault-${Date.now()}`;
    const warm = await sendTurn(balancer, victim, "Remember this code word: n-fault-1");
    expect(warm.completed, "a first turn through nginx completes");
    let killedAt = 0;
    const cut = await sendTurn(direct[0], victim, `${slow} and say the killed turn's words`, () => {
      killedAt = performance.now();
      instances[0].child.kill("SIGKILL");
    });
    expect(killedAt > 0 && !cut.completed, "the killed instance's client sees its stream cut");
    const next = await sendTurn(direct[1], victim, "Say hello after the fault.");
    const waited = performance.now() - killedAt;
    expect(
      next.status === 200 && next.completed,
      "the next turn on that conversation works on another instance",
    );
    expect(
      waited < LEASE_MS + 5_000,
      `the lock freed within the lease (${Math.round(waited)} ms after the kill)`,
    );
    const after = await transcript(balancer, victim);
    const userTexts = after.messages.filter((m) => m.role === "user").map((m) => m.content[0]?.text ?? "");
    expect(
      userTexts.some((t) => t.includes("the killed turn's words")),
      "the killed turn's acknowledged user message is in the transcript",
    );
    expect(
      after.events.some((e) => e.type === "error" && e.code === "AGENT_API_SERVER_STOPPED"),
      "the killed turn is recorded with an error event",
    );
    expect(userTexts.at(-1) === "Say hello after the fault.", "the next turn comes after it");
    const listed = await fetch(`${balancer}/api/agents/${AGENT}/conversations`, {
      headers: { "x-api-key": KEY },
    });
    expect(listed.status === 200, "the remaining instance keeps serving through nginx");

    // 4. A pending agent_session_id recording outlives the instance that ran the turn: a third instance joins,
    // runs a turn, and is killed as the stream ends; instance 1 records the session once it is due.
    const late = await serve([
      "--demo",
      "--store",
      store,
      "--port",
      "0",
      "--data",
      join(dir, "instance-2"),
      "--write-env-file",
      join(dir, "instance-2.env"),
      "--turn-lease-ms",
      String(LEASE_MS),
      "--session-delay-ms",
      String(SESSION_DELAY_MS),
      "--log-level",
      "warn",
    ]);
    instances.push(late);
    const lateUrl = parseEnvFile(join(dir, "instance-2.env")).AGENT_API_BASE_URL;
    const orphan = `orphan-${Date.now()}`;
    const written = await sendTurn(lateUrl, orphan, "Remember this code word: n-orphan-7");
    late.child.kill("SIGKILL");
    expect(written.completed, "a turn on a third instance completes, which is then killed");
    let sessionId: string | null = null;
    const killed = performance.now();
    while (sessionId === null && performance.now() - killed < SESSION_DELAY_MS + 5_000) {
      const got = await fetch(`${direct[1]}/api/agents/${AGENT}/conversations/${orphan}`, {
        headers: { "x-api-key": KEY },
      });
      sessionId = ((await got.json()) as { conversation: { agent_session_id: string | null } }).conversation
        .agent_session_id;
      if (sessionId === null) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(
      sessionId !== null,
      `another instance recorded the dead instance's session (${Math.round(performance.now() - killed)} ms after the kill)`,
    );
    const recalled = await sendTurn(direct[1], orphan, "What code word did I ask you to remember?");
    expect(
      recalled.text.includes("n-orphan-7"),
      "the next turn, on another instance, resumes with that session",
    );

    // 5. A restart: SIGTERM during a turn lets it finish (grace period) before the instance exits.
    const draining = instances[1].child;
    const exited = new Promise<number | null>((resolve) => draining.once("exit", (code) => resolve(code)));
    const drained = await sendTurn(direct[1], `drain-${Date.now()}`, slow, () => draining.kill("SIGTERM"));
    expect(drained.completed, "a turn running when its instance is sent SIGTERM finishes (message_stop)");
    expect((await exited) === 0, "the instance then exits cleanly");
  } finally {
    await nginx?.close();
    await Promise.all(instances.map((instance) => stop(instance.child)));
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(
    failures.length === 0 ? "instances: all passed\n" : `instances: ${failures.length} failed\n`,
  );
  return failures.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `test:postgres instances: ${error instanceof Error ? error.stack : String(error)}\n`,
    );
    process.exit(2);
  },
);
