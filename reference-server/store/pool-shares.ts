/**
 * Each workspace's share of the PostgreSQL pool: a request's queries run as its workspace (`asWorkspace`, set
 * by the http layer around every route's handler), and one workspace holds at most `perWorkspace` of the
 * pool's connections at once, counting those it waits for inside the pool. Its further queries wait in a
 * line of its own, outside the pool's, so another workspace's query finds a connection (or is next in the
 * pool's line) however many one tenant sends. Work of no workspace (start-up, sweeps, recordings come due)
 * is not counted; lease renewals have a pool of their own (postgres.ts).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import pg from "pg";

/** Of the default pool of 10: 4 stay free for the other workspaces whatever one does. */
export const DEFAULT_POOL_CONNECTIONS_PER_WORKSPACE = 6;

const currentWorkspace = new AsyncLocalStorage<string>();

/** Runs `work` with its store queries counted against `workspaceId`'s share of the pool. */
export function asWorkspace<T>(workspaceId: string | undefined, work: () => T): T {
  return workspaceId === undefined ? work() : currentWorkspace.run(workspaceId, work);
}

interface Share {
  held: number;
  waiting: Array<() => void>;
}

type ConnectCallback = (
  error: Error | undefined,
  client: pg.PoolClient | undefined,
  done: () => void,
) => void;

/** What a pool of this kind holds per workspace (a test's and an operator's view). */
export interface PoolShareLive {
  held: Map<string, number>;
  waiting: Map<string, number>;
}

/**
 * A pg.Pool whose `connect` (and so `query`, which connects through it) first takes a slot of the caller's
 * workspace. The slot is given back when the client is released, however it is released.
 */
export class WorkspaceSharedPool extends pg.Pool {
  readonly #perWorkspace: number;
  readonly #shares = new Map<string, Share>();

  constructor(config: pg.PoolConfig, perWorkspace: number) {
    super(config);
    this.#perWorkspace = Math.max(1, Math.min(perWorkspace, config.max ?? 10));
  }

  live(): PoolShareLive {
    const held = new Map<string, number>();
    const waiting = new Map<string, number>();
    for (const [workspace, share] of this.#shares) {
      held.set(workspace, share.held);
      waiting.set(workspace, share.waiting.length);
    }
    return { held, waiting };
  }

  // biome-ignore lint/suspicious/noExplicitAny: pg's overloads (promise and callback forms) in one body.
  override connect(callback?: ConnectCallback): any {
    const workspace = currentWorkspace.getStore();
    if (workspace === undefined) return callback ? super.connect(callback) : super.connect();
    const connected = this.#take(workspace).then(async (leave) => {
      try {
        const client = await super.connect();
        const release = client.release.bind(client);
        let released = false;
        client.release = (error?: Error | boolean) => {
          if (!released) {
            released = true;
            leave();
          }
          return release(error);
        };
        return client;
      } catch (error) {
        leave();
        throw error;
      }
    });
    if (!callback) return connected;
    connected.then(
      (client) => callback(undefined, client, () => client.release()),
      (error: Error) => callback(error, undefined, () => undefined),
    );
    return undefined;
  }

  /** Waits for a slot of the workspace's share; resolves with the function that gives it back. */
  #take(workspace: string): Promise<() => void> {
    let share = this.#shares.get(workspace);
    if (share === undefined) {
      share = { held: 0, waiting: [] };
      this.#shares.set(workspace, share);
    }
    const own = share;
    const leave = () => {
      const next = own.waiting.shift();
      if (next) return next();
      own.held--;
      if (own.held === 0) this.#shares.delete(workspace);
    };
    if (own.held < this.#perWorkspace) {
      own.held++;
      return Promise.resolve(leave);
    }
    // The slot passes from the leaver to the next in line without being counted free in between.
    return new Promise((resolve) => own.waiting.push(() => resolve(leave)));
  }
}
