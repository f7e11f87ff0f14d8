/**
 * A turn's sandbox, prepared on first use. A turn that runs no tool and brings no attachment never touches
 * the file system: restoring working files, refreshing a clone and resetting `outputs/` cost more than the
 * rest of such a turn, and nothing could observe them. The first tool call prepares it, so from the agent's
 * side the files, repository and secrets are live for the whole turn all the same.
 */

import { ApiError, filesOverQuota, repoRefused, sandboxFailed } from "../errors/catalogue.ts";
import { OverQuotaError, RepoRefusedError } from "../sandbox/index.ts";
import type { FinishReport, ToolRunner, TurnSandbox } from "../sandbox/types.ts";
import { FileSetLeaseLostError } from "../store/file-store.ts";
import { TurnLeaseLostError } from "../store/types.ts";

export class LazySandbox {
  readonly #acquire: () => Promise<TurnSandbox>;
  readonly #signal: AbortSignal | undefined;
  #sandbox: Promise<TurnSandbox> | undefined;

  /** `signal` ends the turn: a running tool is killed with everything it started. */
  constructor(acquire: () => Promise<TurnSandbox>, signal?: AbortSignal) {
    this.#acquire = acquire;
    this.#signal = signal;
  }

  /**
   * The sandbox, prepared now if it was not yet; stored files past this server's quota are
   * AGENT_API_FILES_OVER_QUOTA, any other failure to prepare it AGENT_API_SANDBOX_FAILED.
   */
  ready(): Promise<TurnSandbox> {
    this.#sandbox ??= this.#acquire().catch((error: unknown) => {
      if (error instanceof OverQuotaError) throw filesOverQuota(error.message);
      throw sandboxFailed(error instanceof Error ? error.message : String(error));
    });
    return this.#sandbox;
  }

  /** Tools that prepare the sandbox on their first call. */
  readonly tools: ToolRunner = {
    run: async (name, input, signal) => (await this.ready()).tools.run(name, input, signal ?? this.#signal),
  };

  /**
   * Ends the turn in the sandbox (commit/push, publish outputs); null when it was never prepared. Changes the
   * server would not commit or push end the turn with AGENT_API_REPO_REFUSED and the sandbox's reason; files
   * not saved for a lease another instance took, with AGENT_API_TURN_LEASE_LOST; files past the disk quota,
   * which are not saved, with AGENT_API_FILES_OVER_QUOTA; any other failure of the sandbox with
   * AGENT_API_SANDBOX_FAILED.
   */
  async finish(outcome: "completed" | "failed" = "completed"): Promise<FinishReport | null> {
    if (!this.#sandbox) return null;
    try {
      return await (await this.#sandbox).finish(outcome);
    } catch (error) {
      if (error instanceof RepoRefusedError) throw repoRefused(error.message);
      // The reason (sizes and counts, no path) is the caller's to read: the files are theirs to remove.
      if (error instanceof OverQuotaError) throw filesOverQuota(error.message);
      // The turn's files were not saved because another instance holds its conversation now: the turn's
      // failure is that, as its commit's would be, not a fault of the sandbox.
      if (error instanceof FileSetLeaseLostError) throw new TurnLeaseLostError();
      throw error instanceof ApiError
        ? error
        : sandboxFailed(error instanceof Error ? error.message : String(error));
    }
  }
}
