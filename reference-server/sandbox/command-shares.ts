/**
 * A workspace's share of the sandbox pool: tool calls of one workspace running at once. Each call may hold up
 * to `pids` processes and `memoryBytes` of memory (its cgroup, or its rlimits where there are none), so with
 * at most `commandsPerWorkspace` calls a workspace holds at most that many times those, below the pool of
 * all sandboxes (`totalPids`, `totalMemoryBytes`): another workspace's commands always find room. The share
 * is kept by the server itself, so it holds where there are no cgroups as well.
 *
 * A call past the share waits for a slot of its own workspace (its time limit starts once it runs); one that
 * waited a whole tool time-out gets a tool error saying so, and the turn goes on.
 */
import type { ToolOutcome } from "./types.ts";

interface Waiter {
  grant(): void;
}

export class CommandShares {
  readonly #perWorkspace: number;
  readonly #maxWaitMs: number;
  readonly #running = new Map<string, number>();
  readonly #queues = new Map<string, Waiter[]>();

  constructor(perWorkspace: number, maxWaitMs: number) {
    this.#perWorkspace = perWorkspace;
    this.#maxWaitMs = maxWaitMs;
  }

  /** Runs `call` in one of `workspace`'s slots, once one is free; ends waiting when `signal` aborts. */
  async run(workspace: string, signal: AbortSignal, call: () => Promise<ToolOutcome>): Promise<ToolOutcome> {
    const granted = await this.#slot(workspace, signal);
    if (!granted)
      return {
        isError: true,
        content: signal.aborted
          ? "The tool call was ended before it started"
          : `This workspace already runs ${this.#perWorkspace} tool calls at once (its share of the sandbox), and none ended within ${Math.round(this.#maxWaitMs / 1000)} s: try again later`,
      };
    try {
      return await call();
    } finally {
      this.#free(workspace);
    }
  }

  /** Tool calls running right now, in all (0 when none runs). */
  get running(): number {
    let total = 0;
    for (const n of this.#running.values()) total += n;
    return total;
  }

  #slot(workspace: string, signal: AbortSignal): Promise<boolean> {
    const running = this.#running.get(workspace) ?? 0;
    if (running < this.#perWorkspace && !this.#queues.has(workspace)) {
      this.#running.set(workspace, running + 1);
      return Promise.resolve(true);
    }
    if (signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const queue = this.#queues.get(workspace) ?? [];
      this.#queues.set(workspace, queue);
      const give = (granted: boolean) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        resolve(granted);
      };
      const waiter: Waiter = { grant: () => give(true) };
      const leave = () => {
        const at = queue.indexOf(waiter);
        if (at >= 0) queue.splice(at, 1);
        if (queue.length === 0 && this.#queues.get(workspace) === queue) this.#queues.delete(workspace);
        give(false);
      };
      const onAbort = () => leave();
      const timer = setTimeout(leave, this.#maxWaitMs);
      signal.addEventListener("abort", onAbort, { once: true });
      queue.push(waiter);
    });
  }

  /** Hands the slot to the workspace's next waiter, or frees it. */
  #free(workspace: string): void {
    const queue = this.#queues.get(workspace);
    const next = queue?.shift();
    if (queue && queue.length === 0) this.#queues.delete(workspace);
    if (next) {
      next.grant();
      return;
    }
    const n = (this.#running.get(workspace) ?? 1) - 1;
    if (n === 0) this.#running.delete(workspace);
    else this.#running.set(workspace, n);
  }
}
