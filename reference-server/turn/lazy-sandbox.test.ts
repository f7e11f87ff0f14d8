/**
 * The service's end of a repo agent's commit: a refusal of the sandbox (a nested .git, past the quota) reaches the
 * turn as the catalogue's AGENT_API_REPO_REFUSED with the sandbox's reason; a sandbox that cannot be prepared
 * as AGENT_API_SANDBOX_FAILED. A real manager, repository and tools.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ApiError } from "../errors/catalogue.ts";
import { repoAgent, seededBareRepo, TestBed, turnRequest } from "../sandbox/testing.ts";
import { failureOf } from "./failure.ts";
import { LazySandbox } from "./lazy-sandbox.ts";

const bed = new TestBed();
afterEach(() => bed.cleanup());

describe("a turn's lazy sandbox", () => {
  it("ends a writable turn whose changes the server refuses with AGENT_API_REPO_REFUSED and the reason", async () => {
    const bare = await seededBareRepo(bed, "site", "# Site\n");
    const manager = await bed.manager(await bed.dir("root"));
    const sandbox = new LazySandbox(() =>
      manager.acquire(turnRequest("refused", repoAgent(bare, "site"), { readOnly: false })),
    );
    await sandbox.tools.run("write_file", { path: "sub/.git", content: "gitdir: /elsewhere\n" });
    const refusal = await sandbox.finish().catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(ApiError);
    expect(refusal).toMatchObject({
      code: "AGENT_API_REPO_REFUSED",
      message: expect.stringContaining("not committed: sub/.git (file) is a .git entry in a sub-folder"),
    });
  });

  it("keeps a fault of the server's own out of the caller's message", () => {
    const failure = failureOf(new Error("ENOENT: no such file or directory, open '/var/lib/agent-api/x'"));
    expect(failure).toMatchObject({ code: "AGENT_API_INTERNAL", message: "Internal server error" });
    expect(failure.detail).toContain("/var/lib/agent-api/x");
  });

  it("names a sandbox that cannot be prepared (a repository that is not there) AGENT_API_SANDBOX_FAILED", async () => {
    const manager = await bed.manager(await bed.dir("root"));
    const missing = `${await bed.dir("git")}/missing.git`;
    const sandbox = new LazySandbox(() =>
      manager.acquire(turnRequest("unclonable", repoAgent(missing, "site"))),
    );
    const failure = await sandbox.ready().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ApiError);
    expect(failure).toMatchObject({ code: "AGENT_API_SANDBOX_FAILED" });
    // git's words and the host path go to the operator's log line, never to the caller's error event.
    const turnFailure = failureOf(failure);
    expect(turnFailure.message).not.toContain(missing);
    expect(turnFailure.message).toBe(
      "The agent's working directory could not be prepared or finished for this turn",
    );
    expect(turnFailure.detail).toContain(missing);
    // The turn's end sees the same failure, not a second one.
    await expect(sandbox.finish()).rejects.toBe(failure);
  });
});
